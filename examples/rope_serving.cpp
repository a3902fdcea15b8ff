// Rope for serving, in two steps, each checked against the CPU:
//  1. Qwen2-VL multimodal RoPE (M-RoPE) over a prompt of text, an 8 x 12 patch image and text
//     again: positions [3, seq] (time, height, width), the 64 rotary pairs of a head split into
//     sections 16, 24, 24 that take their angle from one axis each; q (28 heads) and k (4 heads)
//     rotated in place in one launch.
//  2. A Llama-3 decode step for 64 sequences of different lengths: q (32 heads) rotated in place,
//     k (8 heads) rotated and appended with v to a paged bf16 KV cache ([blocks, 16, 8, 128], the
//     layout vLLM uses) at each sequence's next slot, in the same launch; then timed.
//
//   rope_serving
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <vector>

#include "shapejit/rope.hpp"
#include "support/bf16.hpp"
#include "support/device.hpp"

namespace {

using shapejit::support::bf16_to_float;
using shapejit::support::DeviceBuffer;
using shapejit::support::random_bf16;

constexpr std::int64_t D = 128, kHalf = 64;

/// The largest difference between a device NeoX rotation of one head row and the float64 one,
/// relative to what is allowed (one bf16 spacing plus the f32 rounding of the two terms); pair i
/// takes its angle from table row position(i).
double worst_error(const std::uint16_t* before, const std::uint16_t* after, const shapejit::RopeTables& tables,
                   const std::function<std::int64_t(std::int64_t)>& position) {
  const auto* cos_table = reinterpret_cast<const float*>(tables.cos.data());
  const auto* sin_table = reinterpret_cast<const float*>(tables.sin.data());
  double worst = 0;
  for (std::int64_t i = 0; i < kHalf; ++i) {
    const std::int64_t at = position(i) * tables.width + i;
    const double c = cos_table[at], s = sin_table[at];
    const double x0 = bf16_to_float(before[i]), x1 = bf16_to_float(before[i + kHalf]);
    const double want[2] = {x0 * c - x1 * s, x0 * s + x1 * c};
    for (int j = 0; j < 2; ++j) {
      const double got = bf16_to_float(after[i + j * kHalf]);
      const double spacing = std::ldexp(1.0, std::ilogb(std::fmax(std::fabs(want[j]), 1e-30)) - 7);
      worst = std::fmax(worst, std::fabs(got - want[j]) / (spacing + 1e-6 * (std::fabs(x0) + std::fabs(x1))));
    }
  }
  return worst;
}

/// Qwen2-VL's position ids of text (t = h = w = index), an image of rows x cols patches (t fixed,
/// h and w its grid, all from the next index on), then text again from one past the largest id.
std::vector<std::int64_t> qwen2_vl_positions(std::int64_t text, std::int64_t rows, std::int64_t cols, std::int64_t tail) {
  const std::int64_t seq = text + rows * cols + tail;
  std::vector<std::int64_t> p(static_cast<std::size_t>(3 * seq));
  auto set = [&](std::int64_t s, std::int64_t t, std::int64_t h, std::int64_t w) {
    p[static_cast<std::size_t>(s)] = t, p[static_cast<std::size_t>(seq + s)] = h, p[static_cast<std::size_t>(2 * seq + s)] = w;
  };
  for (std::int64_t s = 0; s < text; ++s) set(s, s, s, s);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) set(text + r * cols + c, text, text + r, text + c);
  const std::int64_t next = text + std::max(rows, cols);
  for (std::int64_t s = 0; s < tail; ++s) set(text + rows * cols + s, next + s, next + s, next + s);
  return p;
}

