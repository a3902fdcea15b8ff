// JIT foundation benchmark: NVRTC compile times per template, host cost of a launch through the
// memory cache compared with a raw cuLaunchKernel, and call-to-launch time of a disk-cache hit in
// a fresh process (this program runs itself twice over a fresh SHAPEJIT_CACHE_DIR).
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
#include "jit/launch.hpp"
#include "jit/nvrtc.hpp"
#include "ops/rope_impl.hpp"
#include "plan/rope_manifest.hpp"
#include "shapejit/core.hpp"
#include "shapejit/rope.hpp"
#include "support/device.hpp"

namespace {

using namespace shapejit;
using bench::Table;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

/// The probe kernel's program; `offset` makes the source (and so the cache key) distinct.
jit::Program probe_program(int offset) {
  codegen::CodeParams params;
  params.integer("PROBE_OFFSET", offset);
  return {"probe", codegen::render("probe.cu", params), {}, fmt::format("probe {}", offset)};
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

/// Median of three NVRTC compiles of `program` in milliseconds (NVRTC keeps no cache).
double compile_ms(const jit::Program& program, const std::string& arch) {
  std::vector<double> times;
  for (int i = 0; i < 3; ++i) {
    const auto start = Clock::now();
    jit::compile_to_cubin(program.source, arch, program.options, program.label);
    times.push_back(ms_since(start));
  }
  std::sort(times.begin(), times.end());
  return times[1];
}

/// NVRTC figures: loading it, the first compile of the process, then each template.
Table compile_section(const std::string& arch) {
  Table table{{"what", "ms", "arch"}, {}};
  auto start = Clock::now();
  jit::nvrtc();
  table.rows.push_back({"load NVRTC (dlopen)", fmt::format("{:.1f}", ms_since(start)), arch});
  const jit::Program first = probe_program(1);
  start = Clock::now();
  jit::compile_to_cubin(first.source, arch, first.options, first.label);
  table.rows.push_back({"first compile in the process (probe.cu + prelude)", fmt::format("{:.1f}", ms_since(start)), arch});

  std::vector<TimedProgram> programs = {{"probe.cu without prelude", bare_probe_program(2)},
                                        {"probe.cu + prelude.cu", probe_program(2)}};
  plan::RopeManifest rope_line;
  rope_line.shape = {1, 4096, 32, 128};
  rope_line.k_heads = 8;
  for (auto& p : rope_programs(rope_line)) programs.push_back(p);
  rope_line.style = RopeStyle::gptj;
  rope_line.dtype = DType::f32;
  for (auto& p : rope_programs(rope_line)) programs.push_back(p);
  for (const auto& p : programs)
    table.rows.push_back({p.name + " (median of 3)", fmt::format("{:.1f}", compile_ms(p.program, arch)), arch});
  return table;
}

/// Host time of one call in microseconds: medians over `batches` x `per_batch` calls, the stream
/// drained between batches (untimed) so that the launch queue never fills and blocks a call.
struct LaunchCosts {
  double raw_us = 0;
  double handle_us = 0;
};

LaunchCosts launch_section(int calls) {
  const jit::Driver& d = jit::driver();
  const CUdevice device = jit::ensure_context();
  const std::string arch = jit::device_arch(device);
  const jit::Program program = probe_program(3);

  // The raw path: the same cubin loaded by hand.
  const auto cubin = jit::compile_to_cubin(program.source, arch, program.options, program.label);
  CUlibrary library = nullptr;
  CUkernel raw_kernel = nullptr;
  jit::check(d.cuLibraryLoadData(&library, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0), "cuLibraryLoadData");
  jit::check(d.cuLibraryGetKernel(&raw_kernel, library, jit::kKernelName), "cuLibraryGetKernel");
  const jit::KernelHandle handle(program);
  handle.prepare();

  constexpr unsigned n = 256;
  support::DeviceBuffer in(n * 4), out(n * 4);
  in.fill(0);
  CUdeviceptr out_ptr = out.address(), in_ptr = in.address();
  float scale = 2.0f;
  unsigned count = n;
  void* args[] = {&out_ptr, &in_ptr, &scale, &count};
  jit::LaunchDims dims;
  dims.block[0] = n;

  auto raw = [&] {
    jit::check(d.cuLaunchKernel(reinterpret_cast<CUfunction>(raw_kernel), 1, 1, 1, n, 1, 1, 0, nullptr, args, nullptr),
               "cuLaunchKernel");
  };
  auto through_handle = [&] { handle.launch(dims, nullptr, args); };

  constexpr int per_batch = 250;
  std::vector<double> raw_times, handle_times;
  auto time_batch = [&](const std::function<void()>& call, std::vector<double>& times) {
    for (int i = 0; i < per_batch; ++i) {
      const auto start = Clock::now();
      call();
      times.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    }
    jit::check(d.cuCtxSynchronize(), "cuCtxSynchronize (probe kernel failed?)");
  };
  time_batch(raw, raw_times);  // warm-up
  time_batch(through_handle, handle_times);
  raw_times.clear();
  handle_times.clear();
  // Interleaved so that clock or load drift affects both paths alike.
  for (int b = 0; b < calls / per_batch; ++b) {
    time_batch(raw, raw_times);
    time_batch(through_handle, handle_times);
  }
  d.cuLibraryUnload(library);
  auto median = [](std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return {median(raw_times), median(handle_times)};
}

/// Child mode: in a fresh process, times the first call (program, lookup, load or compile,
/// launch) and prints "child call_ms=X compiles=N disk_hits=N".
int child_main() {
  jit::ensure_context();  // driver init and context creation are not part of the call
  support::DeviceBuffer in(1024), out(1024);
  CUdeviceptr out_ptr = out.address(), in_ptr = in.address();
  float scale = 1.0f;
  unsigned count = 256;
  void* args[] = {&out_ptr, &in_ptr, &scale, &count};
  jit::LaunchDims dims;
  dims.block[0] = 256;
  const auto start = Clock::now();
  const jit::KernelHandle handle(probe_program(4));
  handle.launch(dims, nullptr, args);
  const double call_ms = ms_since(start);
  jit::check(jit::driver().cuCtxSynchronize(), "cuCtxSynchronize (probe kernel failed?)");
  const Counters c = counters();
  std::printf("child call_ms=%.3f compiles=%llu disk_hits=%llu\n", call_ms, static_cast<unsigned long long>(c.compiles),
              static_cast<unsigned long long>(c.disk_hits));
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

/// Call-to-launch in a fresh process: a first child compiles, a second finds the kernel on disk.
Table disk_hit_section() {
  char pattern[] = "/tmp/shapejit-jit-bench-XXXXXX";
  const char* dir = ::mkdtemp(pattern);
  if (!dir) throw std::runtime_error("mkdtemp failed");
  Table table{{"fresh process", "child output"}, {}};
  table.rows.push_back({"1st (empty cache: compile)", run_child(dir)});
  table.rows.push_back({"2nd (disk-cache hit)", run_child(dir)});
  for (int i = 3; i <= 5; ++i) table.rows.push_back({fmt::format("{}th (disk-cache hit)", i), run_child(dir)});
  for (auto& row : table.rows)
    while (!row[1].empty() && row[1].back() == '\n') row[1].pop_back();
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
    std::string report = fmt::format("# jit_bench\n\nNVRTC {} ({}), target {}, {}\n\n", jit::nvrtc().version,
                                     jit::nvrtc().path, arch, gpu ? "GPU present" : "no GPU: compile figures only");
    report += "## NVRTC compile times\n\n" + compiles.markdown();
    fmt::print("{}", compiles.text());
    if (gpu) {
      const LaunchCosts costs = launch_section(calls);
      Table launch{{"launch path", "median host us per call", "added over raw"}, {}};
      launch.rows.push_back({"raw cuLaunchKernel", fmt::format("{:.3f}", costs.raw_us), "-"});
      launch.rows.push_back({"jit::KernelHandle::launch (memory cache)", fmt::format("{:.3f}", costs.handle_us),
                             fmt::format("{:+.3f}", costs.handle_us - costs.raw_us)});
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
