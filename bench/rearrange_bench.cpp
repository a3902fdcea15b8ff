// Rearrange benchmark: every line of the TTC suite (in f32, u8, f16, f64 and 16-byte elements)
// and of the deep-learning suite. For each line: bandwidth (2 x bytes / time, median of CUDA-event
// timings after warm-up, random data) and its ratio to a device-to-device copy of the same bytes
// timed in this process; a sampled bit-exact check on a poisoned destination; the kernel family.
// Also: plan-creation host time for rank <= 8, the kernels the suites compiled, and exact mode
// against the default on a selection of lines. Full results go to $OUT/rearrange_bench.md.
//
//   rearrange_bench [--cases-dir bench/cases] [--only TEXT] [--plan-only | --keys]
//   rearrange_bench --random SEED [--count N] [--elem-bytes 1,2,4,8,16] [--emit-cases FILE]
//                   [--only TEXT] [--plan-only | --keys]
//   rearrange_bench --cases FILE... [--only TEXT] [--plan-only | --keys]
//
// --random SEED replaces the two suites by suite `random-SEED`, generated from SEED alone after
// cuTT's benchmark rules, in each element size of --elem-bytes (default all five): N (default 24)
// random-volume cases (ranks 2-8 and 15 in turn, random extents >= 2 whose product is within 30%
// of 2e8 elements; of a volume drawn in [1e8, 2e8] for 1- and 2-byte elements, of 1e8 for 16-byte
// ones) and 4 cases of fixed extent multisets of ranks 8 and 12, shuffled; every case with a random
// non-identity permutation. Same checks and timing, targets of their own, no exact-mode table;
// results go to $OUT/rearrange_bench_random-SEED.md. --emit-cases FILE writes the cases as case-file
// lines (16-byte elements as `--dtype u8 --elem-bytes 16`), for bench/peers_random.py, and exits
// without touching the GPU; --plan-only needs no GPU either. --cases FILE... runs the lines of case
// files as suite `cases`, each line in its own element type (its --dtype, and --elem-bytes for an
// opaque element, as --emit-cases writes them; DL-file lines read --elem-bytes too), under the random
// suites' targets, without the exact-mode table; results go to $OUT/rearrange_bench_cases.md.
// --keys prints each line's kernel key on 16-byte aligned pointers and exits, without a GPU: two
// builds' lists, diffed, name the lines a planner change moves.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>
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
  std::string line;         ///< the case-file line
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
/// in `type` (or the line's own --dtype and --elem-bytes when `type` is null).
BenchCase make_case(const std::string& suite, const CaseLine& line, const ElementType* type) {
  BenchCase c;
  c.suite = suite;
  c.shape = line.get("shape");
  c.perm = line.get("perm");
  c.src_strides = line.get_or("src-strides", "");
  c.line = line.text;
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
    if (line.has("elem-bytes")) {
      const auto bytes = bench::parse_int_list(line.get("elem-bytes"), "--elem-bytes");
      if (bytes.size() != 1 || bytes[0] < 1 || bytes[0] > 64)
        throw std::runtime_error(
            fmt::format("line {}: --elem-bytes takes one size from 1 to 64 in: {}", line.line_number, line.text));
      elem_bytes = static_cast<int>(bytes[0]);
      c.type = fmt::format("{}B", elem_bytes);
    }
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

std::vector<BenchCase> load_cases(const std::string& dir) {
  std::vector<BenchCase> cases;
  const auto ttc = bench::read_case_file(dir + "/rearrange-bench-ttc.txt");
  for (const ElementType& type : kTtcTypes)
    for (const CaseLine& line : ttc) cases.push_back(make_case("ttc", line, &type));
  for (const CaseLine& line : bench::read_case_file(dir + "/rearrange-bench-dl.txt"))
    cases.push_back(make_case("dl", line, nullptr));
  return cases;
}

/// Suite `cases`: the lines of case files, each in its own element type.
std::vector<BenchCase> file_cases(const std::vector<std::string>& paths) {
  std::vector<BenchCase> cases;
  for (const std::string& path : paths)
    for (const CaseLine& line : bench::read_case_file(path)) cases.push_back(make_case("cases", line, nullptr));
  return cases;
}

/// Keeps the lines whose 'suite type shape perm strides' contains `only` (all when it is empty).
void keep_only(std::vector<BenchCase>& cases, const std::string& only) {
  std::erase_if(cases, [&](const BenchCase& c) {
    return !only.empty() && fmt::format("{} {} {} {} {}", c.suite, c.type, c.shape, c.perm, c.src_strides).find(only) ==
                                std::string::npos;
  });
}

/// The TTC suite's element type of `bytes` bytes; throws for a size it does not have.
const ElementType& type_of_size(std::int64_t bytes) {
  for (const ElementType& t : kTtcTypes)
    if ((t.elem_bytes ? t.elem_bytes : static_cast<std::int64_t>(dtype_size(t.dtype))) == bytes) return t;
  throw std::runtime_error(fmt::format("--elem-bytes: no element type of {} bytes (1, 2, 4, 8 or 16)", bytes));
}

/// Random draws from the engine's raw output only: std's distributions differ between standard
/// libraries, and a seed must give the same cases everywhere.
class Draw {
 public:
  explicit Draw(std::uint64_t seed) : engine_(seed) {}
  /// Uniform in [0, 1).
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(engine_() % n); }
  template <typename T>
  void shuffle(std::vector<T>& v) {
    for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[below(i)]);
  }

 private:
  std::mt19937_64 engine_;
};

