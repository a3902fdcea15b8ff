#include "jit/deploy.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cctype>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "core/errors.hpp"
#include "jit/cache_entry.hpp"
#include "jit/disk_cache.hpp"
#include "jit/kernel_cache.hpp"

namespace fs = std::filesystem;

namespace shapejit::jit {
namespace {

/// A built (or already present) entry, as the index lists it.
struct IndexEntry {
  std::string key;
  std::string arch;
  std::string label;
  std::string nvrtc_version;
  std::uint64_t bytes = 0;
  std::string manifest_line;
};

struct BuildOutcome {
  std::vector<IndexEntry> entries;
  DeployOutcome counts;
};

/// Builds one job into `out` unless a valid entry is already there; returns its index entry.
IndexEntry build_one(const DeployJob& job, const CacheDir& out, bool& compiled) {
  IndexEntry entry{job.key.hex(), job.arch, job.program.label, "", 0, job.manifest_line};
  const CacheDir::Lookup present = out.read(job.key);
  if (present.status == EntryStatus::ok) {
    entry.nvrtc_version = present.entry.info.nvrtc_version;
    entry.bytes = present.bytes.size();
    compiled = false;
    return entry;
  }
  const std::vector<std::uint8_t> bytes = compile_entry(job.program, job.arch);
  if (std::string why = out.write(job.key, bytes); !why.empty()) fail(ErrorCode::io_error, "{}", why);
  entry.nvrtc_version = decode_entry(bytes).info.nvrtc_version;
  entry.bytes = bytes.size();
  compiled = true;
  return entry;
}

/// Runs the jobs on `workers` threads, each taking the next job until none is left.
BuildOutcome build_all(const std::vector<DeployJob>& jobs, const CacheDir& out, unsigned workers,
                       DeployProgress& progress) {
  BuildOutcome outcome;
  std::vector<std::optional<IndexEntry>> entries(jobs.size());
  std::atomic<std::size_t> next{0}, compiled{0}, present{0}, failed{0};
  auto work = [&] {
    for (std::size_t i; (i = next++) < jobs.size();) {
      const DeployJob& job = jobs[i];
      try {
        bool was_compiled = false;
        entries[i] = build_one(job, out, was_compiled);
        ++(was_compiled ? compiled : present);
        progress.kernel_done(job, was_compiled ? "compiled" : "already present:");
      } catch (const std::exception& e) {
        ++failed;
        progress.report(fmt::format("{}: {} for {}: {}", job.where, job.program.label, job.arch, e.what()));
        progress.kernel_done(job, "FAILED");
      }
    }
  };
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < std::min<std::size_t>(workers, jobs.size()); ++t) threads.emplace_back(work);
  for (std::thread& t : threads) t.join();
  for (auto& e : entries)
    if (e) outcome.entries.push_back(std::move(*e));
  outcome.counts = {compiled, present, failed};
  return outcome;
}

nlohmann::json to_json(const IndexEntry& e) {
  return {{"key", e.key}, {"arch", e.arch},   {"label", e.label},
          {"nvrtc_version", e.nvrtc_version}, {"bytes", e.bytes}, {"manifest_line", e.manifest_line}};
}

/// Entries of an index.json written earlier into the same directory by this library version and
/// key schema, whose entry files are still there; anything else in it is dropped.
std::vector<IndexEntry> previous_entries(const CacheDir& out) {
  std::vector<IndexEntry> entries;
  std::ifstream in(out.root() / "index.json");
  const nlohmann::json index = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!index.is_object() || index.value("library_version", "") != version() ||
      index.value("key_schema", -1) != kKeySchema || !index.contains("entries") || !index["entries"].is_array())
    return entries;
  for (const nlohmann::json& e : index["entries"]) {
    if (!e.is_object()) continue;
    IndexEntry entry{e.value("key", ""), e.value("arch", ""), e.value("label", ""), e.value("nvrtc_version", ""),
                     e.value("bytes", std::uint64_t{0}), e.value("manifest_line", "")};
    const std::string expected_name = entry.key + ".sjc";
    const fs::path file = out.root() / fmt::format("v{}", kEntryFormat) / entry.key.substr(0, 2) / expected_name;
    std::error_code ec;
    if (entry.key.size() == 32 && fs::is_regular_file(file, ec)) entries.push_back(std::move(entry));
  }
  return entries;
}

