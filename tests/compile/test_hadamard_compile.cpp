// Hadamard kernels compile with NVRTC for every size class, dtype and access width, sm_80 and sm_90.
#include <doctest/doctest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "jit/nvrtc.hpp"
#include "ops/hadamard/impl.hpp"
#include "shapejit/hadamard.hpp"

using namespace shapejit;

TEST_CASE("hadamard compiles for every size class (bf16: every size) and every dtype, vector and scalar accesses") {
  std::vector<HadamardDesc> descs;
  auto add = [&](std::int64_t n, DType t, std::int64_t group) {
    HadamardDesc d;
    d.x = TensorDesc{{3, 2 * group, n / group}, {}, t};
    d.group = group;
    descs.push_back(d);
  };
  for (std::int64_t n = 2; n <= 32768; n *= 2) add(n, DType::bf16, n >= 256 ? n / 128 : 1);
  for (std::int64_t m : {12, 20, 28})
    for (std::int64_t p = 1; p <= 1024; p *= 2) add(m * p, DType::bf16, p >= 4 ? m : 1);
  for (DType t : {DType::f16, DType::f32, DType::f64})
    for (std::int64_t n : {8, 128, 4096, 96, 20 * 64, 28 * 1024, 16384})
      if (t != DType::f64 || n <= 16384) add(n, t, 1);

  std::vector<std::pair<jit::Program, std::string>> jobs;
  for (const HadamardDesc& d : descs)
    for (const jit::Program* p : detail::make_hadamard_plan(d, {})->programs())
      for (const char* arch : {"sm_80", "sm_90"}) jobs.emplace_back(*p, arch);
  std::vector<std::string> failures;
  std::mutex mutex;
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i; (i = next++) < jobs.size();) {
      const auto& [program, arch] = jobs[i];
      try {
        const auto cubin = jit::compile_to_cubin(program.source, arch, program.options, program.label);
        if (cubin.size() < 4 || cubin[0] != 0x7f || cubin[1] != 'E') throw std::runtime_error("not an ELF cubin");
      } catch (const std::exception& e) {
        std::lock_guard lock(mutex);
        failures.push_back(program.label + " " + arch + ": " + e.what());
      }
    }
  };
  std::vector<std::thread> threads(std::max(2u, std::thread::hardware_concurrency()));
  for (auto& t : threads) t = std::thread(worker);
  for (auto& t : threads) t.join();
  for (const std::string& f : failures) FAIL_CHECK(f);
  CHECK(jobs.size() >= 2 * 2 * 60);
  MESSAGE(jobs.size() << " hadamard kernels compiled");
}
