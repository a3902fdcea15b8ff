// JIT foundation benchmark: NVRTC compile times per template, host cost of a launch through the
// memory cache compared with a raw cuLaunchKernel, and call-to-launch time of a disk-cache hit in
// a fresh process (this program runs itself five times over one fresh SHAPEJIT_CACHE_DIR: the
// first compiles, the others load from disk).
//
//   jit_bench                  everything (compile figures only when there is no GPU)
//   jit_bench --compile-only   NVRTC figures only (no driver needed)
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench_util.hpp"
#include "codegen/render.hpp"
#include "codegen/templates.hpp"
#include "jit/driver.hpp"
#include "jit/kernel_cache.hpp"
#include "jit/launch.hpp"
#include "jit/nvrtc.hpp"
#include "ops/rearrange/codegen.hpp"
#include "ops/rearrange/plan.hpp"
#include "ops/rope/impl.hpp"
#include "ops/rope/manifest.hpp"
#include "shapejit/core.hpp"
#include "shapejit/rearrange.hpp"
#include "shapejit/rope.hpp"
#include "support/device.hpp"

namespace {

using namespace shapejit;
using bench::Table;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

/// The current device's name.
std::string device_name() {
  char name[256] = {};
  jit::check(jit::driver().cuDeviceGetName(name, sizeof name, jit::ensure_context()), "cuDeviceGetName");
  return name;
}

/// The probe kernel's program; `offset` makes the source (and so the cache key) distinct.
jit::Program probe_program(int offset) {
  codegen::CodeParams params;
  params.integer("PROBE_OFFSET", offset);
  return {"probe", codegen::render({"probe.cu"}, params), {}, fmt::format("probe {}", offset)};
}

/// The probe without the prelude: what the prelude adds to every compile is the difference.
jit::Program bare_probe_program(int offset) {
  const std::string source =
      fmt::format("constexpr long long PROBE_OFFSET = {};\n{}", offset, codegen::template_text("probe.cu"));
  return {"probe (no prelude)", source, {}, ""};
}

/// A named program whose compile time is reported.
struct TimedProgram {
  std::string name;
  jit::Program program;
};

/// Every kernel of the rope plan of a manifest line's descriptor, named by template and label.
std::vector<TimedProgram> rope_programs(const plan::RopeManifest& line) {
  std::vector<TimedProgram> out;
  const RopePlan rope = plan_rope(plan::manifest_desc(line));
  for (const jit::Program* p : rope.impl().programs()) out.push_back({"rope.cu: " + p->label, *p});
  return out;
}

/// The kernel a rearrange plan launches on aligned pointers, named by its key.
TimedProgram rearrange_kernel(const std::string& what, const std::vector<std::int64_t>& shape,
                              const std::vector<std::int64_t>& src_strides, const std::vector<int>& perm, DType dtype,
                              bool exact = false) {
  const TensorDesc src = permuted(TensorDesc{shape, src_strides, dtype, 0}, perm);
  const RearrangePlan plan = plan_rearrange(TensorDesc{src.shape, {}, dtype, 0}, src, {exact, 16});
  const plan::RearrangeVariant& v = plan.impl().data.variants.front();
  return {fmt::format("rearrange {}: {}", what, plan::kernel_label(v.spec, v.args).substr(0, 60)),
          codegen::rearrange_program(v, plan.manifest_line())};
}

/// One kernel of each rearrange family and template, from benchmark lines.
std::vector<TimedProgram> rearrange_programs() {
  std::vector<std::int64_t> twos(24, 2);
  std::vector<int> reversed(24);
  for (int i = 0; i < 24; ++i) reversed[static_cast<std::size_t>(i)] = 23 - i;
  return {
      rearrange_kernel("f16 [64,512,32,128] 0,2,1,3", {64, 512, 32, 128}, {}, {0, 2, 1, 3}, DType::f16),
      rearrange_kernel("f16 [4096,4096] strides 16384,2", {4096, 4096}, {16384, 2}, {0, 1}, DType::f16),
      rearrange_kernel("f32 [8192,8192] 1,0", {8192, 8192}, {}, {1, 0}, DType::f32),
      rearrange_kernel("u8 [16384,16384] 1,0", {16384, 16384}, {}, {1, 0}, DType::u8),
      rearrange_kernel("u8 [256,224,224,3] 0,3,1,2", {256, 224, 224, 3}, {}, {0, 3, 1, 2}, DType::u8),
      rearrange_kernel("f32 rank 24 of 2, reversed", twos, {}, reversed, DType::f32),
      rearrange_kernel("exact f32 [8192,8192] 1,0", {8192, 8192}, {}, {1, 0}, DType::f32, true),
  };
}

/// NVRTC time of one program as the JIT compiles it (twice where ptxas spills): its first compile in this process, and the median of three more.
struct CompileTimes {
  double first_ms = 0;
  double repeat_ms = 0;
};

CompileTimes compile_times(const jit::Program& program, const std::string& arch) {
  std::vector<double> times;
  for (int i = 0; i < 4; ++i) {
    const auto start = Clock::now();
    jit::compile_program(program, arch);
    times.push_back(ms_since(start));
  }
  std::sort(times.begin() + 1, times.end());
  return {times[0], times[2]};
}

/// NVRTC figures for `arch`: loading it, the first compile of the process, then each template.
Table compile_section(const std::string& arch) {
  Table table{{"what", "first compile ms", "repeat ms (median of 3)"}, {}};
  auto start = Clock::now();
  jit::nvrtc();
  table.rows.push_back({"load NVRTC (dlopen)", fmt::format("{:.1f}", ms_since(start)), "-"});
  const jit::Program first = probe_program(1);
  start = Clock::now();
  jit::compile_to_cubin(first.source, arch, first.options, first.label);
  table.rows.push_back({"first compile in the process (probe.cu + prelude)", fmt::format("{:.1f}", ms_since(start)), "-"});

  std::vector<TimedProgram> programs = {{"probe.cu without prelude", bare_probe_program(2)},
                                        {"probe.cu + prelude.cu", probe_program(2)}};
  plan::RopeManifest rope_line;
  rope_line.shape = {1, 4096, 32, 128};
  rope_line.k_heads = 8;
  for (auto& p : rope_programs(rope_line)) programs.push_back(p);
  rope_line.style = RopeStyle::gptj;
  rope_line.dtype = DType::f32;
  for (auto& p : rope_programs(rope_line)) programs.push_back(p);
  for (auto& p : rearrange_programs()) programs.push_back(p);
  for (const auto& p : programs) {
    const CompileTimes t = compile_times(p.program, arch);
    table.rows.push_back({p.name, fmt::format("{:.1f}", t.first_ms), fmt::format("{:.1f}", t.repeat_ms)});
  }
  return table;
}

/// One way of launching, timed per call on the host.
struct LaunchPath {
  std::string name;
  std::function<void()> call;
  int baseline = -1;  ///< index of the raw path it is compared with (-1: it is one)
  std::vector<double> us;
};

/// A kernel loaded by hand from its cubin, for raw cuLaunchKernel calls.
struct RawKernel {
  RawKernel(const jit::Program& program, const std::string& arch) {
    const auto cubin = jit::compile_program(program, arch);
    const jit::Driver& d = jit::driver();
    jit::check(d.cuLibraryLoadData(&library, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0), "cuLibraryLoadData");
    jit::check(d.cuLibraryGetKernel(&kernel, library, jit::kKernelName), "cuLibraryGetKernel");
  }
  ~RawKernel() { jit::driver().cuLibraryUnload(library); }
  RawKernel(const RawKernel&) = delete;
  RawKernel& operator=(const RawKernel&) = delete;