/// Writes `text` to `path` through a temp file and a rename, so readers never see half an index.
void write_atomically(const fs::path& path, const std::string& text) {
  const fs::path temp = path.string() + fmt::format(".tmp.{}", ::getpid());
  {
    std::ofstream file(temp, std::ios::binary | std::ios::trunc);
    file << text;
    if (!file.flush()) fail(ErrorCode::io_error, "cannot write {}", temp.string());
  }
  std::error_code ec;
  fs::rename(temp, path, ec);
  if (ec) {
    fs::remove(temp, ec);
    fail(ErrorCode::io_error, "cannot rename {} into place", path.string());
  }
}

/// Renders the plain-text index: a header of `key value` lines, then one line per entry.
std::string index_text(const nlohmann::json& index) {
  std::string text = "# shapejit deployment cache index; the entries are looked up by key, this file is for people\n";
  for (const char* field : {"library_version", "key_schema", "entry_format", "nvrtc_version"})
    text += fmt::format("{} {}\n", field, index[field].is_string() ? index[field].get<std::string>() : index[field].dump());
  text += fmt::format("archs {}\n# key arch label manifest-line\n",
                      fmt::join(index["archs"].get<std::vector<std::string>>(), ","));
  for (const auto& e : index["entries"])
    text += fmt::format("{} {} {} {}\n", e["key"].get<std::string>(), e["arch"].get<std::string>(),
                        e["label"].get<std::string>(), e["manifest_line"].get<std::string>());
  return text;
}

/// Merges `built` with what an earlier run indexed and rewrites index.json and index.txt. Several
/// precompiles into one directory take turns through an flock on the directory.
void write_index(const CacheDir& out, const std::vector<IndexEntry>& built, const std::string& nvrtc_version) {
  const int dir_fd = ::open(out.root().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) fail(ErrorCode::io_error, "{}: cannot open the deployment directory", out.root().string());
  ::flock(dir_fd, LOCK_EX);
  std::map<std::pair<std::string, std::string>, IndexEntry> merged;  // by (arch, key): sorted, stable output
  for (auto& e : previous_entries(out)) merged[{e.arch, e.key}] = e;
  for (const auto& e : built) merged[{e.arch, e.key}] = e;
  std::set<std::string> archs;
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& [id, e] : merged) {
    archs.insert(e.arch);
    entries.push_back(to_json(e));
  }
  const nlohmann::json index = {{"library_version", version()}, {"key_schema", kKeySchema},
                                {"entry_format", kEntryFormat}, {"nvrtc_version", nvrtc_version},
                                {"archs", archs},                    {"entries", entries}};
  try {
    write_atomically(out.root() / "index.json", index.dump(1) + "\n");
    write_atomically(out.root() / "index.txt", index_text(index));
  } catch (...) {
    ::close(dir_fd);  // also releases the lock
    throw;
  }
  ::close(dir_fd);
}

}  // namespace

DeployOutcome build_deployment(const std::vector<DeployJob>& jobs, const fs::path& out_dir, unsigned workers,
                               DeployProgress& progress) {
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) fail(ErrorCode::io_error, "{}: cannot create the deployment directory: {}", out_dir.string(), ec.message());
  const CacheDir out(out_dir);
  // Load NVRTC before starting workers, so that its absence is one clear error.
  const std::string nvrtc = jobs.empty() ? "" : nvrtc_version();
  BuildOutcome outcome = build_all(jobs, out, workers, progress);
  write_index(out, outcome.entries, nvrtc);
  return outcome.counts;
}

/// NVRTC architecture names: sm_ followed by digits and at most one letter (sm_80, sm_90a, sm_100f).
bool is_arch_name(const std::string& arch) {
  if (arch.size() < 5 || arch.compare(0, 3, "sm_") != 0) return false;
  std::size_t i = 3;
  while (i < arch.size() && std::isdigit(static_cast<unsigned char>(arch[i]))) ++i;
  const std::size_t digits = i - 3;
  if (i < arch.size() && std::islower(static_cast<unsigned char>(arch[i]))) ++i;
  return digits >= 2 && i == arch.size();
}

}  // namespace shapejit::jit
