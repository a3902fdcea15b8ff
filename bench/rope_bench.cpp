// Rope benchmark: each line of bench/cases/rope-bench.txt planned once, timed with CUDA events
// around back-to-back launches queued behind a long copy (median of 21 such runs, after warm-up,
// rotating over input sets several times the L2 so that no call reads its inputs from cache), and
// compared, in the same process, with a device-to-device copy of the same bytes timed the same way
// and with a 512 MiB copy.
// Bandwidth counts bytes read plus written: q and k in and out, positions, and each token's cos
// and sin rows. Decode lines (seq 1) also report GPU and host time per call with the plan cached.
// Lines with --hadamard-group G (and --hadamard-order) time rope fused with the transform, and the
// same work as separate launches: rope, then hadamard in place on q's and k's outputs. With
// --k-quantize int8|fp8-e4m3, k is written as 8-bit codes and scales (bytes counted as written).
// Lines with --kv-cache nhd|hnd (and --cache-dtype) append k and v to paged caches of 16-row
// blocks (k goes to the cache only): prefill tokens fill blocks in a shuffled block order, decode
// tokens each land in a block of their own. Bytes: q read and written, k and v read, k and v
// written to the cache, slots. The same work apart: rope (q and k out of place), then k's output
// and v copied into the cache by rearrange plans, in block order (the best case of a separate
// cache write: a copy).
//
//   rope_bench [--cases bench/cases/rope-bench.txt]
// Writes the markdown table to $OUT/rope_bench.md when OUT is set.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "bench/bench_util.hpp"
#include "ops/rope/impl.hpp"
#include "ops/rope/reference.hpp"
#include "shapejit/hadamard.hpp"
#include "shapejit/rearrange.hpp"
#include "shapejit/rope.hpp"
#include "support/device.hpp"

namespace {

using namespace shapejit;
using support::DeviceBuffer;

constexpr std::size_t kRotationBytes = std::size_t{256} << 20;  // inputs+outputs cycled per timing
constexpr int kMaxSets = 8;
constexpr std::size_t kCopyBytes = std::size_t{512} << 20;
constexpr std::size_t kBlockerBytes = std::size_t{2} << 30;  // ~1 ms of copying

/// A device buffer filled with random values of `dtype` in [-2, 2): a random block tiled over it.
std::unique_ptr<DeviceBuffer> random_device(DType dtype, std::int64_t elements, std::uint64_t seed) {
  auto buffer = std::make_unique<DeviceBuffer>(static_cast<std::size_t>(elements) * dtype_size(dtype));
  const std::int64_t block = std::min<std::int64_t>(elements, std::int64_t{1} << 22);
  std::vector<std::uint8_t> host(static_cast<std::size_t>(block) * dtype_size(dtype));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-2, 2);
  for (std::int64_t i = 0; i < block; ++i) detail::store_from_double(host.data(), dtype, i, dist(rng));
  for (std::int64_t at = 0; at < elements; at += block) {
    const std::int64_t n = std::min(block, elements - at);
    buffer->upload(host.data(), static_cast<std::size_t>(n) * dtype_size(dtype), static_cast<std::size_t>(at) * dtype_size(dtype));
  }
  return buffer;
}

/// The q and k inputs and outputs of one timed call.
struct IoSet {
  std::unique_ptr<DeviceBuffer> x, y, k, k_out, k_scale, v, slots;
};

constexpr std::int64_t kCacheBlock = 16;  // rows per cache block

/// A cache append line's caches: each set of inputs writes its own range of `set_blocks` blocks.
struct CacheSpace {
  KvCacheLayout layout = KvCacheLayout::none;
  DType dtype = DType::bf16;
  std::int64_t heads = 0, dhead = 0, set_blocks = 0, rows_per_block = 0;  ///< rows a set fills per block
  std::unique_ptr<DeviceBuffer> k, v, scales;

