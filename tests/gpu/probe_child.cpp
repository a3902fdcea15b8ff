// Runs the probe kernel once in a fresh process and prints "ok compiles=N disk_hits=N" (exit 0)
// or what went wrong (exit 1). The GPU test runs it twice over one cache directory.
#include <cstdio>
#include <vector>

#include "codegen/render.hpp"
#include "jit/driver.hpp"
#include "jit/launch.hpp"
#include "shapejit/core.hpp"

int main() {
  using namespace shapejit;
  try {
    codegen::CodeParams params;
    params.integer("PROBE_OFFSET", 11);
    const jit::KernelHandle kernel({"probe", codegen::render({"probe.cu"}, params), {}, "probe"});
    const jit::Driver& d = (jit::ensure_context(), jit::driver());
    constexpr unsigned n = 1000;
    std::vector<float> in(n), out(n);
    for (unsigned i = 0; i < n; ++i) in[i] = static_cast<float>(i) * 0.5f - 17.0f;
    CUdeviceptr din = 0, dout = 0;
    jit::check(d.cuMemAlloc(&din, n * 4), "cuMemAlloc");
    jit::check(d.cuMemAlloc(&dout, n * 4), "cuMemAlloc");
    jit::check(d.cuMemcpyHtoD(din, in.data(), n * 4), "cuMemcpyHtoD");
    float scale = 3.0f;
    unsigned count = n;
    void* args[] = {&dout, &din, &scale, &count};
    jit::LaunchDims dims;
    dims.grid[0] = (n + 127) / 128;
    dims.block[0] = 128;
    kernel.launch(dims, nullptr, args);
    jit::check(d.cuMemcpyDtoH(out.data(), dout, n * 4), "cuMemcpyDtoH");
    for (unsigned i = 0; i < n; ++i)
      if (out[i] != in[i] * 3.0f + 11.0f) {
        std::printf("wrong result at %u: %g\n", i, out[i]);
        return 1;
      }
    const Counters c = counters();
    std::printf("ok compiles=%llu disk_hits=%llu\n", static_cast<unsigned long long>(c.compiles),
                static_cast<unsigned long long>(c.disk_hits));
    return 0;
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}
