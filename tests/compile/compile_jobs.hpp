// Compiles many programs with NVRTC on all cores, for compile tests.
#pragma once

#include <algorithm>
#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "jit/nvrtc.hpp"
#include "jit/program.hpp"

namespace shapejit::test {

/// Compiles each program for each arch; returns "label (arch): message" for every one that failed
/// or did not produce an ELF cubin.
inline std::vector<std::string> compile_programs(const std::vector<jit::Program>& programs,
                                                 const std::vector<std::string>& archs) {
  std::vector<std::pair<const jit::Program*, std::string>> jobs;
  for (const jit::Program& p : programs)
    for (const std::string& arch : archs) jobs.emplace_back(&p, arch);
  std::vector<std::string> failures;
  std::mutex mutex;
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i; (i = next++) < jobs.size();) {
      const auto& [program, arch] = jobs[i];
      try {
        const auto cubin = jit::compile_to_cubin(program->source, arch, program->options, program->label);
        if (cubin.size() < 4 || cubin[0] != 0x7f || cubin[1] != 'E') throw std::runtime_error("not an ELF cubin");
      } catch (const std::exception& e) {
        std::lock_guard lock(mutex);
        failures.push_back(program->label + " (" + arch + "): " + e.what());
      }
    }
  };
  std::vector<std::thread> threads(std::max(2u, std::thread::hardware_concurrency()));
  for (auto& t : threads) t = std::thread(worker);
  for (auto& t : threads) t.join();
  return failures;
}

}  // namespace shapejit::test