  std::vector<std::int64_t> shape(int sets) const {
    const std::int64_t blocks = set_blocks * sets;
    return layout == KvCacheLayout::nhd ? std::vector<std::int64_t>{blocks, kCacheBlock, heads, dhead}
                                        : std::vector<std::int64_t>{blocks, heads, kCacheBlock, dhead};
  }
  /// The cache's (block, row, head) element strides.
  std::array<std::int64_t, 3> strides() const {
    return layout == KvCacheLayout::nhd ? std::array<std::int64_t, 3>{kCacheBlock * heads * dhead, heads * dhead, dhead}
                                        : std::array<std::int64_t, 3>{heads * kCacheBlock * dhead, dhead, kCacheBlock * dhead};
  }
  /// Set `set`'s blocks in order, as [blocks, rows, heads, dhead]: where a separate cache write copies to.
  TensorDesc set_view() const {
    const auto st = strides();
    return {{set_blocks, rows_per_block, heads, dhead}, {st[0], st[1], st[2], 1}, dtype};
  }
  std::size_t set_offset_bytes(int set) const {
    return static_cast<std::size_t>(set * set_blocks * kCacheBlock * heads * dhead) * dtype_size(dtype);
  }
};

struct LineResult {
  double gbs = 0;
  double copy_gbs = 0;    ///< a copy moving the same bytes (read + write), timed the same way
  double ratio = 0;       ///< gbs / copy_gbs
  double peak_ratio = 0;  ///< gbs over a 512 MiB copy's bandwidth
  double gpu_us = 0, host_us = 0, one_shot_host_us = 0;
  double worst_error = 0;  ///< sampled tokens, relative to the allowed error (<= 1 passes)
  double separate_us = 0;  ///< fused lines: rope, then hadamard in place on q's and k's outputs; cache
                           ///< append lines: rope, then k's output and v copied into the cache
};