/// Step 1: M-RoPE over a multimodal prompt. Returns the worst error ratio.
double mrope_prefill() {
  const std::int64_t seq = 20 + 8 * 12 + 30, q_heads = 28, k_heads = 4;
  const std::vector<std::int64_t> sections = {16, 24, 24};
  shapejit::RopeTableOptions qwen;
  qwen.theta = 1e6;  // Qwen2-VL's rope_theta
  const shapejit::RopeTables tables = shapejit::rope_tables(4096, D, shapejit::DType::f32, qwen);
  shapejit::RopeDesc desc;
  desc.x = {{seq, q_heads, D}, {}, shapejit::DType::bf16};
  desc.k = shapejit::TensorDesc{{seq, k_heads, D}, {}, shapejit::DType::bf16};
  desc.table = tables.desc();
  desc.positions = shapejit::TensorDesc{{3, seq}, {}, shapejit::DType::i64};
  desc.axis_rule = shapejit::RopeAxisRule::sections;
  desc.axis_sections = sections;
  desc.inplace = true;
  const shapejit::RopePlan plan = shapejit::plan_rope(desc);
  std::printf("%s", plan.describe().c_str());

  const auto q_host = random_bf16(static_cast<std::size_t>(seq * q_heads * D), 1);
  const auto k_host = random_bf16(static_cast<std::size_t>(seq * k_heads * D), 2);
  const std::vector<std::int64_t> positions = qwen2_vl_positions(20, 8, 12, 30);
  DeviceBuffer q(q_host.size() * 2), k(k_host.size() * 2), pos(positions.size() * 8);
  DeviceBuffer cos(tables.cos.size()), sin(tables.sin.size());
  q.upload(q_host.data(), q.bytes());
  k.upload(k_host.data(), k.bytes());
  pos.upload(positions.data(), pos.bytes());
  cos.upload(tables.cos.data(), cos.bytes());
  sin.upload(tables.sin.data(), sin.bytes());
  plan.launch({q.get(), q.get(), k.get(), k.get(), cos.get(), sin.get(), pos.get(), 0});

  std::vector<std::uint16_t> q_out(q_host.size()), k_out(k_host.size());
  q.download(q_out.data(), q.bytes());
  k.download(k_out.data(), k.bytes());
  double worst = 0;
  for (std::int64_t s = 0; s < seq; ++s) {
    auto position = [&](std::int64_t pair) {  // the axis whose section holds the pair
      const std::int64_t axis = pair < sections[0] ? 0 : pair < sections[0] + sections[1] ? 1 : 2;
      return positions[static_cast<std::size_t>(axis * seq + s)];
    };
    for (std::int64_t h = 0; h < q_heads; ++h) {
      const auto at = static_cast<std::size_t>((s * q_heads + h) * D);
      worst = std::fmax(worst, worst_error(&q_host[at], &q_out[at], tables, position));
    }
    for (std::int64_t h = 0; h < k_heads; ++h) {
      const auto at = static_cast<std::size_t>((s * k_heads + h) * D);
      worst = std::fmax(worst, worst_error(&k_host[at], &k_out[at], tables, position));
    }
  }
  std::printf("M-RoPE check: worst error %.2f of the allowed over %lld tokens: %s\n\n", worst,
              static_cast<long long>(seq), worst <= 1.0 ? "ok" : "FAILED");
  return worst;
}

