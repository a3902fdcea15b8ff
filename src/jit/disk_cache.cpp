#include "jit/disk_cache.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/env.hpp"

namespace fs = std::filesystem;

namespace shapejit::jit {
namespace {

constexpr const char* kEntrySuffix = ".sjc";
constexpr const char* kTempMarker = ".tmp.";
constexpr auto kStaleTempAge = std::chrono::hours(1);

bool is_temp_file(const fs::path& p) { return p.filename().string().find(kTempMarker) != std::string::npos; }
bool is_entry_file(const fs::path& p) { return !is_temp_file(p) && p.extension() == kEntrySuffix; }

// Every regular file below `dir` (entries and temp files), skipping anything unreadable.
std::vector<fs::directory_entry> files_below(const fs::path& dir) {
  std::vector<fs::directory_entry> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_regular_file(type_ec)) out.push_back(*it);
  }
  return out;
}

std::string errno_text(const char* what, const fs::path& path) {
  return fmt::format("{} {}: {}", what, path.string(), std::strerror(errno));
}

// The process may not grow files past RLIMIT_FSIZE; writing past it would raise SIGXFSZ.
bool fits_file_size_limit(std::size_t bytes) {
  struct rlimit limit{};
  if (::getrlimit(RLIMIT_FSIZE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return true;
  return bytes <= limit.rlim_cur;
}

}  // namespace

bool read_whole_file(const fs::path& path, std::vector<std::uint8_t>& out, std::string& problem) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    problem = errno_text("cannot open", path);
    return false;
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    problem = fmt::format("{} is not a regular file", path.string());
    ::close(fd);
    return false;
  }
  out.resize(static_cast<std::size_t>(st.st_size));
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  out.resize(done);
  ::close(fd);
  return true;
}

std::string write_file_atomically(const fs::path& final_path, std::span<const std::uint8_t> bytes) {
  std::error_code ec;
  fs::create_directories(final_path.parent_path(), ec);
  if (ec) return fmt::format("cannot create {}: {}", final_path.parent_path().string(), ec.message());
  if (!fits_file_size_limit(bytes.size()))
    return fmt::format("a file of {} bytes exceeds this process's file size limit", bytes.size());
  static std::atomic<std::uint64_t> serial{0};
  const fs::path temp = final_path.string() + fmt::format("{}{}.{}", kTempMarker, ::getpid(), serial++);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return errno_text("cannot create", temp);
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  std::string problem;
  if (done != bytes.size()) problem = errno_text("cannot write", temp);
  if (::close(fd) != 0 && problem.empty()) problem = errno_text("cannot write", temp);
  if (problem.empty() && ::rename(temp.c_str(), final_path.c_str()) != 0) {
    // A directory squatting on the entry's name: replace it.
    if (errno == EISDIR || errno == ENOTEMPTY || errno == EEXIST) {
      fs::remove_all(final_path, ec);
      if (::rename(temp.c_str(), final_path.c_str()) != 0) problem = errno_text("cannot rename into", final_path);
    } else {
      problem = errno_text("cannot rename into", final_path);
    }
  }
  if (!problem.empty()) ::unlink(temp.c_str());
  return problem;
}

CacheDir::CacheDir(fs::path root) : root_(std::move(root)) {}

fs::path CacheDir::version_dir() const { return root_ / fmt::format("v{}", kEntryFormat); }

fs::path CacheDir::entry_path(const CacheKey& key) const {
  const std::string hex = key.hex();
  return version_dir() / hex.substr(0, 2) / (hex + kEntrySuffix);
}

CacheDir::Lookup CacheDir::read(const CacheKey& key) const {
  Lookup result;
  const fs::path path = entry_path(key);
  std::error_code ec;
  const auto status = fs::symlink_status(path, ec);
  if (ec || !fs::exists(status)) return result;
  result.present = true;
  if (!read_whole_file(path, result.bytes, result.problem)) return result;
  result.entry = decode_entry(result.bytes, &key);
  result.status = result.entry.status;
  if (result.status != EntryStatus::ok)
    result.problem = fmt::format("{}: {}", path.string(), entry_status_text(result.status));
  return result;
}

std::string CacheDir::write(const CacheKey& key, std::span<const std::uint8_t> bytes) const {
  return write_file_atomically(entry_path(key), bytes);
}

void CacheDir::remove(const CacheKey& key) const {
  std::error_code ec;
  fs::remove_all(entry_path(key), ec);
}

void CacheDir::touch(const CacheKey& key) const {
  ::utimensat(AT_FDCWD, entry_path(key).c_str(), nullptr, 0);
}

