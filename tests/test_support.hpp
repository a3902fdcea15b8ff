// Helpers shared by the test suites: temporary directories, programs of this build, and running
// commands.
#pragma once

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace shapejit::test {

/// A fresh directory under the system's temporary directory, removed with everything in it.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "shapejit-test-XXXXXX").string();
    path = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

/// A path relative to the directory of this test binary (build/tests/), e.g. "../src/cli/shapejit".
inline std::string built_path(const std::string& relative) {
  static const std::filesystem::path tests_dir = std::filesystem::canonical("/proc/self/exe").parent_path();
  return (tests_dir / relative).lexically_normal().string();
}

/// Runs `work` in `count` forked processes at once (each exits with its return value) and checks
/// that every one exits normally with status 0.
template <typename Work>
void run_in_processes(int count, Work work) {
  std::vector<pid_t> children;
  for (int p = 0; p < count; ++p) {
    const pid_t pid = ::fork();
    if (pid == 0) std::_Exit(work(p));
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
}

struct CommandResult {
  int status = -1;
  std::string output;  ///< stdout and stderr
};

/// Runs a shell command line and collects its exit status and output.
inline CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  return result;
}

}  // namespace shapejit::test
