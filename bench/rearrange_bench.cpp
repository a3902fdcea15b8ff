// Rearrange benchmark: every line of the TTC suite (in f32, u8, f16, f64 and 16-byte elements)
// and of the deep-learning suite. For each line: bandwidth (2 x bytes / time, median of CUDA-event
// timings after warm-up, random data) and its ratio to a device-to-device copy of the same bytes
// timed in this process; a sampled bit-exact check on a poisoned destination; the kernel family.
// Also: plan-creation host time for rank <= 8, the kernels the suites compiled, and exact mode
// against the default on a selection of lines. Full results go to $OUT/rearrange_bench.md.
//
//   rearrange_bench [--cases-dir bench/cases] [--only TEXT] [--plan-only]
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.hpp"
#include "shapejit/rearrange.hpp"
#include "support/device.hpp"

namespace {

using namespace shapejit;
using bench::CaseLine;
using bench::Table;

/// An element type of the benchmark: a dtype, or an opaque element of `elem_bytes`.
struct ElementType {
  std::string name;
  DType dtype;
  int elem_bytes;  ///< 0 for the dtype's own size
};

/// The TTC suite runs in each of these; the DL lines keep their own dtype.
const std::vector<ElementType> kTtcTypes = {
    {"f32", DType::f32, 0}, {"u8", DType::u8, 0}, {"f16", DType::f16, 0}, {"f64", DType::f64, 0}, {"16B", DType::u8, 16}};

/// One benchmark line, ready to plan: the source view in output order and the destination.
struct BenchCase {
  std::string suite;
  std::string type;
  std::string shape;        ///< source shape as written
  std::string perm;         ///< as written
  std::string src_strides;  ///< as written, "" when contiguous
  TensorDesc src;           ///< source view permuted into output order
  TensorDesc dst;
  std::size_t elem = 0;

