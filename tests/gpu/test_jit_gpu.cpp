#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "codegen/render.hpp"
#include "gpu.hpp"
#include "jit/cache_entry.hpp"
#include "jit/disk_cache.hpp"
#include "jit/launch.hpp"
#include "shapejit/core.hpp"
#include "test_support.hpp"

namespace {

// Runs the probe child with `cache_dir` as its user cache; returns its output.
std::string run_probe_child(const std::string& cache_dir) {
  const auto r = shapejit::test::run_command("SHAPEJIT_CACHE_DIR='" + cache_dir + "' '" +
                                             shapejit::test::built_path("probe_child") + "'");
  CHECK(r.status == 0);
  return r.output;
}

}  // namespace

TEST_CASE("a kernel compiled in one process is loaded from disk in the next, and both are right" *
          shapejit::test::gpu_only()) {
  const shapejit::test::TempDir tmp;
  const std::string dir = tmp.path.string();
  const std::string first = run_probe_child(dir);
  CHECK(first.find("ok compiles=1 disk_hits=0") != std::string::npos);
  const std::string second = run_probe_child(dir);
  CHECK(second.find("ok compiles=0 disk_hits=1") != std::string::npos);
  INFO(first << second);
}

namespace {

// A probe kernel with a given offset: a distinct source, so a distinct key, per offset.
shapejit::jit::Program probe_program(int offset) {
  shapejit::codegen::CodeParams params;
  params.integer("PROBE_OFFSET", offset);
  return {"probe", shapejit::codegen::render({"probe.cu"}, params), {}, "probe"};
}

// Runs the probe kernel and checks out[i] == in[i] * 2 + offset.
void check_probe(const shapejit::jit::KernelHandle& kernel, int offset) {
  constexpr unsigned n = 4099;
  const auto bytes = shapejit::test::random_bytes(n * 4, static_cast<std::uint64_t>(offset));
  std::vector<float> in(n), out(n);
  for (unsigned i = 0; i < n; ++i) in[i] = static_cast<float>(bytes[i]) - 100.0f;
  shapejit::test::DeviceBuffer din(n * 4), dout(n * 4);
  din.upload(in.data(), n * 4);
  dout.fill(0xff);
  CUdeviceptr out_ptr = dout.address(), in_ptr = din.address();
  float scale = 2.0f;
  unsigned count = n;
  void* args[] = {&out_ptr, &in_ptr, &scale, &count};
  shapejit::jit::LaunchDims dims;
  dims.grid[0] = (n + 255) / 256;
  dims.block[0] = 256;
  kernel.launch(dims, nullptr, args);
  dout.download(out.data(), n * 4);
  for (unsigned i = 0; i < n; ++i) REQUIRE(out[i] == in[i] * 2.0f + static_cast<float>(offset));
}

}  // namespace

TEST_CASE("threads asking for one new kernel compile it once; later handles hit memory" * shapejit::test::gpu_only()) {
  const shapejit::test::TempDir tmp;
  const std::string dir = tmp.path.string();
  ::setenv("SHAPEJIT_CACHE_DIR", dir.c_str(), 1);
  const int offset = 1000 + static_cast<int>(::getpid() % 1000);
  const shapejit::Counters before = shapejit::counters();
  std::vector<std::unique_ptr<shapejit::jit::KernelHandle>> handles;
  for (int i = 0; i < 8; ++i) handles.push_back(std::make_unique<shapejit::jit::KernelHandle>(probe_program(offset)));
  std::vector<std::thread> threads;
  for (auto& h : handles) threads.emplace_back([&h] { h->prepare(); });
  for (auto& t : threads) t.join();
  const shapejit::Counters after = shapejit::counters();
  CHECK(after.compiles == before.compiles + 1);
  CHECK(after.memory_hits == before.memory_hits + 7);
  for (auto& h : handles) check_probe(*h, offset);
  ::unsetenv("SHAPEJIT_CACHE_DIR");
}

namespace {

// Probe kernels of offsets offset .. offset + count - 1, and their handles as prepare_kernels takes them.
struct ProbeKernels {
  std::vector<std::unique_ptr<shapejit::jit::KernelHandle>> handles;
  std::vector<const shapejit::jit::KernelHandle*> list;
  ProbeKernels(int offset, int count) {
    for (int i = 0; i < count; ++i) {
      handles.push_back(std::make_unique<shapejit::jit::KernelHandle>(probe_program(offset + i)));
      list.push_back(handles.back().get());
    }
  }
};

const shapejit::jit::Program kBrokenProgram{
    "broken", "extern \"C\" __global__ void sj_kernel() { undeclared_name = 1; }", {}, "broken"};

// prepare_kernels(kernels, workers), which must throw a compile error naming the broken program's fault.
void check_compile_error(const std::vector<const shapejit::jit::KernelHandle*>& kernels, unsigned workers) {
  bool thrown = false;
  try {
    shapejit::jit::prepare_kernels(kernels, workers);
  } catch (const shapejit::Error& e) {
    thrown = true;
    CHECK(std::string(e.what()).find("undeclared_name") != std::string::npos);
  }
  CHECK(thrown);
}

}  // namespace