/// A random permutation other than the identity.
std::vector<std::int64_t> random_permutation(std::size_t rank, Draw& draw) {
  std::vector<std::int64_t> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  while (std::is_sorted(perm.begin(), perm.end())) draw.shuffle(perm);
  return perm;
}

double product(const std::vector<std::int64_t>& extents) {
  return std::accumulate(extents.begin(), extents.end(), 1.0,
                         [](double p, std::int64_t e) { return p * static_cast<double>(e); });
}

/// Random extents, each >= 2, whose product is within 30% of `volume`: log-uniform weights
/// (log extent = mean log x (1 + 2 (u - mean u)), u uniform in [0, 1)) scaled so that their product
/// is the volume, rounded, then the largest set to hit the volume; redrawn when that still misses.
std::vector<std::int64_t> random_extents(int rank, double volume, Draw& draw) {
  const double mean_log = std::log(volume) / rank;
  for (;;) {
    std::vector<double> u(static_cast<std::size_t>(rank));
    for (double& x : u) x = draw.uniform();
    const double u_mean = std::accumulate(u.begin(), u.end(), 0.0) / rank;
    std::vector<std::int64_t> extents;
    for (double x : u)
      extents.push_back(std::max<std::int64_t>(2, std::llround(std::exp(mean_log * (1 + 2 * (x - u_mean))))));
    const auto largest = std::max_element(extents.begin(), extents.end());
    *largest = std::max<std::int64_t>(2, std::llround(volume / (product(extents) / static_cast<double>(*largest))));
    if (std::abs(product(extents) / volume - 1) <= 0.3) return extents;
  }
}

/// Volume in elements of a random-volume case: 2e8 for 4- and 8-byte elements, drawn in [1e8, 2e8]
/// for 1- and 2-byte ones, 1e8 for 16-byte ones (a 1.6 GB tensor, as 2e8 8-byte elements make).
double random_volume(std::int64_t elem_bytes, Draw& draw) {
  if (elem_bytes <= 2) return 1e8 * (1 + draw.uniform());
  return elem_bytes == 16 ? 1e8 : 2e8;
}

/// Ranks of the random-volume cases, taken in turn (cuTT's bench3 runs each equally often).
const std::vector<int> kRandomRanks = {2, 3, 4, 5, 6, 7, 8, 15};

/// Extent multisets after cuTT's bench7 (four large extents among small ones), each shuffled
/// twice per element size. Rank 8: its {5,3,2,4,35,33,37,40} with 37 read as 36, which gives the
/// 199,584,000 elements its comment states; rank 12: its {2,3,4,3,2,2,3,2,20,18,22,24} with the 4
/// made a 2, 164,229,120 elements instead of 328,458,240, to stay within 1e8-2e8.
const std::vector<std::vector<std::int64_t>> kMultisets = {{5, 3, 2, 4, 35, 33, 36, 40},
                                                           {2, 3, 2, 3, 2, 2, 3, 2, 20, 18, 22, 24}};