  std::size_t bytes() const { return static_cast<std::size_t>(src.numel()) * elem; }
  int rank() const { return static_cast<int>(src.shape.size()); }
};

/// Offsets, in elements, of the lowest and highest element a view touches.
struct Span {
  std::int64_t lowest = 0, highest = 0;
};

Span span_of(const TensorDesc& view) {
  Span span;
  const auto strides = view.effective_strides();
  for (std::size_t d = 0; d < view.shape.size(); ++d) {
    const std::int64_t reach = (view.shape[d] - 1) * strides[d];
    (reach < 0 ? span.lowest : span.highest) += reach;
  }
  return span;
}

std::size_t span_bytes(const TensorDesc& view) {
  const Span s = span_of(view);
  return static_cast<std::size_t>(s.highest - s.lowest + 1) * view.element_size();
}

/// Builds a case from `rearrange --shape S --perm P [--src-strides ...] [--dst-strides ...]`,
/// in `type` (or the line's own --dtype when `type` is null).
BenchCase make_case(const std::string& suite, const CaseLine& line, const ElementType* type) {
  BenchCase c;
  c.suite = suite;
  c.shape = line.get("shape");
  c.perm = line.get("perm");
  c.src_strides = line.get_or("src-strides", "");
  DType dtype = DType::f32;
  int elem_bytes = 0;
  if (type) {
    dtype = type->dtype;
    elem_bytes = type->elem_bytes;
    c.type = type->name;
  } else {
    const auto parsed = parse_dtype(line.get("dtype"));
    if (!parsed) throw std::runtime_error(fmt::format("line {}: unknown dtype in: {}", line.line_number, line.text));
    dtype = *parsed;
    c.type = line.get("dtype");
  }
  const auto shape = bench::parse_int_list(c.shape, "--shape");
  const auto strides = c.src_strides.empty() ? std::vector<std::int64_t>{} : bench::parse_int_list(c.src_strides, "--src-strides");
  std::vector<int> perm;
  for (std::int64_t p : bench::parse_int_list(c.perm, "--perm")) perm.push_back(static_cast<int>(p));
  c.src = permuted(TensorDesc{shape, strides, dtype, elem_bytes}, perm);
  const auto dst_strides =
      line.has("dst-strides") ? bench::parse_int_list(line.get("dst-strides"), "--dst-strides") : std::vector<std::int64_t>{};
  c.dst = TensorDesc{c.src.shape, dst_strides, dtype, elem_bytes};
  c.elem = c.src.element_size();
  return c;
}

std::vector<BenchCase> load_cases(const std::string& dir, const std::string& only) {
  std::vector<BenchCase> cases;
  const auto ttc = bench::read_case_file(dir + "/rearrange-bench-ttc.txt");
  for (const ElementType& type : kTtcTypes)
    for (const CaseLine& line : ttc) cases.push_back(make_case("ttc", line, &type));
  for (const CaseLine& line : bench::read_case_file(dir + "/rearrange-bench-dl.txt"))
    cases.push_back(make_case("dl", line, nullptr));
  std::erase_if(cases, [&](const BenchCase& c) {
    return !only.empty() && fmt::format("{} {} {} {} {}", c.suite, c.type, c.shape, c.perm, c.src_strides).find(only) ==
                                std::string::npos;
  });
  return cases;
}

/// Per-line bandwidth target as a fraction of copy: rank 16+ with extents of 2 or 3 at least
/// 60%, 1- and 2-byte elements 70%, wider elements 80%.
struct TargetClass {
  std::string name;
  double line_target;
  double mean_target;  ///< geometric mean target of the class (0: none)
};

TargetClass target_class(const BenchCase& c) {
  const bool tiny_extents = std::all_of(c.src.shape.begin(), c.src.shape.end(), [](std::int64_t e) { return e <= 3; });
  if (c.rank() >= 16 && tiny_extents) return {"rank 16+, extents 2-3", 0.60, 0};
  if (c.elem <= 2) return {"1- and 2-byte elements", 0.70, 0.85};
  return {"elements of 4+ bytes", 0.80, 0.90};
}

/// The specialization key of the kernel the plan launches on aligned pointers (its family first),
/// from the plan's JSON; "?" when it does not say.
std::string kernel_of(const RearrangePlan& plan) {
  const auto j = nlohmann::json::parse(plan.json(), nullptr, false);
  if (!j.is_object() || !j.contains("variants") || j["variants"].empty()) return "?";
  return j["variants"][0].value("key", "?");
}

/// Device buffers shared by every line: a random source and a destination, each as large as the
/// largest line needs, with host copies for checking.
struct Buffers {
  Buffers(std::size_t src_bytes, std::size_t dst_bytes)
      : src(src_bytes), dst(dst_bytes), host_src(support::random_bytes(src_bytes, 2026)), host_dst(dst_bytes) {
    src.upload(host_src.data(), src_bytes);
  }
  support::DeviceBuffer src, dst;
  std::vector<std::uint8_t> host_src, host_dst;
};

/// Byte offset of a view's element 0 in a buffer that starts at its lowest element.
std::size_t origin_byte(const TensorDesc& view) {
  return static_cast<std::size_t>(-span_of(view).lowest) * view.element_size();
}

/// Launches once into a poisoned destination and compares `samples` random elements (and the
/// first and last) with the source, bit for bit. Returns "ok" or what went wrong.
std::string sampled_check(const RearrangePlan& plan, const BenchCase& c, Buffers& buffers, int samples) {
  const std::size_t src_origin = origin_byte(c.src), dst_origin = origin_byte(c.dst);
  buffers.dst.fill(0xa5);
  plan.launch(static_cast<std::uint8_t*>(buffers.dst.get()) + dst_origin,
              static_cast<const std::uint8_t*>(buffers.src.get()) + src_origin);
  buffers.dst.download(buffers.host_dst.data(), span_bytes(c.dst));
  const auto src_strides = c.src.effective_strides(), dst_strides = c.dst.effective_strides();
  const std::int64_t n = c.src.numel();
  if (n == 0) return "ok (empty)";
  std::mt19937_64 rng(static_cast<std::uint64_t>(n));
  for (int s = 0; s < samples + 2; ++s) {
    const std::int64_t linear = s == 0 ? 0 : s == 1 ? n - 1 : static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n));
    std::int64_t rest = linear, src_off = 0, dst_off = 0;
    for (std::size_t d = c.src.shape.size(); d-- > 0;) {
      const std::int64_t i = rest % c.src.shape[d];
      rest /= c.src.shape[d];
      src_off += i * src_strides[d];
      dst_off += i * dst_strides[d];
    }
    const std::int64_t e = static_cast<std::int64_t>(c.elem);
    if (std::memcmp(buffers.host_dst.data() + static_cast<std::int64_t>(dst_origin) + dst_off * e,
                    buffers.host_src.data() + static_cast<std::int64_t>(src_origin) + src_off * e, c.elem) != 0)
      return fmt::format("MISMATCH at element {}", linear);
  }
  return "ok";
}

