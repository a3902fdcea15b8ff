#include <doctest/doctest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "jit/cache_entry.hpp"
#include "jit/disk_cache.hpp"
#include "jit/kernel_cache.hpp"
#include "jit/nvrtc.hpp"
#include "jit/record.hpp"
#include "shapejit/core.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace shapejit;
using test::CommandResult;
using test::TempDir;
using test::run_command;
using namespace shapejit::jit;

namespace {

CacheKey key_of(int i) { return kernel_key(Program{"t", "source " + std::to_string(i), {}, ""}, "sm_90"); }

std::vector<std::uint8_t> payload_of(int i, std::size_t n = 1000) {
  std::vector<std::uint8_t> p(n);
  for (std::size_t j = 0; j < n; ++j) p[j] = static_cast<std::uint8_t>(j * 31 + i);
  return p;
}

std::vector<std::uint8_t> entry_of(int i) { return encode_entry({key_of(i), "sm_90", "13.0"}, payload_of(i)); }

void write_file(const fs::path& p, const std::vector<std::uint8_t>& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// Runs `body` in a child process; returns its exit status.
template <typename Body>
int in_child(Body body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int code = 1;
    try {
      code = body();
    } catch (...) {
    }
    std::_Exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("cache entry round-trips and echoes its header") {
  const auto bytes = entry_of(1);
  const CacheKey key = key_of(1);
  const DecodedEntry e = decode_entry(bytes, &key);
  REQUIRE(e.status == EntryStatus::ok);
  CHECK(e.info.arch == "sm_90");
  CHECK(e.info.nvrtc_version == "13.0");
  CHECK(std::vector<std::uint8_t>(e.payload.begin(), e.payload.end()) == payload_of(1));
  const CacheKey other = key_of(2);
  CHECK(decode_entry(bytes, &other).status == EntryStatus::key_mismatch);
}

TEST_CASE("every truncation, zero length and single bit flip of an entry is rejected") {
  const auto bytes = entry_of(3);
  for (std::size_t n = 0; n < bytes.size(); ++n)
    REQUIRE(decode_entry(std::span(bytes.data(), n)).status != EntryStatus::ok);
  for (std::size_t i = 0; i < bytes.size(); i += 7) {
    auto flipped = bytes;
    flipped[i] ^= 0x10;
    REQUIRE(decode_entry(flipped).status != EntryStatus::ok);
  }
  auto longer = bytes;
  longer.push_back(0);
  CHECK(decode_entry(longer).status == EntryStatus::oversized);
}

TEST_CASE("an entry of another format version is foreign") {
  auto bytes = entry_of(4);
  bytes[8] = 2;  // format version field
  CHECK(decode_entry(bytes).status == EntryStatus::foreign_format);
}

TEST_CASE("cache directory: write, read, stats, verify, prune, clear") {
  TempDir tmp;
  const CacheDir dir(tmp.path);
  for (int i = 0; i < 5; ++i) REQUIRE(dir.write(key_of(i), entry_of(i)) == "");
  const auto hit = dir.read(key_of(2));
  REQUIRE(hit.present);
  CHECK(hit.status == EntryStatus::ok);
  CHECK_FALSE(dir.read(key_of(99)).present);
  CHECK(dir.entry_path(key_of(2)).parent_path().filename() == key_of(2).hex().substr(0, 2));
  CHECK(dir.stats().entries == 5);
  CHECK(dir.verify(false).bad == 0);

  // Damage two entries: verify finds them, repair removes them.
  auto truncated = entry_of(0);
  truncated.resize(40);
  write_file(dir.entry_path(key_of(0)), truncated);
  write_file(dir.entry_path(key_of(1)), {});
  const VerifyReport report = dir.verify(true);
  CHECK(report.bad == 2);
  CHECK(report.removed == 2);
  CHECK(dir.verify(false).bad == 0);
  CHECK(dir.stats().entries == 3);

  // Prune to the size of one entry keeps the most recently used one.
  const std::uint64_t one = entry_of(0).size();
  dir.touch(key_of(3));
  ::sleep(0);
  const auto now = fs::file_time_type::clock::now();
  fs::last_write_time(dir.entry_path(key_of(2)), now - std::chrono::hours(2));
  fs::last_write_time(dir.entry_path(key_of(4)), now - std::chrono::hours(1));
  const PruneReport pruned = dir.prune(one);
  CHECK(pruned.removed == 2);
  CHECK(dir.read(key_of(3)).present);
  CHECK(dir.clear() == 1);
  CHECK(dir.stats().entries == 0);
}

TEST_CASE("a directory where an entry should be is a bad entry, and a write replaces it") {
  TempDir tmp;
  const CacheDir dir(tmp.path);
  fs::create_directories(dir.entry_path(key_of(5)) / "junk");
  const auto lookup = dir.read(key_of(5));
  CHECK(lookup.present);
  CHECK(lookup.status != EntryStatus::ok);
  CHECK(dir.verify(false).bad == 1);
  CHECK(dir.write(key_of(5), entry_of(5)) == "");
  CHECK(dir.read(key_of(5)).status == EntryStatus::ok);
}

TEST_CASE("an unwritable cache directory is reported, not thrown") {
  TempDir tmp;
  write_file(tmp.path / "a-file", {1, 2, 3});
  const CacheDir dir(tmp.path / "a-file" / "cache");  // cannot be created, even as root
  const std::string why = dir.write(key_of(6), entry_of(6));
  CHECK(why.find("cannot create") != std::string::npos);
  CHECK_FALSE(dir.read(key_of(6)).present);
}

TEST_CASE("a file size limit hit while writing leaves no entry and the process alive") {
  TempDir tmp;
  const int status = in_child([&] {
    struct rlimit limit{100, 100};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    const CacheDir dir(tmp.path);
    const std::string why = dir.write(key_of(7), entry_of(7));
    return why.find("file size limit") != std::string::npos && !dir.read(key_of(7)).present ? 0 : 3;
  });
  CHECK(status == 0);
  CHECK(CacheDir(tmp.path).stats().temp_files == 0);
}

TEST_CASE("two processes filling one cache with the same keys leave only valid entries") {
  TempDir tmp;
  test::run_in_processes(2, [&](int) {
    const CacheDir dir(tmp.path);
    for (int round = 0; round < 20; ++round)
      for (int i = 0; i < 30; ++i)
        if (!dir.write(key_of(i), entry_of(i)).empty()) return 4;
    return 0;
  });
  const CacheDir dir(tmp.path);
  const VerifyReport report = dir.verify(false);
  CHECK(report.checked == 30);
  CHECK(report.bad == 0);
  CHECK(dir.stats().temp_files == 0);
}

TEST_CASE("offline: a miss is an error naming the manifest line; a bad user entry is replaced") {
  TempDir tmp;
  ::setenv("SHAPEJIT_CACHE_DIR", tmp.path.c_str(), 1);
  const Program program{"probe", "extern \"C\" __global__ void sj_kernel() {}", {}, "plan probe --offset 1"};
  const CacheDir dir(tmp.path);
  write_file(dir.entry_path(kernel_key(program, "sm_90")), {1, 2, 3});
  const std::uint64_t bad_before = counters().bad_entries_replaced;
  set_offline(true);
  try {
    obtain_kernel(program, "sm_90");
    FAIL("expected an offline miss");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::offline_miss);
    CHECK(std::string(e.what()).find("plan probe --offset 1") != std::string::npos);
  }
  set_offline(false);
  ::unsetenv("SHAPEJIT_CACHE_DIR");
  CHECK(counters().bad_entries_replaced == bad_before + 1);
  CHECK_FALSE(dir.read(kernel_key(program, "sm_90")).present);
}

TEST_CASE("record mode appends each line once across processes, one line per set of kernels") {
  TempDir tmp;
  const fs::path file = tmp.path / "recorded.manifest";
  std::vector<pid_t> children;
  for (int p = 0; p < 4; ++p) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("SHAPEJIT_RECORD", file.c_str(), 1);
      for (int i = 0; i < 10; ++i) {
        const std::vector<SpecKey> kernels = {SpecKey{static_cast<std::uint64_t>(i)}};
        record_manifest_line("rearrange --dtype f32 --shape " + std::to_string(i) + " --perm 0", kernels);
        record_manifest_line("rearrange --dtype f32 --shape " + std::to_string(i + 100) + " --perm 0", kernels);
      }
      std::_Exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) ::waitpid(pid, nullptr, 0);
  std::ifstream in(file);
  std::multiset<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.insert(line);
  CHECK(lines.size() == 10);
  for (const auto& line : lines) CHECK(lines.count(line) == 1);
}

TEST_CASE("NVRTC that cannot be loaded is a clear error, not a crash") {
  const int status = in_child([] {
    ::setenv("SHAPEJIT_NVRTC", "/nonexistent/libnvrtc.so", 1);
    try {
      compile_to_cubin("extern \"C\" __global__ void sj_kernel() {}", "sm_90", {}, "probe");
    } catch (const Error& e) {
      const std::string message = e.what();
      return e.code() == ErrorCode::nvrtc_unavailable && message.find("/nonexistent/libnvrtc.so") != std::string::npos ? 0 : 5;
    }
    return 6;
  });
  CHECK(status == 0);
}