CacheStats CacheDir::stats() const {
  CacheStats s;
  for (const auto& f : files_below(version_dir())) {
    std::error_code ec;
    if (is_temp_file(f.path())) {
      ++s.temp_files;
    } else if (is_entry_file(f.path())) {
      ++s.entries;
      s.bytes += f.file_size(ec);
    }
  }
  return s;
}

VerifyReport CacheDir::verify(bool repair) const {
  VerifyReport report;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(version_dir(), fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    const fs::path path = it->path();
    std::error_code type_ec;
    const bool regular = it->is_regular_file(type_ec);
    const bool misplaced_dir = it->is_directory(type_ec) && path.extension() == kEntrySuffix;
    if (regular && is_temp_file(path)) {
      if (repair && fs::remove(path, type_ec)) ++report.removed;
      continue;
    }
    if (!misplaced_dir && !(regular && is_entry_file(path))) continue;
    ++report.checked;
    std::string problem;
    if (misplaced_dir) {
      problem = "a directory where an entry should be";
      it.disable_recursion_pending();
    } else {
      std::vector<std::uint8_t> bytes;
      if (read_whole_file(path, bytes, problem)) {
        const DecodedEntry entry = decode_entry(bytes);
        if (entry.status != EntryStatus::ok) {
          problem = entry_status_text(entry.status);
        } else if (entry.info.key.hex() != path.stem().string()) {
          problem = entry_status_text(EntryStatus::key_mismatch);
        }
      }
    }
    if (problem.empty()) continue;
    ++report.bad;
    report.problems.push_back(fmt::format("{}: {}", path.string(), problem));
    if (repair && fs::remove_all(path, type_ec) > 0) ++report.removed;
  }
  return report;
}

PruneReport CacheDir::prune(std::uint64_t max_bytes) const {
  struct Item {
    fs::path path;
    std::uint64_t bytes;
    fs::file_time_type used;
  };
  PruneReport report;
  std::vector<Item> items;
  const auto now = fs::file_time_type::clock::now();
  for (const auto& f : files_below(version_dir())) {
    std::error_code ec;
    const auto used = f.last_write_time(ec);
    if (is_temp_file(f.path())) {
      if (!ec && now - used > kStaleTempAge && fs::remove(f.path(), ec)) ++report.removed;
    } else if (is_entry_file(f.path())) {
      items.push_back({f.path(), f.file_size(ec), used});
      report.bytes_left += items.back().bytes;
    }
  }
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.used < b.used; });
  for (const Item& item : items) {
    if (report.bytes_left <= max_bytes) break;
    std::error_code ec;
    if (!fs::remove(item.path, ec)) continue;
    ++report.removed;
    report.bytes_removed += item.bytes;
    report.bytes_left -= item.bytes;
  }
  return report;
}

std::uint64_t CacheDir::clear() const {
  std::uint64_t removed = 0;
  for (const auto& f : files_below(version_dir())) {
    std::error_code ec;
    if ((is_entry_file(f.path()) || is_temp_file(f.path())) && fs::remove(f.path(), ec)) ++removed;
  }
  return removed;
}

std::optional<fs::path> user_cache_root() {
  if (auto dir = env_string("SHAPEJIT_CACHE_DIR")) return fs::path(*dir);
  if (auto xdg = env_string("XDG_CACHE_HOME")) return fs::path(*xdg) / "shapejit";
  if (auto home = env_string("HOME")) return fs::path(*home) / ".cache" / "shapejit";
  return std::nullopt;
}

std::vector<fs::path> deployment_cache_roots() {
  std::vector<fs::path> roots;
  const auto list = env_string("SHAPEJIT_CACHE_PATH");
  if (!list) return roots;
  std::size_t start = 0;
  while (start <= list->size()) {
    const std::size_t end = std::min(list->find(':', start), list->size());
    if (end > start) roots.emplace_back(list->substr(start, end - start));
    start = end + 1;
  }
  return roots;
}

std::uint64_t cache_max_bytes() {
  constexpr std::uint64_t kDefaultMb = 1024;
  std::uint64_t mb = kDefaultMb;
  if (auto value = env_string("SHAPEJIT_CACHE_MAX_MB")) {
    try {
      mb = std::stoull(*value);
    } catch (const std::exception&) {
      log(LogLevel::warn, "SHAPEJIT_CACHE_MAX_MB={} is not a number; using {}", *value, kDefaultMb);
    }
  }
  return mb * 1024 * 1024;
}

}  // namespace shapejit::jit
