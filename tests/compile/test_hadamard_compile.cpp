// Hadamard kernels compile with NVRTC for every size class, dtype and access width, sm_80, sm_86 and sm_90.
#include <doctest/doctest.h>

#include <algorithm>

#include "compile/compile_jobs.hpp"
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
    for (std::int64_t n : {8, 128, 2048, 4096, 96, 12 * 64, 12 * 128, 20 * 64, 28 * 64, 28 * 1024, 16384})
      if (t != DType::f64 || n <= 16384) add(n, t, 1);

  std::vector<jit::Program> programs;
  for (const HadamardDesc& d : descs)
    for (const jit::Program* p : detail::make_hadamard_plan(d, {})->programs()) programs.push_back(*p);
  // What contiguous shapes never choose: 64-bit offsets, in place, five run-time row dims.
  HadamardDesc inplace;
  inplace.x = TensorDesc{{2, 3, 5, 7, 8, 512}, {}, DType::bf16};
  inplace.group = 8;
  inplace.inplace = true;
  for (const jit::Program* p : detail::make_hadamard_plan(inplace, {16, 64, 5})->programs()) programs.push_back(*p);
  // sm_86: the register caps' table of shared memory per SM falls to its 100 KB branch there.
  for (const std::string& f : test::compile_programs(programs, {"sm_80", "sm_86", "sm_90"})) FAIL_CHECK(f);
  CHECK(programs.size() >= 2 * 60);
  // f32 and f64 rows across warps prefetch: 16-byte copies, and 4- and 8-byte ones in their
  // one-value variants.
  for (const char* kind : {"f32_n4096_g1_d4096_m1_v4", "f32_n4096_g1_d4096_m1_v1", "f64_n4096_g1_d4096_m1_v1"}) {
    CAPTURE(kind);
    CHECK(std::any_of(programs.begin(), programs.end(), [&](const jit::Program& p) {
      return p.label.find(kind) != std::string::npos && p.label.find("_prefetch") != std::string::npos;
    }));
  }
  MESSAGE((3 * programs.size()) << " hadamard kernels compiled");
}