struct Timing {
  int warmup = 3;
  int runs = 15;
};

/// GB/s of `plan` on line `c` (2 x bytes over the median event time).
double plan_bandwidth(const RearrangePlan& plan, const BenchCase& c, Buffers& buffers, const Timing& timing) {
  void* dst = static_cast<std::uint8_t*>(buffers.dst.get()) + origin_byte(c.dst);
  const void* src = static_cast<const std::uint8_t*>(buffers.src.get()) + origin_byte(c.src);
  const double ms = support::median_ms([&](CUstream s) { plan.launch(dst, src, s); }, timing.warmup, timing.runs);
  return 2.0 * static_cast<double>(c.bytes()) / (ms * 1e6);
}

/// Copy bandwidth per byte count, each measured once in this process.
double copy_gbs(std::size_t bytes) {
  static std::map<std::size_t, double> measured;
  auto it = measured.find(bytes);
  if (it == measured.end()) it = measured.emplace(bytes, support::copy_bandwidth_gbs(bytes)).first;
  return it->second;
}

struct LineResult {
  const BenchCase* c = nullptr;
  std::string kernel, check;
  double compile_ms = 0;  ///< NVRTC time of the line's first launch (0: its kernel was already loaded)
  double gbs = 0, copy = 0;
  double ratio() const { return gbs / copy; }
};

std::string percent(double fraction) { return fmt::format("{:.0f}%", 100.0 * fraction); }

std::vector<std::string> row_of(const LineResult& r) {
  const BenchCase& c = *r.c;
  return {c.suite,   c.type,   c.shape, c.perm, c.src_strides.empty() ? "-" : c.src_strides, r.kernel,
          fmt::format("{:.0f}", r.gbs), fmt::format("{:.0f}", r.copy), percent(r.ratio()),
          percent(target_class(c).line_target), r.check, r.compile_ms > 0 ? fmt::format("{:.0f}", r.compile_ms) : "-"};
}

/// Plan-creation host time for every distinct line of rank <= 8 (in its first element type).
Table plan_time_table(const std::vector<BenchCase>& cases, std::vector<double>& medians) {
  Table table{{"suite", "type", "shape", "perm", "rank", "plan us (median of 101)"}, {}};
  for (const BenchCase& c : cases) {
    if (c.rank() > 8 || (c.suite == "ttc" && c.type != "f32")) continue;
    const double us = bench::host_median_us([&] { plan_rearrange(c.dst, c.src); });
    medians.push_back(us);
    table.rows.push_back({c.suite, c.type, c.shape, c.perm, std::to_string(c.rank()), fmt::format("{:.1f}", us)});
  }
  return table;
}

std::string plan_time_summary(std::vector<double> us) {
  if (us.empty()) return "no lines of rank <= 8\n";
  std::sort(us.begin(), us.end());
  const auto over = std::count_if(us.begin(), us.end(), [](double t) { return t > 20.0; });
  return fmt::format("plan creation, rank <= 8: {} lines, median {:.1f} us, max {:.1f} us, {} over the 20 us target\n",
                     us.size(), us[us.size() / 2], us.back(), over);
}

/// Counter deltas over a stretch of the run.
struct CounterDelta {
  Counters before = counters();
  std::string text() const {
    const Counters now = counters();
    const auto compiles = now.compiles - before.compiles;
    const double ms = now.compile_ms - before.compile_ms;
    return fmt::format("{} compiles ({:.0f} ms in NVRTC, {:.0f} ms each on average), {} disk hits, {} memory hits",
                       compiles, ms, compiles ? ms / static_cast<double>(compiles) : 0.0, now.disk_hits - before.disk_hits,
                       now.memory_hits - before.memory_hits);
  }
};