  void launch(unsigned grid, unsigned block, void** args, CUstream stream = nullptr) const {
    jit::check(jit::driver().cuLaunchKernel(reinterpret_cast<CUfunction>(kernel), grid, 1, 1, block, 1, 1, 0, stream,
                                            args, nullptr),
               "cuLaunchKernel");
  }

  CUlibrary library = nullptr;
  CUkernel kernel = nullptr;
};

/// Host cost per call of each path, `calls` calls each: the probe kernel raw and through its
/// KernelHandle (memory cache), and a small rearrange raw, through its plan (default stream, a
/// created stream, check_pointers) and one-shot.
Table launch_section(int calls) {
  const CUdevice device = jit::ensure_context();
  const std::string arch = jit::device_arch(device);

  const jit::Program probe = probe_program(3);
  const RawKernel raw_probe(probe, arch);
  const jit::KernelHandle handle(probe);
  handle.prepare();
  constexpr unsigned n = 256;
  support::DeviceBuffer in(64 * 64 * 4), out(64 * 64 * 4);
  in.fill(0);
  CUdeviceptr out_ptr = out.address(), in_ptr = in.address();
  float scale = 2.0f;
  unsigned count = n;
  void* probe_args[] = {&out_ptr, &in_ptr, &scale, &count};
  jit::LaunchDims dims;
  dims.block[0] = n;

  // A 64 x 64 f32 transpose: its plan's kernel for aligned pointers, also loaded by hand.
  const TensorDesc src_desc = permuted(TensorDesc{{64, 64}, {}, DType::f32, 0}, {1, 0});
  const TensorDesc dst_desc{src_desc.shape, {}, DType::f32, 0};
  const RearrangePlan plan = plan_rearrange(dst_desc, src_desc);
  const plan::RearrangeVariant& variant = plan.impl().data.variants.front();
  const RawKernel raw_transpose(codegen::rearrange_program(variant, plan.manifest_line()), arch);
  void* dst = out.get();
  const void* src = in.get();
  void* transpose_args[] = {&dst, &src, const_cast<plan::RearrangeKernelArgs*>(&variant.args)};
  CUstream stream = nullptr;
  jit::check(jit::driver().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  RearrangeOptions checked_options;
  checked_options.check_pointers = true;
  const RearrangePlan checked_plan = plan_rearrange(dst_desc, src_desc, checked_options);

  std::vector<LaunchPath> paths = {
      {"probe: raw cuLaunchKernel", [&] { raw_probe.launch(1, n, probe_args); }, -1, {}},
      {"probe: jit::KernelHandle::launch (memory cache)", [&] { handle.launch(dims, nullptr, probe_args); }, 0, {}},
      {"transpose 64x64 f32: raw cuLaunchKernel",
       [&] { raw_transpose.launch(variant.grid, static_cast<unsigned>(variant.spec.threads), transpose_args); }, -1, {}},
      {"transpose 64x64 f32: RearrangePlan::launch", [&] { plan.launch(dst, src); }, 2, {}},
      {"transpose 64x64 f32: one-shot rearrange() (plan-cache hit)",
       [&] { rearrange(dst, dst_desc, src, src_desc); }, 2, {}},
      {"transpose 64x64 f32: RearrangePlan::launch with check_pointers", [&] { checked_plan.launch(dst, src); }, 2, {}},
      {"transpose 64x64 f32: raw cuLaunchKernel on a created stream",
       [&] { raw_transpose.launch(variant.grid, static_cast<unsigned>(variant.spec.threads), transpose_args, stream); },
       -1, {}},
      {"transpose 64x64 f32: RearrangePlan::launch on that stream (its context found)",
       [&] { plan.launch(dst, src, stream); }, 6, {}},
  };

  constexpr int per_batch = 250;
  auto time_batch = [&](LaunchPath& path) {
    for (int i = 0; i < per_batch; ++i) {
      const auto start = Clock::now();
      path.call();
      path.us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    }
    // Drained untimed, so that the launch queue never fills and blocks a call.
    jit::check(jit::driver().cuCtxSynchronize(), "cuCtxSynchronize (a kernel failed?)");
  };
  for (LaunchPath& path : paths) {  // warm-up
    time_batch(path);
    path.us.clear();
  }
  // Interleaved, so that clock or load drift affects every path alike.
  for (int b = 0; b < calls / per_batch; ++b)
    for (LaunchPath& path : paths) time_batch(path);

  jit::driver().cuStreamDestroy(stream);
  std::vector<double> medians;
  for (LaunchPath& path : paths) {
    std::sort(path.us.begin(), path.us.end());
    medians.push_back(path.us[path.us.size() / 2]);
  }
  Table table{{"launch path", "median host us per call", "added over raw"}, {}};
  for (std::size_t i = 0; i < paths.size(); ++i)
    table.rows.push_back({paths[i].name, fmt::format("{:.3f}", medians[i]),
                          paths[i].baseline < 0 ? "-"
                                                : fmt::format("{:+.3f}", medians[i] - medians[static_cast<std::size_t>(paths[i].baseline)])});
  return table;
}

/// Child mode: in a fresh process, times the first call of the probe kernel (program, lookup,
/// load or compile, launch) and then of a small rearrange (plan, lookup, load or compile, launch),
/// and prints "probe_ms=X rearrange_ms=Y compiles=N disk_hits=N".
int child_main() {
  jit::ensure_context();  // driver init and context creation are not part of the call
  support::DeviceBuffer in(64 * 64 * 4), out(64 * 64 * 4);
  in.fill(0);
  CUdeviceptr out_ptr = out.address(), in_ptr = in.address();
  float scale = 1.0f;
  unsigned count = 256;
  void* args[] = {&out_ptr, &in_ptr, &scale, &count};
  jit::LaunchDims dims;
  dims.block[0] = 256;
  auto start = Clock::now();
  const jit::KernelHandle handle(probe_program(4));
  handle.launch(dims, nullptr, args);
  const double probe_ms = ms_since(start);

  start = Clock::now();
  const TensorDesc src = permuted(TensorDesc{{64, 64}, {}, DType::f32, 0}, {1, 0});
  plan_rearrange(TensorDesc{src.shape, {}, DType::f32, 0}, src).launch(out.get(), in.get());
  const double rearrange_ms = ms_since(start);
  jit::check(jit::driver().cuCtxSynchronize(), "cuCtxSynchronize (a kernel failed?)");
  const Counters c = counters();
  std::printf("probe_ms=%.3f rearrange_ms=%.3f compiles=%llu disk_hits=%llu\n", probe_ms, rearrange_ms,
              static_cast<unsigned long long>(c.compiles), static_cast<unsigned long long>(c.disk_hits));
  return 0;
}

/// Runs this program in child mode with `cache_dir` as its user cache; returns its output.
std::string run_child(const std::string& cache_dir) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string command = "SHAPEJIT_CACHE_DIR='" + cache_dir + "' '" + self + "' --child 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed");
  std::string out;
  char line[4096];
  while (std::fgets(line, sizeof line, pipe)) out += line;
  if (::pclose(pipe) != 0) throw std::runtime_error("child failed: " + out);
  return out;
}

