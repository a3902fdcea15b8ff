#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "gpu.hpp"

namespace {

// Runs the probe child with `cache_dir` as its user cache; returns its output line.
std::string run_probe_child(const std::string& cache_dir) {
  const std::string command = "SHAPEJIT_CACHE_DIR='" + cache_dir + "' '" PROBE_CHILD "' 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char line[4096] = {};
  std::string out;
  while (std::fgets(line, sizeof line, pipe)) out += line;
  CHECK(::pclose(pipe) == 0);
  return out;
}

}  // namespace

TEST_CASE("a kernel compiled in one process is loaded from disk in the next, and both are right" *
          shapejit::test::gpu_only()) {
  char pattern[] = "/tmp/shapejit-gpu-XXXXXX";
  const std::string dir = ::mkdtemp(pattern);
  const std::string first = run_probe_child(dir);
  CHECK(first.find("ok compiles=1 disk_hits=0") != std::string::npos);
  const std::string second = run_probe_child(dir);
  CHECK(second.find("ok compiles=0 disk_hits=1") != std::string::npos);
  INFO(first << second);
  std::filesystem::remove_all(dir);
}