TEST_CASE("prepare_kernels compiles each distinct program once; their launches then compile nothing" *
          shapejit::test::gpu_only()) {
  const shapejit::test::TempDir tmp;
  ::setenv("SHAPEJIT_CACHE_DIR", tmp.path.string().c_str(), 1);
  const int offset = 5000 + static_cast<int>(::getpid() % 1000);
  ProbeKernels probes(offset, 5);
  const shapejit::jit::KernelHandle same_program(probe_program(offset));
  std::vector<const shapejit::jit::KernelHandle*> kernels = probes.list;
  kernels.push_back(&same_program);
  const shapejit::Counters before = shapejit::counters();
  shapejit::jit::prepare_kernels(kernels, 3);
  const shapejit::Counters prepared = shapejit::counters();
  CHECK(prepared.compiles == before.compiles + 5);
  CHECK(prepared.memory_hits == before.memory_hits + 1);  // same_program: the first handle's kernel
  for (int i = 0; i < 5; ++i) check_probe(*probes.handles[static_cast<std::size_t>(i)], offset + i);
  check_probe(same_program, offset);
  const shapejit::Counters launched = shapejit::counters();
  CHECK(launched.compiles == prepared.compiles);
  CHECK(launched.memory_hits == prepared.memory_hits);
  ::unsetenv("SHAPEJIT_CACHE_DIR");
}

TEST_CASE("prepare_kernels rethrows a compile error; a lone worker stops at it, leaving the rest unprepared" *
          shapejit::test::gpu_only()) {
  const shapejit::test::TempDir tmp;
  ::setenv("SHAPEJIT_CACHE_DIR", tmp.path.string().c_str(), 1);
  const int offset = 6000 + static_cast<int>(::getpid() % 1000);
  const shapejit::jit::KernelHandle broken(kBrokenProgram);
  ProbeKernels probes(offset, 3);
  std::vector<const shapejit::jit::KernelHandle*> kernels{&broken};
  kernels.insert(kernels.end(), probes.list.begin(), probes.list.end());
  const shapejit::Counters before = shapejit::counters();
  check_compile_error(kernels, 1);
  CHECK(shapejit::counters().compiles == before.compiles);
  // With several workers the error still comes back, after every worker has stopped.
  check_compile_error(kernels, 4);
  for (int i = 0; i < 3; ++i) check_probe(*probes.handles[static_cast<std::size_t>(i)], offset + i);
  ::unsetenv("SHAPEJIT_CACHE_DIR");
}

TEST_CASE("prepare_kernels prepares for the current context's device: on device 1, launches there need nothing more" *
          shapejit::test::two_gpus()) {
  const shapejit::test::TempDir tmp;
  ::setenv("SHAPEJIT_CACHE_DIR", tmp.path.string().c_str(), 1);
  const shapejit::jit::Driver& d = shapejit::jit::driver();
  CUdevice device1 = 0;
  CUcontext context1 = nullptr, previous = nullptr;
  shapejit::jit::check(d.cuDeviceGet(&device1, 1), "cuDeviceGet");
  shapejit::jit::check(d.cuDevicePrimaryCtxRetain(&context1, device1), "cuDevicePrimaryCtxRetain");
  shapejit::jit::check(d.cuCtxGetCurrent(&previous), "cuCtxGetCurrent");
  shapejit::jit::check(d.cuCtxSetCurrent(context1), "cuCtxSetCurrent");
  const int offset = 7000 + static_cast<int>(::getpid() % 1000);
  ProbeKernels probes(offset, 3);
  shapejit::jit::prepare_kernels(probes.list, 3);
  // Kernels prepared for another device would be looked up again here (memory hits or compiles).
  const shapejit::Counters prepared = shapejit::counters();
  for (int i = 0; i < 3; ++i) check_probe(*probes.handles[static_cast<std::size_t>(i)], offset + i);
  CHECK(shapejit::counters().compiles == prepared.compiles);
  CHECK(shapejit::counters().memory_hits == prepared.memory_hits);
  d.cuCtxSetCurrent(previous);
  ::unsetenv("SHAPEJIT_CACHE_DIR");
}

TEST_CASE("a cubin the driver refuses is a miss: warned, recompiled and replaced" * shapejit::test::gpu_only()) {
  const shapejit::test::TempDir tmp;
  const std::string dir = tmp.path.string();
  ::setenv("SHAPEJIT_CACHE_DIR", dir.c_str(), 1);
  const int offset = 3000 + static_cast<int>(::getpid() % 1000);
  const shapejit::jit::Program program = probe_program(offset);
  const std::string arch = shapejit::jit::device_arch(shapejit::jit::ensure_context());
  const shapejit::jit::CacheKey key = shapejit::jit::kernel_key(program, arch);
  const std::vector<std::uint8_t> garbage(512, 0xab);  // a valid entry whose payload is no cubin
  const shapejit::jit::CacheDir cache(dir);
  REQUIRE(cache.write(key, shapejit::jit::encode_entry({key, arch, "13.0"}, garbage)) == "");
  const shapejit::Counters before = shapejit::counters();
  const shapejit::jit::KernelHandle kernel(program);
  check_probe(kernel, offset);
  const shapejit::Counters after = shapejit::counters();
  CHECK(after.bad_entries_replaced == before.bad_entries_replaced + 1);
  CHECK(after.compiles == before.compiles + 1);
  const auto replaced = cache.read(key);
  CHECK(replaced.status == shapejit::jit::EntryStatus::ok);
  CHECK(replaced.entry.payload.size() != garbage.size());
  ::unsetenv("SHAPEJIT_CACHE_DIR");
}
