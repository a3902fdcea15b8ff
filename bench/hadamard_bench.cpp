// Hadamard benchmark: for each size and dtype, x of about 256 MiB (several times the L2) filled with
// random values, transformed out of place into a second buffer; CUDA events around each launch,
// median of 50 after 10 warm-up launches, compared in the same process with a device-to-device copy
// of the same bytes timed the same way. Bandwidth counts x read plus y written. Before timing, one
// launch into a poisoned y is checked against the dense float64 reference on sampled outputs of the
// first, middle and last rows.
//
//   hadamard_bench [--only TEXT...] [--mib 256]
// Writes the markdown table to $OUT/hadamard_bench.md when OUT is set.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "bench/bench_util.hpp"
#include "core/convert.hpp"
#include "ops/hadamard/impl.hpp"
#include "ops/hadamard/reference.hpp"
#include "shapejit/hadamard.hpp"
#include "support/device.hpp"

namespace {

using namespace shapejit;
using support::DeviceBuffer;

struct Case {
  DType dtype;
  std::vector<std::int64_t> inner;  ///< [heads, dhead] (or [..., heads, dhead] without the leading rows)
  std::int64_t group;
};

std::string case_text(const Case& c, std::int64_t rows) {
  return fmt::format("{} [{},{}] group {} (n = {})", dtype_name(c.dtype), rows, bench::join_ints(c.inner), c.group,
                     c.group * c.inner.back());
}

/// `count` random values in [-2, 2) of `t` at `host`, in blocks of 2^20, each from its own generator
/// seeded by (seed, block), drawn on every core: one core took seconds for each 256 MiB line.
void fill_random(std::vector<std::uint8_t>& host, DType t, std::int64_t count, std::uint64_t seed) {
  constexpr std::int64_t kBlock = std::int64_t{1} << 20;
  const std::int64_t blocks = (count + kBlock - 1) / kBlock;
  std::atomic<std::int64_t> next{0};
  auto draw_blocks = [&] {
    for (std::int64_t b = next++; b < blocks; b = next++) {
      std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ULL + static_cast<std::uint64_t>(b));
      std::uniform_real_distribution<double> dist(-2, 2);
      for (std::int64_t i = b * kBlock; i < std::min(count, (b + 1) * kBlock); ++i)
        detail::store_from_double(host.data(), t, i, dist(rng));
    }
  };
  std::vector<std::thread> threads(std::max(1u, std::thread::hardware_concurrency()));
  for (std::thread& thread : threads) thread = std::thread(draw_blocks);
  for (std::thread& thread : threads) thread.join();
}

