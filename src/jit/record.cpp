#include "jit/record.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <set>

#include "core/env.hpp"
#include "shapejit/core.hpp"

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

// The record file ("" when off): SHAPEJIT_RECORD at start, then set_record_file. The flag lets
// recording() stay a lock-free read on the planning path.
struct RecordState {
  std::mutex mutex;
  std::string path = env_string("SHAPEJIT_RECORD").value_or("");
  std::set<std::vector<std::uint64_t>> recorded;  ///< kernel sets already recorded to `path`
  std::atomic<bool> on{!path.empty()};
};

RecordState& state() {
  static RecordState s;
  return s;
}

}  // namespace

bool recording() noexcept { return state().on.load(std::memory_order_relaxed); }

void record_manifest_line(const std::string& line, const std::vector<SpecKey>& kernels) {
  RecordState& s = state();
  if (!s.on.load(std::memory_order_relaxed) || line.empty()) return;
  std::vector<std::uint64_t> hashes;
  for (const SpecKey& k : kernels) hashes.push_back(k.hash);
  std::lock_guard lock(s.mutex);
  if (s.path.empty() || !s.recorded.insert(hashes).second) return;
  const int fd = ::open(s.path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    static std::once_flag once;
    std::call_once(once, [&] { log(LogLevel::warn, "record file {} cannot be opened; nothing is recorded", s.path); });
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

namespace shapejit {

void set_record_file(std::string_view path) {
  jit::RecordState& s = jit::state();
  std::lock_guard lock(s.mutex);
  if (s.path != path) s.recorded.clear();
  s.path = std::string(path);
  s.on = !s.path.empty();
}

std::string record_file() {
  jit::RecordState& s = jit::state();
  std::lock_guard lock(s.mutex);
  return s.path;
}

}  // namespace shapejit