/// Per-class and per-(suite, type) summaries against the targets, and the lines that miss.
std::string summary(const std::vector<LineResult>& results) {
  std::map<std::string, std::vector<double>> by_group, by_class;
  std::map<std::string, double> class_mean_target;
  Table misses{{"suite", "type", "shape", "perm", "src strides", "kernel", "ratio", "target"}, {}};
  for (const LineResult& r : results) {
    const TargetClass tc = target_class(*r.c);
    by_group[r.c->suite + " " + r.c->type].push_back(r.ratio());
    by_class[tc.name].push_back(r.ratio());
    class_mean_target[tc.name] = tc.mean_target;
    if (r.ratio() < tc.line_target)
      misses.rows.push_back({r.c->suite, r.c->type, r.c->shape, r.c->perm, r.c->src_strides.empty() ? "-" : r.c->src_strides,
                             r.kernel, percent(r.ratio()), percent(tc.line_target)});
  }
  Table groups{{"suite/type", "lines", "geomean of copy", "min", "max"}, {}};
  for (const auto& [name, ratios] : by_group)
    groups.rows.push_back({name, std::to_string(ratios.size()), percent(bench::geometric_mean(ratios)),
                           percent(*std::min_element(ratios.begin(), ratios.end())),
                           percent(*std::max_element(ratios.begin(), ratios.end()))});
  Table classes{{"class", "lines", "geomean", "mean target", "min"}, {}};
  for (const auto& [name, ratios] : by_class)
    classes.rows.push_back({name, std::to_string(ratios.size()), percent(bench::geometric_mean(ratios)),
                            class_mean_target[name] > 0 ? percent(class_mean_target[name]) : "-",
                            percent(*std::min_element(ratios.begin(), ratios.end()))});
  return fmt::format("### Lines under their target ({})\n\n{}\n### By suite and type\n\n{}\n### By target class\n\n{}",
                     misses.rows.size(), misses.rows.empty() ? "none\n" : misses.markdown(), groups.markdown(),
                     classes.markdown());
}