/// GPU time per call in microseconds: the median over `repeats` of `calls` back-to-back launches
/// between two events. A long copy is queued first, so every launch is queued before the GPU reaches
/// the start event: the time is the GPU's per call (gaps between kernels included), not the host's
/// launch rate.
double queued_us_per_call(const std::function<void(CUstream)>& launch, int calls, int repeats) {
  const jit::Driver& d = jit::driver();
  static DeviceBuffer blocker_from(kBlockerBytes), blocker_to(kBlockerBytes);
  CUevent start = nullptr, stop = nullptr;
  jit::check(d.cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate");
  jit::check(d.cuEventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate");
  std::vector<double> per_call;
  for (int r = 0; r < repeats; ++r) {
    jit::check(d.cuMemcpyDtoDAsync(blocker_to.address(), blocker_from.address(), kBlockerBytes, nullptr), "blocker copy");
    jit::check(d.cuEventRecord(start, nullptr), "cuEventRecord");
    for (int i = 0; i < calls; ++i) launch(nullptr);
    jit::check(d.cuEventRecord(stop, nullptr), "cuEventRecord");
    jit::check(d.cuEventSynchronize(stop), "cuEventSynchronize (a kernel failed?)");
    float ms = 0;
    jit::check(d.cuEventElapsedTime(&ms, start, stop), "cuEventElapsedTime");
    per_call.push_back(1e3 * ms / calls);
  }
  d.cuEventDestroy(start);
  d.cuEventDestroy(stop);
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

/// Device-to-device copy bandwidth (read + write) of `bytes`-byte copies timed like the rope calls:
/// queued back-to-back, rotating over buffer pairs several times the L2.
double queued_copy_gbs(std::size_t bytes) {
  const int pairs = static_cast<int>(std::clamp<std::size_t>(kRotationBytes / (2 * bytes) + 1, 1, kMaxSets));
  std::vector<std::unique_ptr<DeviceBuffer>> from, to;
  for (int i = 0; i < pairs; ++i) {
    from.push_back(std::make_unique<DeviceBuffer>(bytes));
    from.back()->fill(0x5a);
    to.push_back(std::make_unique<DeviceBuffer>(bytes));
  }
  int next = 0;
  auto copy = [&](CUstream stream) {
    const auto i = static_cast<std::size_t>(next++ % pairs);
    jit::check(jit::driver().cuMemcpyDtoDAsync(to[i]->address(), from[i]->address(), bytes, stream), "copy");
  };
  for (int i = 0; i < 20; ++i) copy(nullptr);
  const int calls = std::clamp(static_cast<int>(4e9 / (2.0 * static_cast<double>(bytes))), 4, 100);
  return 2.0 * static_cast<double>(bytes) / (queued_us_per_call(copy, calls, 21) * 1e3);
}

/// `desc` without its cache append.
RopeDesc without_cache(RopeDesc desc) {
  desc.cache_layout = KvCacheLayout::none;
  desc.v = desc.k_cache = desc.v_cache = desc.slots = std::nullopt;
  desc.cache_quantize = RopeQuantize::none;
  return desc;
}

/// Sampled tokens of input set 0 against the float64 reference: each one's cache rows hold its k
/// rotated and its v, within one step of the cache's dtype or codes. Returns the worst error in
/// steps (<= 1 passes).
double cache_error(const RopeDesc& desc, const CacheSpace& cache, const std::vector<std::int64_t>& slots,
                   const IoSet& set, const RopeTables& tables, const std::vector<std::int64_t>& positions) {
  const std::int64_t tokens = static_cast<std::int64_t>(slots.size()), heads = cache.heads, D = cache.dhead;
  const DType dtype = desc.x.dtype;
  RopeDesc one = without_cache(desc);  // one token of k as q, read from a host copy laid out [1, 1, heads, D]
  one.x.shape = {1, 1, heads, D};
  one.k.reset();
  one.positions = TensorDesc{{1, 1}, {}, DType::i64};
  const plan::RopePlanData one_plan = plan::plan_rope_data(one);
  const std::size_t row = static_cast<std::size_t>(heads * D);
  std::vector<std::uint8_t> k_host(row * dtype_size(dtype)), v_host(k_host.size());
  std::vector<std::uint8_t> k_cache(cache.k->bytes()), v_cache(cache.v->bytes());
  cache.k->download(k_cache.data(), k_cache.size());
  cache.v->download(v_cache.data(), v_cache.size());
  const auto st = cache.strides();
  const double scale = 0.01;
  double worst = 0;
  std::vector<double> ref;
  for (std::int64_t t = 0; t < tokens; t += std::max<std::int64_t>(1, tokens / 16)) {
    set.k->download(k_host.data(), k_host.size(), static_cast<std::size_t>(t) * k_host.size());
    set.v->download(v_host.data(), v_host.size(), static_cast<std::size_t>(t) * v_host.size());
    std::int64_t p = positions[static_cast<std::size_t>(t)];
    detail::rope_reference_token(one_plan, {k_host.data(), nullptr, nullptr, nullptr, tables.cos.data(), tables.sin.data(), &p, 0}, 0, 0, ref);
    const std::int64_t slot = slots[static_cast<std::size_t>(t)];
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t i = 0; i < D; ++i) {
        const std::int64_t at = slot / kCacheBlock * st[0] + slot % kCacheBlock * st[1] + h * st[2] + i;
        const double want_k = ref[static_cast<std::size_t>(h * D + i)];
        const double want_v = detail::load_as_double(v_host.data(), dtype, h * D + i);
        for (auto [want, bytes] : {std::pair{want_k, &k_cache}, {want_v, &v_cache}}) {
          const bool codes = desc.cache_quantize != RopeQuantize::none;
          const double got = codes ? detail::rope_code_value(desc.cache_quantize, (*bytes)[static_cast<std::size_t>(at)], scale)
                                   : detail::load_as_double(bytes->data(), cache.dtype, at);
          const double step = codes ? detail::rope_code_step(desc.cache_quantize, want, scale)
                                    : std::ldexp(1.0, std::ilogb(std::fmax(std::fabs(want), 1e-30)) -
                                                          (cache.dtype == DType::f32 ? 23 : cache.dtype == DType::f16 ? 10 : 7)) +
                                          1e-6 * 4;
          worst = std::max(worst, std::fabs(got - want) / step);
        }
      }
  }
  return worst;
}

LineResult run_line(const bench::CaseLine& line, double peak_copy_gbs) {
  const RopeStyle style = line.get("algo") == "gptj" ? RopeStyle::gptj : RopeStyle::neox;
  const DType dtype = *parse_dtype(line.get("dtype"));
  const std::vector<std::int64_t> shape = bench::parse_int_list(line.get("shape"), "--shape");
  const std::int64_t batch = shape[0], seq = shape[1], heads = shape[2], D = shape[3];
  const std::int64_t k_heads = std::stoll(line.get_or("k-heads", "0"));
  const std::int64_t R = std::stoll(line.get_or("rotary-dim", std::to_string(D)));
  const std::int64_t group = std::stoll(line.get_or("hadamard-group", "0"));
  const std::int64_t rows = std::max<std::int64_t>(seq, 8192), tokens = batch * seq;

  RopeDesc desc;
  desc.style = style;
  desc.x = {shape, {}, dtype};
  if (k_heads > 0) desc.k = TensorDesc{{batch, seq, k_heads, D}, {}, dtype};
  desc.rotary_dim = R;
  desc.table = {{rows, R / 2}, {}, DType::f32};
  desc.positions = TensorDesc{{batch, seq}, {}, DType::i64};
  // Multi-axis positions: --axis-rule sections|interleaved|blocks --axis-sections S0,S1,...
  const std::string axis_rule = line.get_or("axis-rule", "none");
  if (axis_rule != "none") {
    desc.axis_rule = axis_rule == "sections" ? RopeAxisRule::sections
                     : axis_rule == "blocks" ? RopeAxisRule::blocks
                                             : RopeAxisRule::interleaved;
    desc.axis_sections = bench::parse_int_list(line.get("axis-sections"), "--axis-sections");
    desc.positions = TensorDesc{{static_cast<std::int64_t>(desc.axis_sections.size()), batch, seq}, {}, DType::i64};
  }
  const std::int64_t axes = std::max<std::int64_t>(1, static_cast<std::int64_t>(desc.axis_sections.size()));
  desc.hadamard_group = group;
  if (line.get_or("hadamard-order", "") == "hadamard-then-rope") desc.hadamard_order = HadamardOrder::hadamard_then_rope;
  const std::string k_quantize = line.get_or("k-quantize", "none");
  if (k_quantize != "none")
    desc.k_quantize = k_quantize == "int8" ? RopeQuantize::int8 : RopeQuantize::fp8_e4m3;
  const std::size_t k_out_bytes = k_quantize != "none" ? 1 : dtype_size(dtype);
  CacheSpace cache;
  const std::string kv_cache = line.get_or("kv-cache", "none");
  if (kv_cache != "none") {
    cache.layout = kv_cache == "nhd" ? KvCacheLayout::nhd : KvCacheLayout::hnd;
    const std::string cache_dtype = line.get_or("cache-dtype", std::string(dtype_name(dtype)));
    desc.cache_quantize = cache_dtype == "fp8-e4m3" ? RopeQuantize::fp8_e4m3 : cache_dtype == "int8" ? RopeQuantize::int8
                                                                                                      : RopeQuantize::none;
    cache.dtype = desc.cache_quantize != RopeQuantize::none ? plan::rope_code_dtype(desc.cache_quantize)
                                                            : *parse_dtype(cache_dtype);
    cache.heads = k_heads;
    cache.dhead = D;
    cache.rows_per_block = seq == 1 ? 1 : kCacheBlock;  // decode: each token in a block of its own
    cache.set_blocks = (tokens + cache.rows_per_block - 1) / cache.rows_per_block;
    desc.cache_layout = cache.layout;
    desc.v = desc.k;
    desc.slots = TensorDesc{{tokens}, {}, DType::i64};
  }
  const std::size_t cache_bytes = cache.layout == KvCacheLayout::none ? 0 : dtype_size(cache.dtype);

  const RopeTables tables = rope_tables(rows, R, DType::f32);
  DeviceBuffer cos(tables.cos.size()), sin(tables.sin.size()), pos(static_cast<std::size_t>(axes * tokens) * 8);
  cos.upload(tables.cos.data(), cos.bytes());
  sin.upload(tables.sin.data(), sin.bytes());
  std::vector<std::int64_t> positions(static_cast<std::size_t>(axes * tokens));
  std::mt19937_64 rng(17);
  for (auto& p : positions) p = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(rows));
  pos.upload(positions.data(), pos.bytes());

  const std::int64_t q_elements = tokens * heads * D, k_elements = tokens * k_heads * D;
  // q and k read, q written, k's output (or its 8-bit codes and one f32 scale per token and group) written.
  const std::size_t scale_bytes = k_out_bytes == 1 ? static_cast<std::size_t>(tokens * k_heads / group) * 4 : 0;
  // Cache append: v read, k and v written to the cache (k_out is not written), an i64 slot per token.
  const std::size_t io_bytes =
      cache_bytes == 0 ? static_cast<std::size_t>(q_elements * 2 + k_elements) * dtype_size(dtype) +
                             static_cast<std::size_t>(k_elements) * k_out_bytes + scale_bytes
                       : static_cast<std::size_t>(q_elements * 2 + k_elements * 2) * dtype_size(dtype) +
                             static_cast<std::size_t>(k_elements * 2) * cache_bytes + static_cast<std::size_t>(tokens) * 8;
  // Per token: its i64 position on each axis and R/2 f32 entries of each table.
  const double bytes = static_cast<double>(io_bytes) +
                       static_cast<double>(tokens) * (8 * static_cast<double>(axes) + 4 * static_cast<double>(R));
  const int sets = static_cast<int>(std::clamp<std::size_t>(kRotationBytes / io_bytes + 1, 1, kMaxSets));
  if (cache_bytes > 0) {
    desc.k_cache = desc.v_cache = TensorDesc{cache.shape(sets), {}, cache.dtype};
    const std::size_t bytes_each = static_cast<std::size_t>(sets * cache.set_blocks * kCacheBlock * k_heads * D) * cache_bytes;
    cache.k = std::make_unique<DeviceBuffer>(bytes_each);
    cache.v = std::make_unique<DeviceBuffer>(bytes_each);
    cache.k->fill(0xff);
    cache.v->fill(0xff);
    const float scales[2] = {0.01f, 0.01f};  // 8-bit caches: |k|, |v| <= 2.9 stay inside e4m3's range
    cache.scales = std::make_unique<DeviceBuffer>(sizeof scales);
    cache.scales->upload(scales, sizeof scales);
  }
  const RopePlan plan = plan_rope(desc);
  std::vector<IoSet> io(static_cast<std::size_t>(sets));
  std::vector<std::vector<std::int64_t>> set_slots(static_cast<std::size_t>(sets));
  std::vector<RopePointers> pointers;
  for (int i = 0; i < sets; ++i) {
    IoSet& s = io[static_cast<std::size_t>(i)];
    s.x = random_device(dtype, q_elements, 100 + static_cast<std::uint64_t>(i));
    s.y = std::make_unique<DeviceBuffer>(s.x->bytes());
    s.y->fill(0xff);
    if (k_heads > 0) {
      s.k = random_device(dtype, k_elements, 200 + static_cast<std::uint64_t>(i));
      s.k_out = std::make_unique<DeviceBuffer>(static_cast<std::size_t>(k_elements) * k_out_bytes);
      s.k_out->fill(0xff);
    }
    if (scale_bytes > 0) s.k_scale = std::make_unique<DeviceBuffer>(scale_bytes);
    pointers.push_back({s.x->get(), s.y->get(), s.k ? s.k->get() : nullptr, s.k_out ? s.k_out->get() : nullptr,
                        cos.get(), sin.get(), pos.get(), 0, nullptr, s.k_scale ? s.k_scale->get() : nullptr});
    if (cache_bytes == 0) continue;
    // The set's blocks in shuffled order; prefill tokens fill them row by row, decode tokens take a
    // random row of their own block.
    std::vector<std::int64_t> blocks(static_cast<std::size_t>(cache.set_blocks));
    for (std::int64_t b = 0; b < cache.set_blocks; ++b) blocks[static_cast<std::size_t>(b)] = i * cache.set_blocks + b;
    std::shuffle(blocks.begin(), blocks.end(), rng);
    std::vector<std::int64_t>& slots = set_slots[static_cast<std::size_t>(i)];
    for (std::int64_t t = 0; t < tokens; ++t) {
      const std::int64_t block = blocks[static_cast<std::size_t>(t / cache.rows_per_block)];
      const std::int64_t row = cache.rows_per_block == 1 ? static_cast<std::int64_t>(rng() % kCacheBlock) : t % kCacheBlock;
      slots.push_back(block * kCacheBlock + row);
    }
    s.slots = std::make_unique<DeviceBuffer>(slots.size() * 8);
    s.slots->upload(slots.data(), s.slots->bytes());
    s.v = random_device(dtype, k_elements, 300 + static_cast<std::uint64_t>(i));
    RopePointers& p = pointers.back();
    p.k_out = nullptr;
    p.v = s.v->get();
    p.k_cache = cache.k->get();
    p.v_cache = cache.v->get();
    p.slots = s.slots->get();
    if (desc.cache_quantize != RopeQuantize::none) {
      p.k_cache_scale = static_cast<const float*>(cache.scales->get());
      p.v_cache_scale = p.k_cache_scale + 1;
    }
  }

  LineResult r;
  // Correctness of what is timed: sampled tokens of set 0 against the float64 reference.
  plan.launch(pointers[0]);
  {
    const std::int64_t row = heads * D;
    std::vector<std::uint8_t> x_host(static_cast<std::size_t>(row) * dtype_size(dtype)), y_host(x_host.size());
    std::vector<double> ref;
    RopeDesc one = without_cache(desc);  // one token of q, read from a host copy laid out [1, 1, heads, D]
    one.x.shape = {1, 1, heads, D};
    one.k.reset();
    one.k_quantize = RopeQuantize::none;
    one.positions = TensorDesc{desc.axis_sections.empty() ? std::vector<std::int64_t>{1, 1}
                                                          : std::vector<std::int64_t>{axes, 1, 1},
                               {}, DType::i64};
    const plan::RopePlanData one_plan = plan::plan_rope_data(one);
    for (std::int64_t t = 0; t < tokens; t += std::max<std::int64_t>(1, tokens / 16)) {
      const std::size_t at = static_cast<std::size_t>(t * row) * dtype_size(dtype);
      io[0].x->download(x_host.data(), x_host.size(), at);
      io[0].y->download(y_host.data(), y_host.size(), at);
      std::vector<std::int64_t> p(static_cast<std::size_t>(axes));  // the token's position on each axis
      for (std::int64_t a = 0; a < axes; ++a) p[static_cast<std::size_t>(a)] = positions[static_cast<std::size_t>(a * tokens + t)];
      detail::rope_reference_token(
          one_plan, {x_host.data(), nullptr, nullptr, nullptr, tables.cos.data(), tables.sin.data(), p.data(), 0}, 0, 0, ref);
      for (std::int64_t i = 0; i < row; ++i) {
        const double got = detail::load_as_double(y_host.data(), dtype, i), want = ref[static_cast<std::size_t>(i)];
        const double spacing = std::ldexp(1.0, std::ilogb(std::fmax(std::fabs(want), 1e-30)) -
                                                   (dtype == DType::f32 ? 23 : dtype == DType::f16 ? 10 : 7));
        r.worst_error = std::max(r.worst_error, std::fabs(got - want) / (spacing + 1e-6 * 4));
      }
    }
  }

  if (cache_bytes > 0) r.worst_error = std::max(r.worst_error, cache_error(desc, cache, set_slots[0], io[0], tables, positions));

  int next = 0;
  auto launch = [&](CUstream stream) { plan.launch(pointers[static_cast<std::size_t>(next++ % sets)], stream); };
  for (int i = 0; i < 20; ++i) launch(nullptr);  // warm-up
  // Enough calls to time well, few enough to be queued while the blocker copy runs.
  const int calls = std::clamp(static_cast<int>(4e9 / bytes), 4, 100);
  r.gpu_us = queued_us_per_call(launch, calls, 21);
  r.gbs = bytes / (r.gpu_us * 1e3);
  r.copy_gbs = queued_copy_gbs(static_cast<std::size_t>(bytes / 2));
  r.ratio = r.gbs / r.copy_gbs;
  r.peak_ratio = r.gbs / peak_copy_gbs;
  if (group > 0 && k_out_bytes != 1) {
    // The same work as separate launches in the same order: rope out of place, then hadamard in
    // place on q's and k's outputs; or hadamard out of place, then rope in place.
    const bool transform_first = desc.hadamard_order == HadamardOrder::hadamard_then_rope;
    RopeDesc plain = desc;
    plain.hadamard_group = 0;
    plain.hadamard_scale = std::nullopt;
    plain.hadamard_order = HadamardOrder::rope_then_hadamard;
    if (transform_first) {
      if (plain.y) plain.x = *plain.y;  // the outputs' layout (the bench's are contiguous, like x)
      if (plain.k && plain.k_out) plain.k = *plain.k_out;
      plain.y.reset();
      plain.k_out.reset();
      plain.inplace = true;
    }
    const RopePlan rope_plan = plan_rope(plain);
    auto transform = [&](std::int64_t h) {
      HadamardDesc d;
      d.x = {{batch, seq, h, D}, {}, dtype};
      d.group = group;
      d.inplace = !transform_first;
      return plan_hadamard(d);
    };
    const HadamardPlan q_plan = transform(heads);
    const std::optional<HadamardPlan> k_plan = k_heads > 0 ? std::optional(transform(k_heads)) : std::nullopt;
    auto separate = [&](CUstream stream) {
      const RopePointers& p = pointers[static_cast<std::size_t>(next++ % sets)];
      if (transform_first) {
        q_plan.launch({p.x, p.y}, stream);
        if (k_plan) k_plan->launch({p.k, p.k_out}, stream);
        RopePointers in_place = p;
        in_place.x = p.y;
        in_place.k = p.k_out;
        rope_plan.launch(in_place, stream);
        return;
      }
      rope_plan.launch(p, stream);
      q_plan.launch({p.y, p.y}, stream);
      if (k_plan) k_plan->launch({p.k_out, p.k_out}, stream);
    };
    for (int i = 0; i < 5; ++i) separate(nullptr);
    r.separate_us = queued_us_per_call(separate, calls, 21);
  }
  if (cache_bytes > 0 && cache.dtype == dtype) {
    // The same work apart: rope out of place, then k's output and v copied into the set's blocks.
    const RopePlan rope_plan = plan_rope(without_cache(desc));
    const RearrangePlan copy = plan_rearrange(cache.set_view(), {{cache.set_blocks, cache.rows_per_block, k_heads, D}, {}, dtype});
    auto separate = [&](CUstream stream) {
      const int i = next++ % sets;
      const IoSet& set = io[static_cast<std::size_t>(i)];
      RopePointers p = pointers[static_cast<std::size_t>(i)];
      p.k_out = set.k_out->get();
      p.k_cache = p.v_cache = nullptr;
      p.v = p.slots = nullptr;
      rope_plan.launch(p, stream);
      copy.launch(static_cast<char*>(cache.k->get()) + cache.set_offset_bytes(i), set.k_out->get(), stream);
      copy.launch(static_cast<char*>(cache.v->get()) + cache.set_offset_bytes(i), set.v->get(), stream);
    };
    for (int i = 0; i < 5; ++i) separate(nullptr);
    r.separate_us = queued_us_per_call(separate, calls, 21);
  }
  const RopePointers& p0 = pointers[0];
  r.host_us = bench::host_median_us([&] { plan.launch(p0); }, 201, 20);
  r.one_shot_host_us = bench::host_median_us([&] { rope(desc, p0); }, 201, 20);
  jit::check(jit::driver().cuCtxSynchronize(), "cuCtxSynchronize after the host timing");
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rope benchmark"};
  std::string cases = "bench/cases/rope-bench.txt";
  app.add_option("--cases", cases, "case file")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    const auto lines = bench::read_case_file(cases);
    jit::ensure_context();
    const std::string name = support::device_name();
    const double copy = support::copy_bandwidth_gbs(kCopyBytes);
    fmt::print("device: {}\ncopy: {:.0f} GB/s (512 MiB device-to-device, read + write)\n", name, copy);

    bench::Table table;
    table.header = {"case", "GB/s", "copy GB/s (same bytes)", "of copy", "of 512 MiB copy", "GPU us/call",
                    "host us/call (plan)", "host us/call (one-shot)", "apart (rope + hadamard, or rope + cache copies), GPU us", "check"};
    for (const auto& line : lines) {
      const LineResult r = run_line(line, copy);
      const bool decode = bench::parse_int_list(line.get("shape"), "--shape")[1] == 1;
      table.rows.push_back({line.text.substr(5), fmt::format("{:.0f}", r.gbs), fmt::format("{:.0f}", r.copy_gbs),
                            fmt::format("{:.0f}%", 100 * r.ratio), fmt::format("{:.0f}%", 100 * r.peak_ratio),
                            fmt::format("{:.2f}", r.gpu_us), decode ? fmt::format("{:.2f}", r.host_us) : "",
                            decode ? fmt::format("{:.2f}", r.one_shot_host_us) : "",
                            r.separate_us > 0 ? fmt::format("{:.2f} ({:.2f}x)", r.separate_us, r.separate_us / r.gpu_us) : "",
                            r.worst_error <= 1 ? "ok" : fmt::format("FAILED ({:.1f})", r.worst_error)});
      fmt::print("{}: {:.0f} GB/s ({:.0f}% of a same-bytes copy, {:.0f}% of the 512 MiB copy), {:.2f} us\n", line.text,
                 r.gbs, 100 * r.ratio, 100 * r.peak_ratio, r.gpu_us);
    }
    fmt::print("{}", table.text());
    if (const std::string out = bench::output_dir(); !out.empty())
      bench::write_text_file(out + "/rope_bench.md",
                             fmt::format("device: {}; copy {:.0f} GB/s\n\n{}", name, copy, table.markdown()));
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "rope_bench: {}\n", e.what());
    return 1;
  }
}