/// Sampled outputs of three rows against the reference; the number of mismatches.
int check(const HadamardPlan& plan, const std::vector<std::uint8_t>& x_host, const DeviceBuffer& y) {
  const plan::HadamardPlanData& data = plan.impl().data;
  const DType t = data.desc.x.dtype;
  const std::int64_t n = plan::hadamard_n(data.spec);
  const std::vector<std::int64_t> strides = data.desc.y->effective_strides();
  int bad = 0;
  std::mt19937_64 pick(5);
  for (std::int64_t row : {std::int64_t{0}, data.args.rows / 2, data.args.rows - 1}) {
    const std::vector<double> in = detail::hadamard_row_inputs(data, x_host.data(), row);
    const std::vector<std::int64_t> at = detail::hadamard_row_offsets(data, strides, row);
    for (int k = 0; k < 64; ++k) {
      const auto i = static_cast<std::int64_t>(pick() % static_cast<std::uint64_t>(n));
      const double want = detail::hadamard_reference_output(data, in, i);
      double got = 0;
      std::vector<std::uint8_t> one(dtype_size(t));
      y.download(one.data(), one.size(), static_cast<std::size_t>(at[static_cast<std::size_t>(i)]) * one.size());
      got = detail::load_as_double(one.data(), t, 0);
      const double tolerance = 2e-2 * std::max(1.0, std::fabs(want)) + (t == DType::f64 || t == DType::f32 ? 0 : 1e-2);
      if (!(std::fabs(got - want) <= tolerance)) ++bad;
    }
  }
  return bad;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Times hadamard against a same-bytes device copy"};
  std::vector<std::string> only;
  std::int64_t mib = 256;
  app.add_option("--only", only, "Run only cases whose text contains one of these");
  app.add_option("--mib", mib, "Bytes of x per case, in MiB");
  CLI11_PARSE(app, argc, argv);
  try {
    jit::ensure_context();
    const std::string name = support::device_name();
    std::vector<Case> cases;
    for (DType t : {DType::bf16, DType::f16})
      for (std::int64_t n : {128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 12 * 256, 20 * 1024, 28 * 1024})
        cases.push_back({t, {1, n}, 1});
    // m-point sizes the m-point kernels were not tuned on (3072, 20480 and 28672 above were).
    for (DType t : {DType::bf16, DType::f16})
      for (std::int64_t n : {12 * 64, 12 * 1024, 20 * 64, 20 * 256, 20 * 512, 28 * 128, 28 * 256, 28 * 512})
        cases.push_back({t, {1, n}, 1});
    cases.push_back({DType::bf16, {32, 128}, 32});  // [B, S, H, D] KV keys, all 32 heads in one group
    cases.push_back({DType::bf16, {8, 128}, 4});    // GQA keys, groups of 4 heads
    // Rows of one warp crossing their lanes in shared memory, which the rule was not tuned on.
    cases.push_back({DType::bf16, {16, 128}, 16});
    cases.push_back({DType::f16, {8, 256}, 8});
    for (std::int64_t n : {128, 1024, 4096, 8192, 12 * 256, 20 * 256, 28 * 128}) cases.push_back({DType::f32, {1, n}, 1});
    // f32 rows the prefetching rule was not tuned on (12 x 128, 20 x 64 and 28 x 64 later chose the
    // rule that m-point rows of one warp span two).
    for (std::int64_t n : {2048, 16384, 12 * 128, 12 * 1024, 20 * 512, 28 * 256, 28 * 512, 20 * 64, 28 * 64})
      cases.push_back({DType::f32, {1, n}, 1});
    cases.push_back({DType::f32, {32, 128}, 32});
    for (std::int64_t n : {1024, 2048, 4096, 8192, 12 * 256, 12 * 64, 20 * 64, 12 * 512, 28 * 256})
      cases.push_back({DType::f64, {1, n}, 1});

    bench::Table table;
    table.header = {"case", "kernel", "GB/s", "copy GB/s (same bytes)", "of copy", "check"};
    for (const Case& c : cases) {
      const std::int64_t row_elems = c.inner[0] * c.inner[1];
      const std::int64_t rows = std::max<std::int64_t>(1, (mib << 20) / (row_elems * static_cast<std::int64_t>(dtype_size(c.dtype))));
      const std::string text = case_text(c, rows);
      if (!only.empty() && std::none_of(only.begin(), only.end(), [&](const std::string& o) {
            return text.find(o) != std::string::npos;
          }))
        continue;
      HadamardDesc desc;
      desc.x = TensorDesc{{rows, c.inner[0], c.inner[1]}, {}, c.dtype};
      desc.group = c.group;
      const HadamardPlan plan = plan_hadamard(desc);
      const std::int64_t elems = rows * row_elems;
      const std::size_t bytes = static_cast<std::size_t>(elems) * dtype_size(c.dtype);
      std::vector<std::uint8_t> host(bytes);
      fill_random(host, c.dtype, elems, static_cast<std::uint64_t>(elems));
      DeviceBuffer x(bytes), y(bytes);
      x.upload(host.data(), bytes);
      y.fill(0xff);
      plan.launch({x.get(), y.get()});
      const int bad = check(plan, host, y);
      const double ms = support::median_ms([&](CUstream s) { plan.launch({x.get(), y.get()}, s); });
      const double copy_ms = support::median_ms([&](CUstream s) {
        jit::check(jit::driver().cuMemcpyDtoDAsync(y.address(), x.address(), bytes, s), "copy");
      });
      const double gbs = 2.0 * static_cast<double>(bytes) / (ms * 1e6), copy_gbs = 2.0 * static_cast<double>(bytes) / (copy_ms * 1e6);
      table.rows.push_back({text, plan.impl().kernel->program().label, fmt::format("{:.0f}", gbs),
                            fmt::format("{:.0f}", copy_gbs), fmt::format("{:.0f}%", 100 * gbs / copy_gbs),
                            bad == 0 ? "ok" : fmt::format("{} of 192 wrong", bad)});
      fmt::print("{}: {:.0f} GB/s, copy {:.0f} GB/s, {:.0f}% {}\n", text, gbs, copy_gbs, 100 * gbs / copy_gbs,
                 bad == 0 ? "ok" : "WRONG");
    }
    const std::string report = fmt::format("device: {}\n\n{}", name, table.markdown());
    fmt::print("\n{}", report);
    if (const std::string dir = bench::output_dir(); !dir.empty()) bench::write_text_file(dir + "/hadamard_bench.md", report);
  } catch (const std::exception& e) {
    fmt::print(stderr, "hadamard_bench: {}\n", e.what());
    return 1;
  }
}