/// Exact mode against the default on a selection: every sixth TTC f32 line and the DL lines of
/// rank 4 or more.
Table exact_table(const std::vector<BenchCase>& cases, Buffers& buffers, const Timing& timing, int samples) {
  Table table{{"suite", "type", "shape", "perm", "default GB/s", "exact GB/s", "exact/default", "exact compile ms", "check"}, {}};
  int ttc_index = 0;
  for (const BenchCase& c : cases) {
    const bool picked = c.suite == "ttc" ? (c.type == "f32" && ttc_index++ % 6 == 0) : c.rank() >= 4;
    if (!picked) continue;
    const RearrangePlan normal = plan_rearrange(c.dst, c.src);
    RearrangeOptions options;
    options.exact = true;
    const RearrangePlan exact = plan_rearrange(c.dst, c.src, options);
    const Counters before = counters();
    const std::string check = sampled_check(exact, c, buffers, samples);
    const Counters after = counters();
    const double compile_ms = after.compiles > before.compiles ? (after.compile_ms - before.compile_ms) : 0.0;
    const double normal_gbs = plan_bandwidth(normal, c, buffers, timing);
    const double exact_gbs = plan_bandwidth(exact, c, buffers, timing);
    table.rows.push_back({c.suite, c.type, c.shape, c.perm, fmt::format("{:.0f}", normal_gbs), fmt::format("{:.0f}", exact_gbs),
                          fmt::format("{:.3f}", exact_gbs / normal_gbs), fmt::format("{:.1f}", compile_ms), check});
  }
  return table;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"shapejit rearrange benchmark (TTC and deep-learning suites)"};
  std::string cases_dir = "bench/cases", only;
  Timing timing;
  int samples = 1 << 16;
  bool plan_only = false;
  app.add_option("--cases-dir", cases_dir, "Directory of rearrange-bench-ttc.txt and rearrange-bench-dl.txt");
  app.add_option("--only", only, "Run only lines whose 'suite type shape perm strides' contains this text");
  app.add_option("--warmup", timing.warmup, "Untimed runs before timing")->check(CLI::Range(1, 1000));
  app.add_option("--runs", timing.runs, "Timed runs per line (the median is reported)")->check(CLI::Range(1, 10000));
  app.add_option("--samples", samples, "Elements checked per line")->check(CLI::Range(0, 1 << 26));
  app.add_flag("--plan-only", plan_only, "Only the plan-creation host times (no GPU needed)");
  CLI11_PARSE(app, argc, argv);

  try {
    const std::vector<BenchCase> cases = load_cases(cases_dir, only);
    std::vector<double> plan_us;
    const Table plan_times = plan_time_table(cases, plan_us);
    const std::string plan_summary = plan_time_summary(plan_us);
    std::string report = "# rearrange_bench\n\n## Plan creation (host)\n\n" + plan_summary + "\n" + plan_times.markdown();
    if (plan_only) {
      fmt::print("{}\n{}", plan_times.text(), plan_summary);
      if (const std::string dir = bench::output_dir(); !dir.empty())
        bench::write_text_file(dir + "/rearrange_plan_times.md", report);
      return 0;
    }

    std::size_t src_bytes = 0, dst_bytes = 0;
    for (const BenchCase& c : cases) {
      src_bytes = std::max(src_bytes, span_bytes(c.src));
      dst_bytes = std::max(dst_bytes, span_bytes(c.dst));
    }
    Buffers buffers(src_bytes, dst_bytes);
    const std::string device = [] {
      char name[256] = {};
      jit::driver().cuDeviceGetName(name, sizeof name, jit::ensure_context());
      return std::string(name);
    }();

    Table lines{{"suite", "type", "shape", "perm", "src strides", "kernel", "GB/s", "copy GB/s", "of copy", "target", "check", "compile ms"}, {}};
    fmt::print("{}\n", fmt::join(lines.header, " | "));
    std::vector<LineResult> results;
    std::map<std::string, std::string> compiled;  // suite -> counter deltas
    std::string suite_now;
    CounterDelta delta;
    for (const BenchCase& c : cases) {
      if (c.suite != suite_now) {
        if (!suite_now.empty()) compiled[suite_now] = delta.text();
        suite_now = c.suite;
        delta = CounterDelta{};
      }
      const RearrangePlan plan = plan_rearrange(c.dst, c.src);
      const double compile_ms_before = counters().compile_ms;
      LineResult r{&c, kernel_of(plan), sampled_check(plan, c, buffers, samples)};
      r.compile_ms = counters().compile_ms - compile_ms_before;
      r.gbs = plan_bandwidth(plan, c, buffers, timing);
      r.copy = copy_gbs(c.bytes());
      results.push_back(r);
      lines.rows.push_back(row_of(r));
      fmt::print("{}\n", fmt::join(lines.rows.back(), " | "));
      std::fflush(stdout);
    }
    if (!suite_now.empty()) compiled[suite_now] = delta.text();

    std::string kernels;
    for (const auto& [suite, text] : compiled) kernels += fmt::format("- suite {}: {}\n", suite, text);
    const std::string summaries = summary(results);
    const Table exact = exact_table(cases, buffers, timing, samples);

    const std::string head = fmt::format("device {}, {} warm-up + {} timed runs per line (median), {} sampled elements "
                                         "checked per line on a poisoned destination\n",
                                         device, timing.warmup, timing.runs, samples);
    report += fmt::format("\n## Bandwidth\n\n{}\n{}\n{}\n## Kernels compiled\n\n{}\n## Exact mode\n\n{}", head,
                          lines.markdown(), summaries, kernels, exact.markdown());
    fmt::print("\n## Exact mode\n{}\n## Kernels compiled\n{}\n{}\n{}{}", exact.text(), kernels, summaries, plan_summary, head);
    if (const std::string dir = bench::output_dir(); !dir.empty()) bench::write_text_file(dir + "/rearrange_bench.md", report);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "rearrange_bench: {}\n", e.what());
    return 1;
  }
}