constexpr int kShufflesPerMultiset = 2;

/// The case-file line of a generated case; an opaque element as `--dtype u8 --elem-bytes 16`.
std::string case_line(const ElementType& type, const std::vector<std::int64_t>& shape,
                      const std::vector<std::int64_t>& perm) {
  const std::string opaque = type.elem_bytes ? fmt::format(" --elem-bytes {}", type.elem_bytes) : "";
  return fmt::format("rearrange --dtype {}{} --shape {} --perm {}", dtype_name(type.dtype), opaque, bench::join_ints(shape),
                     bench::join_ints(perm));
}

/// Suite `random-SEED` in the element sizes `sizes`. Every size is drawn (in the order 1, 2, 4, 8,
/// 16 bytes) and the others dropped after, so the cases depend on the seed and `count` only.
std::vector<BenchCase> random_cases(std::uint64_t seed, int count, const std::vector<std::int64_t>& sizes) {
  for (std::int64_t bytes : sizes) type_of_size(bytes);  // throws for a size without a type
  Draw draw(seed);
  const std::string suite = fmt::format("random-{}", seed);
  std::vector<BenchCase> cases;
  auto add = [&](const ElementType& type, const std::vector<std::int64_t>& shape) {
    const std::string text = case_line(type, shape, random_permutation(shape.size(), draw));
    cases.push_back(make_case(suite, bench::parse_case_line(text), &type));
  };
  for (std::int64_t bytes : {1, 2, 4, 8, 16}) {
    const ElementType& type = type_of_size(bytes);
    for (int i = 0; i < count; ++i) {
      const double volume = random_volume(bytes, draw);
      add(type, random_extents(kRandomRanks[static_cast<std::size_t>(i) % kRandomRanks.size()], volume, draw));
    }
    for (std::vector<std::int64_t> extents : kMultisets)
      for (int i = 0; i < kShufflesPerMultiset; ++i) {
        draw.shuffle(extents);
        add(type, extents);
      }
  }
  std::erase_if(cases, [&](const BenchCase& c) {
    return std::find(sizes.begin(), sizes.end(), static_cast<std::int64_t>(c.elem)) == sizes.end();
  });
  return cases;
}

/// A line's source strides as its tables show them ("-" for a contiguous permuted view).
std::string src_strides_text(const BenchCase& c) { return c.src_strides.empty() ? "-" : c.src_strides; }

/// Whether a line takes the random suites' targets: theirs, and those of case files (most often
/// lines drawn from them).
bool takes_random_targets(const BenchCase& c) { return c.suite.starts_with("random-") || c.suite == "cases"; }

/// Per-line bandwidth target as a fraction of copy. The file suites: rank 16+ with extents of 2 or
/// 3 at least 60%, 1- and 2-byte elements 70%, wider elements 80%. The random suites and case files
/// (takes_random_targets): 4+ byte elements 75%, 2-byte 65%, 1-byte 55%.
struct TargetClass {
  std::string name;
  double line_target;
  double mean_target;  ///< geometric mean target of the class (0: none)
};

TargetClass target_class(const BenchCase& c) {
  if (takes_random_targets(c)) {
    const std::string kind = c.suite == "cases" ? "case files" : "random";
    if (c.elem >= 4) return {kind + ", elements of 4+ bytes", 0.75, 0.92};
    if (c.elem == 2) return {kind + ", 2-byte elements", 0.65, 0.85};
    return {kind + ", 1-byte elements", 0.55, 0.80};
  }
  const bool tiny_extents = std::all_of(c.src.shape.begin(), c.src.shape.end(), [](std::int64_t e) { return e <= 3; });
  if (c.rank() >= 16 && tiny_extents) return {"rank 16+, extents 2-3", 0.60, 0};
  if (c.elem <= 2) return {"1- and 2-byte elements", 0.70, 0.85};
  return {"elements of 4+ bytes", 0.80, 0.90};
}

