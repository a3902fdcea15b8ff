#include "jit/record.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <mutex>
#include <set>

#include "core/env.hpp"

namespace shapejit::jit {
namespace {

bool file_has_line(int fd, const std::string& line) {
  std::string content;
  char buffer[65536];
  ::lseek(fd, 0, SEEK_SET);
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) content.append(buffer, static_cast<std::size_t>(n));
  std::size_t start = 0;
  while (start < content.size()) {
    const std::size_t end = std::min(content.find('\n', start), content.size());
    if (content.compare(start, end - start, line) == 0 && end - start == line.size()) return true;
    start = end + 1;
  }
  return false;
}

const std::optional<std::string>& record_path() {
  static const std::optional<std::string> path = env_string("SHAPEJIT_RECORD");
  return path;
}

}  // namespace

bool recording() noexcept { return record_path().has_value(); }

void record_manifest_line(const std::string& line, const std::vector<SpecKey>& kernels) {
  const std::optional<std::string>& path = record_path();
  if (!path || line.empty()) return;
  static std::mutex mutex;
  static std::set<std::vector<std::uint64_t>> recorded;
  std::vector<std::uint64_t> hashes;
  for (const SpecKey& k : kernels) hashes.push_back(k.hash);
  std::lock_guard lock(mutex);
  if (!recorded.insert(hashes).second) return;
  const int fd = ::open(path->c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    static std::once_flag once;
    std::call_once(once, [&] { log(LogLevel::warn, "SHAPEJIT_RECORD={} cannot be opened; nothing is recorded", *path); });
    return;
  }
  ::flock(fd, LOCK_EX);
  if (!file_has_line(fd, line)) {
    const std::string text = line + "\n";
    [[maybe_unused]] const ssize_t written = ::write(fd, text.data(), text.size());
  }
  ::flock(fd, LOCK_UN);
  ::close(fd);
}

}  // namespace shapejit::jit