/// Step 2: one decode step with the KV-cache append. Returns the worst error ratio (v must be exact).
double decode_with_cache() {
  const std::int64_t batch = 64, q_heads = 32, k_heads = 8, block = 16, blocks_per_seq = 64, blocks = batch * blocks_per_seq;
  const shapejit::RopeTables tables =
      shapejit::rope_tables(block * blocks_per_seq, D, shapejit::DType::f32, shapejit::RopeTableOptions::llama3_defaults());
  shapejit::RopeDesc desc;
  desc.x = {{batch, q_heads, D}, {}, shapejit::DType::bf16};  // one token per sequence: [tokens, heads, dhead]
  desc.k = shapejit::TensorDesc{{batch, k_heads, D}, {}, shapejit::DType::bf16};
  desc.table = tables.desc();
  desc.positions = shapejit::TensorDesc{{batch}, {}, shapejit::DType::i64};
  desc.inplace = true;  // q and k rotated in place; k also goes to the cache
  desc.cache_layout = shapejit::KvCacheLayout::nhd;
  desc.v = desc.k;
  desc.k_cache = desc.v_cache = shapejit::TensorDesc{{blocks, block, k_heads, D}, {}, shapejit::DType::bf16};
  desc.slots = shapejit::TensorDesc{{batch}, {}, shapejit::DType::i32};
  const shapejit::RopePlan plan = shapejit::plan_rope(desc);
  std::printf("%s", plan.describe().c_str());

  // Sequence b owns blocks b, b + 64, b + 128, ... (a block table), and has cached lengths[b] tokens.
  std::vector<std::int64_t> lengths(static_cast<std::size_t>(batch));
  std::vector<std::int32_t> slots(static_cast<std::size_t>(batch));
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t length = (b * 389 + 17) % (block * blocks_per_seq);
    lengths[static_cast<std::size_t>(b)] = length;
    slots[static_cast<std::size_t>(b)] = static_cast<std::int32_t>((length / block * batch + b) * block + length % block);
  }
  const auto q_host = random_bf16(static_cast<std::size_t>(batch * q_heads * D), 3);
  const auto k_host = random_bf16(static_cast<std::size_t>(batch * k_heads * D), 4);
  const auto v_host = random_bf16(static_cast<std::size_t>(batch * k_heads * D), 5);
  const std::size_t cache_bytes = static_cast<std::size_t>(blocks * block * k_heads * D) * 2;
  DeviceBuffer q(q_host.size() * 2), k(k_host.size() * 2), v(v_host.size() * 2), pos(lengths.size() * 8);
  DeviceBuffer slot(slots.size() * 4), cos(tables.cos.size()), sin(tables.sin.size());
  DeviceBuffer k_cache(cache_bytes), v_cache(cache_bytes);
  q.upload(q_host.data(), q.bytes());
  k.upload(k_host.data(), k.bytes());
  v.upload(v_host.data(), v.bytes());
  pos.upload(lengths.data(), pos.bytes());
  slot.upload(slots.data(), slot.bytes());
  cos.upload(tables.cos.data(), cos.bytes());
  sin.upload(tables.sin.data(), sin.bytes());
  shapejit::RopePointers pointers{q.get(), q.get(), k.get(), k.get(), cos.get(), sin.get(), pos.get(), 0};
  pointers.v = v.get();
  pointers.k_cache = k_cache.get();
  pointers.v_cache = v_cache.get();
  pointers.slots = slot.get();
  plan.launch(pointers);

  std::vector<std::uint16_t> q_out(q_host.size()), k_row(static_cast<std::size_t>(D)), v_row(k_row.size());
  q.download(q_out.data(), q.bytes());
  double worst = 0;
  std::int64_t v_mismatches = 0;
  for (std::int64_t b = 0; b < batch; ++b) {
    auto position = [&](std::int64_t) { return lengths[static_cast<std::size_t>(b)]; };
    for (std::int64_t h = 0; h < q_heads; ++h) {
      const auto at = static_cast<std::size_t>((b * q_heads + h) * D);
      worst = std::fmax(worst, worst_error(&q_host[at], &q_out[at], tables, position));
    }
    for (std::int64_t h = 0; h < k_heads; ++h) {  // the slot's rows of the caches
      const std::size_t row = static_cast<std::size_t>((slots[static_cast<std::size_t>(b)] * k_heads + h) * D);
      k_cache.download(k_row.data(), k_row.size() * 2, row * 2);
      v_cache.download(v_row.data(), v_row.size() * 2, row * 2);
      const auto at = static_cast<std::size_t>((b * k_heads + h) * D);
      worst = std::fmax(worst, worst_error(&k_host[at], k_row.data(), tables, position));
      v_mismatches += !std::equal(v_row.begin(), v_row.end(), v_host.begin() + static_cast<std::ptrdiff_t>(at));
    }
  }
  std::printf("decode + KV-cache append check: worst error %.2f of the allowed, %lld v rows differ: %s\n", worst,
              static_cast<long long>(v_mismatches), worst <= 1.0 && v_mismatches == 0 ? "ok" : "FAILED");
  const double ms = shapejit::support::median_ms([&](CUstream stream) { plan.launch(pointers, stream); });
  std::printf("decode step (rope of q and k, k and v appended): %.2f us per call\n", ms * 1e3);
  return v_mismatches == 0 ? worst : 2.0;
}

}  // namespace

int main() {
  try {
    const double prefill = mrope_prefill();
    const double decode = decode_with_cache();
    return prefill <= 1.0 && decode <= 1.0 ? 0 : 1;
  } catch (const shapejit::Error& e) {
    std::fprintf(stderr, "rope_serving: %s\n", e.what());
    return 1;
  }
}
