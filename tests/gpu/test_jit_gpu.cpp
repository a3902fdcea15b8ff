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

TEST_CASE("prepare_kernels compiles distinct kernels on worker threads; their launches then compile nothing" *
          shapejit::test::gpu_only()) {
  const shapejit::test::TempDir tmp;
  ::setenv("SHAPEJIT_CACHE_DIR", tmp.path.string().c_str(), 1);
  const int offset = 5000 + static_cast<int>(::getpid() % 1000);
  std::vector<std::unique_ptr<shapejit::jit::KernelHandle>> handles;
  std::vector<const shapejit::jit::KernelHandle*> kernels;
  for (int i = 0; i < 5; ++i) {
    handles.push_back(std::make_unique<shapejit::jit::KernelHandle>(probe_program(offset + i)));
    kernels.push_back(handles.back().get());
  }
  const shapejit::Counters before = shapejit::counters();
  shapejit::jit::prepare_kernels(kernels, 3);
  const shapejit::Counters prepared = shapejit::counters();
  CHECK(prepared.compiles == before.compiles + 5);
  for (int i = 0; i < 5; ++i) check_probe(*handles[static_cast<std::size_t>(i)], offset + i);
  CHECK(shapejit::counters().compiles == prepared.compiles);
  ::unsetenv("SHAPEJIT_CACHE_DIR");
}

TEST_CASE("prepare_kernels rethrows a kernel's compile error once every worker has stopped" *
          shapejit::test::gpu_only()) {
  const shapejit::test::TempDir tmp;
  ::setenv("SHAPEJIT_CACHE_DIR", tmp.path.string().c_str(), 1);
  const int offset = 6000 + static_cast<int>(::getpid() % 1000);
  const shapejit::jit::KernelHandle good(probe_program(offset));
  const shapejit::jit::KernelHandle broken(
      {"broken", "extern \"C\" __global__ void sj_kernel() { undeclared_name = 1; }", {}, "broken"});
  const std::vector<const shapejit::jit::KernelHandle*> kernels{&good, &broken};
  bool thrown = false;
  try {
    shapejit::jit::prepare_kernels(kernels, 2);
  } catch (const shapejit::Error& e) {
    thrown = true;
    CHECK(std::string(e.what()).find("undeclared_name") != std::string::npos);
  }
  CHECK(thrown);
  check_probe(good, offset);
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