/// Call-to-launch in a fresh process: a first child compiles, the next ones find the kernels on disk.
Table disk_hit_section() {
  char pattern[] = "/tmp/shapejit-jit-bench-XXXXXX";
  const char* dir = ::mkdtemp(pattern);
  if (!dir) throw std::runtime_error("mkdtemp failed");
  Table table{{"fresh process", "probe call ms", "rearrange call ms", "compiles", "disk hits"}, {}};
  for (int run = 1; run <= 5; ++run) {
    const std::string out = run_child(dir);
    double probe_ms = 0, rearrange_ms = 0;
    unsigned long long compiles = 0, disk_hits = 0;
    if (std::sscanf(out.c_str(), "probe_ms=%lf rearrange_ms=%lf compiles=%llu disk_hits=%llu", &probe_ms, &rearrange_ms,
                    &compiles, &disk_hits) != 4)
      throw std::runtime_error("unexpected child output: " + out);
    table.rows.push_back({run == 1 ? "1 (empty cache)" : std::to_string(run), fmt::format("{:.3f}", probe_ms),
                          fmt::format("{:.3f}", rearrange_ms), std::to_string(compiles), std::to_string(disk_hits)});
  }
  std::filesystem::remove_all(dir);
  return table;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"shapejit JIT benchmark: compile times, launch overhead, disk-cache hits"};
  bool compile_only = false, child = false;
  int calls = 100000;
  app.add_flag("--compile-only", compile_only, "Only the NVRTC figures (no GPU needed)");
  app.add_option("--calls", calls, "Launches timed per path for the launch overhead")->check(CLI::Range(1000, 10000000));
  app.add_flag("--child", child, "Internal: the fresh process of the disk-hit measurement")->group("");
  CLI11_PARSE(app, argc, argv);
  try {
    if (child) return child_main();
    const bool gpu = !compile_only && jit::driver_available();
    const std::string arch = gpu ? jit::device_arch(jit::ensure_context()) : "sm_90";
    const Table compiles = compile_section(arch);  // first, so that it times loading NVRTC
    std::string report = fmt::format("# jit_bench\n\nNVRTC {}, target {}, {}\n\n", jit::nvrtc().version, arch,
                                     gpu ? "device " + device_name() : "no GPU: compile figures only");
    report += "## NVRTC compile times\n\n" + compiles.markdown();
    fmt::print("{}", compiles.text());
    if (gpu) {
      const Table launch = launch_section(calls);
      report += fmt::format("\n## Launch host cost ({} calls per path)\n\n", calls) + launch.markdown();
      fmt::print("\n{}", launch.text());
      const Table disk = disk_hit_section();
      report += "\n## Call to launch in a fresh process\n\n" + disk.markdown();
      fmt::print("\n{}", disk.text());
    }
    if (const std::string dir = bench::output_dir(); !dir.empty()) bench::write_text_file(dir + "/jit_bench.md", report);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "jit_bench: {}\n", e.what());
    return 1;
  }
}
