#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "codegen/render.hpp"
#include "codegen/templates.hpp"
#include "jit/cache_entry.hpp"
#include "jit/kernel_cache.hpp"
#include "jit/nvrtc.hpp"
#include "shapejit/core.hpp"

using namespace shapejit;

namespace {
jit::Program probe_program() {
  codegen::CodeParams params;
  params.integer("PROBE_OFFSET", 7);
  return {"probe", codegen::render({"probe.cu"}, params), {}, "probe"};
}
}  // namespace

TEST_CASE("the probe template and the prelude compile to cubins for sm_80 and sm_90") {
  for (const char* arch : {"sm_80", "sm_90"}) {
    const auto cubin = jit::compile_to_cubin(probe_program().source, arch, {}, "probe");
    REQUIRE(cubin.size() > 4);
    CHECK(cubin[0] == 0x7f);  // ELF
    CHECK(cubin[1] == 'E');
  }
}

TEST_CASE("every prelude conversion compiles for sm_80 and sm_90") {
  const std::string body = R"(
extern "C" __global__ void sj_kernel(float* f, double* d, sj_f16* h, sj_bf16* b) {
  f[0] = sj_to_float(h[0]) + sj_to_float(b[0]) + sj_to_float(f[1]) + sj_to_float(d[1]);
  d[0] = sj_to_double(h[1]) + sj_to_double(b[1]) + sj_to_double(f[2]) + sj_to_double(d[2]) + sj_nan_double();
  h[2] = sj_from_float<sj_f16>(f[3] + sj_nan_float());
  b[2] = sj_from_float<sj_bf16>(f[4]);
  d[3] = sj_from_float<double>(f[5]);
  f[6] = (float)sj_fastdiv((unsigned)f[7], 3u, 1u);
})";
  const std::string source = std::string(codegen::template_text("prelude.cu")) + body;
  for (const char* arch : {"sm_80", "sm_90"}) CHECK(jit::compile_to_cubin(source, arch, {}, "prelude").size() > 0);
}

TEST_CASE("a compile error carries the NVRTC log and saves the failing source") {
  try {
    jit::compile_to_cubin("extern \"C\" __global__ void sj_kernel() { this_is_not_defined(); }", "sm_90", {}, "broken");
    FAIL("expected a compile error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::compile_failed);
    const std::string message = e.what();
    CHECK(message.find("this_is_not_defined") != std::string::npos);
    const auto at = message.find("source saved to ");
    REQUIRE(at != std::string::npos);
    const std::string path = message.substr(at + 16, message.find('\n', at) - at - 16);
    std::ifstream saved(path);
    std::string text((std::istreambuf_iterator<char>(saved)), {});
    CHECK(text.find("this_is_not_defined") != std::string::npos);
    std::filesystem::remove(path);
  }
}

TEST_CASE("compile_entry produces a verifiable entry for any arch, without a GPU") {
  const jit::Program program = probe_program();
  const auto bytes = jit::compile_entry(program, "sm_90");
  const jit::CacheKey key = jit::kernel_key(program, "sm_90");
  const jit::DecodedEntry entry = jit::decode_entry(bytes, &key);
  REQUIRE(entry.status == jit::EntryStatus::ok);
  CHECK(entry.info.arch == "sm_90");
  CHECK(entry.info.nvrtc_version == jit::nvrtc_version());
  CHECK(counters().compiles >= 1);
}