/// The specialization key of the kernel the plan launches on 16-byte aligned pointers (its family
/// first), from the plan's JSON; "?" when it does not say.
std::string kernel_of(const RearrangePlan& plan) {
  const auto j = nlohmann::json::parse(plan.json(), nullptr, false);
  if (!j.is_object() || !j.contains("variants")) return "?";
  for (const auto& v : j["variants"])
    for (const auto& align : v.value("alignments", nlohmann::json::array()))
      if (align == 16) return v.value("key", "?");
  return "?";
}

/// The candidate a tuned plan launches (kernel key and tiles per block), from its JSON's tuning
/// text ("measured: CHOICE on DEVICE, ..." or "from a record: ..."); the kernel key otherwise.
std::string tuned_kernel_of(const RearrangePlan& plan) {
  const auto j = nlohmann::json::parse(plan.json(), nullptr, false);
  const std::string tuning = j.is_object() ? j.value("tuning", "") : "";
  const std::size_t start = tuning.find(": "), end = tuning.find(" on ");
  if (start == std::string::npos || end == std::string::npos || tuning.rfind("not measured", 0) == 0)
    return kernel_of(plan);
  return tuning.substr(start + 2, end - start - 2);
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

/// --tune: the measured plan of a line beside its default plan.
struct TunedResult {
  std::string kernel, check;
  double plan_ms = 0;  ///< plan creation with measuring (candidates' compiles included)
  double gbs = 0;
};

std::string percent(double fraction) { return fmt::format("{:.0f}%", 100.0 * fraction); }

std::vector<std::string> row_of(const LineResult& r) {
  const BenchCase& c = *r.c;
  return {c.suite,   c.type,   c.shape, c.perm, src_strides_text(c), r.kernel,
          fmt::format("{:.0f}", r.gbs), fmt::format("{:.0f}", r.copy), percent(r.ratio()),
          percent(target_class(c).line_target), r.check, r.compile_ms > 0 ? fmt::format("{:.0f}", r.compile_ms) : "-"};
}

constexpr int kPlanRounds = 7;
constexpr int kPlanRunsPerRound = 15;

/// Plan-creation host time for every distinct line of rank <= 8 (in its first element type): the
/// median of its plans over kPlanRounds rounds that each time every line in turn, so that a slow
/// spell of the host (another process, a clock change) falls on a few of each line's samples rather
/// than on all of one line's.
Table plan_time_table(const std::vector<BenchCase>& cases, std::vector<double>& medians) {
  Table table{{"suite", "type", "shape", "perm", "rank",
               fmt::format("plan us (median of {} in {} rounds)", kPlanRounds * kPlanRunsPerRound, kPlanRounds)},
              {}};
  std::vector<const BenchCase*> timed;
  for (const BenchCase& c : cases)
    if (c.rank() <= 8 && (c.suite != "ttc" || c.type == "f32")) timed.push_back(&c);
  std::vector<std::vector<double>> samples(timed.size());
  for (int round = 0; round < kPlanRounds; ++round)
    for (std::size_t i = 0; i < timed.size(); ++i) {
      const BenchCase& c = *timed[i];
      if (round == 0) plan_rearrange(c.dst, c.src);  // warm-up
      bench::append_host_times_us([&] { plan_rearrange(c.dst, c.src); }, kPlanRunsPerRound, samples[i]);
    }
  for (std::size_t i = 0; i < timed.size(); ++i) {
    const double us = bench::median(std::move(samples[i]));
    medians.push_back(us);
    const BenchCase& c = *timed[i];
    table.rows.push_back({c.suite, c.type, c.shape, c.perm, std::to_string(c.rank()), fmt::format("{:.1f}", us)});
  }
  return table;
}

/// Each line with the key of the kernel its plan launches on 16-byte aligned pointers.
Table kernel_key_table(const std::vector<BenchCase>& cases) {
  Table table{{"suite", "type", "shape", "perm", "src strides", "kernel"}, {}};
  for (const BenchCase& c : cases)
    table.rows.push_back({c.suite, c.type, c.shape, c.perm, src_strides_text(c),
                          kernel_of(plan_rearrange(c.dst, c.src))});
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
      misses.rows.push_back({r.c->suite, r.c->type, r.c->shape, r.c->perm, src_strides_text(*r.c),
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

/// The tuned plan of every line against its default: lines, then how many lost and what lines
/// under 85% of copy gained.
std::string tune_report(const std::vector<LineResult>& results, const std::vector<TunedResult>& tuned) {
  Table table{{"suite", "type", "shape", "perm", "default kernel", "default of copy", "tuned kernel", "tuned of copy",
               "tuned/default", "tune ms", "check"}, {}};
  std::vector<double> gains_under_85, default_ratios, tuned_ratios;
  int slower = 0;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const LineResult& r = results[i];
    const TunedResult& t = tuned[i];
    const double tuned_ratio = t.gbs / r.copy;
    default_ratios.push_back(r.ratio());
    tuned_ratios.push_back(tuned_ratio);
    if (r.ratio() < 0.85) gains_under_85.push_back(100.0 * (tuned_ratio - r.ratio()));
    slower += t.gbs < 0.98 * r.gbs;
    table.rows.push_back({r.c->suite, r.c->type, r.c->shape, r.c->perm, r.kernel, percent(r.ratio()), t.kernel,
                          percent(tuned_ratio), fmt::format("{:.3f}", t.gbs / r.gbs), fmt::format("{:.0f}", t.plan_ms),
                          t.check});
  }
  double mean_gain = 0;
  for (double g : gains_under_85) mean_gain += g / static_cast<double>(gains_under_85.size());
  return fmt::format("{}\ngeomean of copy: default {}, tuned {}; tuned more than 2% slower than default on {} of {} "
                     "lines; {} lines under 85% by default gained {:.1f} points on average\n",
                     table.markdown(), percent(bench::geometric_mean(default_ratios)),
                     percent(bench::geometric_mean(tuned_ratios)), slower, results.size(), gains_under_85.size(),
                     mean_gain);
}

/// Writes the cases as a case file, one line each, under a comment saying how they were made.
void emit_cases(const std::string& path, const std::vector<BenchCase>& cases, const std::string& made_by) {
  std::string text = fmt::format("# {} rearrange cases from: {}\n", cases.size(), made_by);
  for (const BenchCase& c : cases) text += c.line + "\n";
  bench::write_text_file(path, text);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"shapejit rearrange benchmark (TTC and deep-learning suites, random ones, or case files)"};
  std::string cases_dir = "bench/cases", only, elem_bytes = "1,2,4,8,16", emit_path;
  std::vector<std::string> case_files;
  Timing timing;
  int samples = 1 << 16, count = 24;
  std::uint64_t seed = 0;
  bool plan_only = false, keys = false, tune = false;
  CLI::Option* dir = app.add_option("--cases-dir", cases_dir, "Directory of rearrange-bench-ttc.txt and rearrange-bench-dl.txt");
  CLI::Option* random = app.add_option("--random", seed, "Run suite random-SEED, generated from this seed, instead");
  CLI::Option* files = app.add_option("--cases", case_files,
                                      "Run the lines of these case files instead, each line in its own element type "
                                      "(its --dtype, and --elem-bytes for opaque elements), as --emit-cases writes them")
                           ->excludes(dir)
                           ->excludes(random);
  app.add_option("--count", count, "Random-volume cases per element size (--random)")
      ->check(CLI::Range(0, 100000))
      ->needs(random);
  app.add_option("--elem-bytes", elem_bytes, "Element sizes of the random suite, from 1,2,4,8,16")->needs(random);
  app.add_option("--emit-cases", emit_path, "Write the random suite as a case file and exit (no GPU)")->needs(random);
  app.add_option("--only", only, "Run only lines whose 'suite type shape perm strides' contains this text");
  app.add_option("--warmup", timing.warmup, "Untimed runs before timing")->check(CLI::Range(1, 1000));
  app.add_option("--runs", timing.runs, "Timed runs per line (the median is reported)")->check(CLI::Range(1, 10000));
  app.add_option("--samples", samples, "Elements checked per line")->check(CLI::Range(0, 1 << 26));
  CLI::Option* plan_only_flag = app.add_flag("--plan-only", plan_only, "Only the plan-creation host times (no GPU needed)");
  app.add_flag("--keys", keys, "Print each line's kernel key on 16-byte aligned pointers and exit (no GPU needed)")
      ->excludes(plan_only_flag);
  app.add_flag("--tune", tune, "Also plan each line with tune (measured planning) and compare it with the default");
  CLI11_PARSE(app, argc, argv);

  try {
    const bool random_suite = random->count() > 0, from_files = files->count() > 0;
    std::vector<BenchCase> cases = random_suite ? random_cases(seed, count, bench::parse_int_list(elem_bytes, "--elem-bytes"))
                                   : from_files ? file_cases(case_files)
                                                : load_cases(cases_dir);
    keep_only(cases, only);
    if (!emit_path.empty()) {
      emit_cases(emit_path, cases,
                 fmt::format("rearrange_bench --random {} --count {} --elem-bytes {}{}", seed, count, elem_bytes,
                             only.empty() ? "" : fmt::format(" --only '{}'", only)));
      fmt::print("wrote {} cases to {}\n", cases.size(), emit_path);
      return 0;
    }
    if (keys) {
      fmt::print("{}", kernel_key_table(cases).text());
      return 0;
    }
    const std::string file_suffix =
        (random_suite ? fmt::format("_random-{}", seed) : from_files ? "_cases" : "") + (tune ? "_tune" : "");
    std::vector<double> plan_us;
    const Table plan_times = plan_time_table(cases, plan_us);
    const std::string plan_summary = plan_time_summary(plan_us);
    std::string report = "# rearrange_bench\n\n## Plan creation (host)\n\n" + plan_summary + "\n" + plan_times.markdown();
    if (plan_only) {
      fmt::print("{}\n{}", plan_times.text(), plan_summary);
      if (const std::string dir = bench::output_dir(); !dir.empty())
        bench::write_text_file(dir + "/rearrange_plan_times" + file_suffix + ".md", report);
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
    std::vector<TunedResult> tuned;
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
      if (tune) {
        RearrangeOptions options;
        options.tune = true;
        const auto start = std::chrono::steady_clock::now();
        const RearrangePlan measured = plan_rearrange(c.dst, c.src, options);
        TunedResult t{tuned_kernel_of(measured), sampled_check(measured, c, buffers, samples)};
        t.plan_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        t.gbs = plan_bandwidth(measured, c, buffers, timing);
        fmt::print("  tuned: {} {:.0f}% of copy ({:.0f} ms to plan), {}\n", t.kernel, 100.0 * t.gbs / r.copy, t.plan_ms,
                   t.check);
        tuned.push_back(t);
      }
      lines.rows.push_back(row_of(r));
      fmt::print("{}\n", fmt::join(lines.rows.back(), " | "));
      std::fflush(stdout);
    }
    if (!suite_now.empty()) compiled[suite_now] = delta.text();

    std::string kernels;
    for (const auto& [suite, text] : compiled) kernels += fmt::format("- suite {}: {}\n", suite, text);
    const std::string summaries = summary(results);
    // The random suites and case files skip exact mode: slow, a second plan, kernel and timing per case.
    const std::optional<Table> exact =
        random_suite || from_files || tune ? std::nullopt : std::optional<Table>(exact_table(cases, buffers, timing, samples));

    const std::string head = fmt::format("device {}, {} warm-up + {} timed runs per line (median), {} sampled elements "
                                         "checked per line on a poisoned destination\n",
                                         device, timing.warmup, timing.runs, samples);
    report += fmt::format("\n## Bandwidth\n\n{}\n{}\n{}\n## Kernels compiled\n\n{}", head, lines.markdown(), summaries, kernels);
    if (exact) report += "\n## Exact mode\n\n" + exact->markdown();
    if (tune) {
      const std::string tuned_text = tune_report(results, tuned);
      report += "\n## Measured planning (tune)\n\n" + tuned_text;
      fmt::print("\n## Measured planning (tune)\n{}", tuned_text);
    }
    fmt::print("{}\n## Kernels compiled\n{}\n{}\n{}{}", exact ? "\n## Exact mode\n" + exact->text() : "", kernels, summaries,
               plan_summary, head);
    if (const std::string dir = bench::output_dir(); !dir.empty())
      bench::write_text_file(dir + "/rearrange_bench" + file_suffix + ".md", report);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "rearrange_bench: {}\n", e.what());
    return 1;
  }
}
