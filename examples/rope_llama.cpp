// Llama-3-style rotary embedding: Llama 3.1 sin/cos tables, then q (32 heads) and k (8 heads) of a
// [batch, seq, heads, 128] bf16 batch rotated in place in one launch, checked against the CPU,
// and timed.
//
//   rope_llama [batch] [seq]      (default 4 2048)
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "shapejit/rope.hpp"
#include "support/bf16.hpp"
#include "support/device.hpp"

namespace {

using shapejit::support::bf16_to_float;
using shapejit::support::DeviceBuffer;
using shapejit::support::random_bf16;

/// The largest difference between the device's rotation of one token and a float64 NeoX rotation
/// of the same bf16 inputs, relative to what is allowed: one bf16 spacing at the value, plus the
/// f32 arithmetic's rounding of the two terms.
double worst_error_ratio(const std::vector<std::uint16_t>& before, const std::vector<std::uint16_t>& after,
                        std::int64_t token, std::int64_t heads, std::int64_t position, const float* cos_table,
                        const float* sin_table) {
  const std::int64_t D = 128, half = 64;
  double worst = 0;
  for (std::int64_t h = 0; h < heads; ++h) {
    const std::int64_t row = (token * heads + h) * D;
    for (std::int64_t i = 0; i < half; ++i) {
      const double c = cos_table[position * half + i], s = sin_table[position * half + i];
      const double x0 = bf16_to_float(before[static_cast<std::size_t>(row + i)]);
      const double x1 = bf16_to_float(before[static_cast<std::size_t>(row + i + half)]);
      const double want[2] = {x0 * c - x1 * s, x0 * s + x1 * c};
      for (int j = 0; j < 2; ++j) {
        const double got = bf16_to_float(after[static_cast<std::size_t>(row + i + j * half)]);
        const double spacing = std::ldexp(1.0, std::ilogb(std::fmax(std::fabs(want[j]), 1e-30)) - 7);
        const double allowed = spacing + 1e-6 * (std::fabs(x0) + std::fabs(x1));
        worst = std::fmax(worst, std::fabs(got - want[j]) / allowed);
      }
    }
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t batch = argc > 1 ? std::atoll(argv[1]) : 4;
  const std::int64_t seq = argc > 2 ? std::atoll(argv[2]) : 2048;
  const std::int64_t q_heads = 32, k_heads = 8, D = 128, rows = 8192;
  try {
    // Llama 3.1 frequencies (theta 500000, factor 8), f32 tables [8192, 64].
    const shapejit::RopeTables tables =
        shapejit::rope_tables(rows, D, shapejit::DType::f32, shapejit::RopeTableOptions::llama3_defaults());

    shapejit::RopeDesc desc;
    desc.style = shapejit::RopeStyle::neox;
    desc.x = {{batch, seq, q_heads, D}, {}, shapejit::DType::bf16};
    desc.k = shapejit::TensorDesc{{batch, seq, k_heads, D}, {}, shapejit::DType::bf16};
    desc.table = tables.desc();
    desc.positions = shapejit::TensorDesc{{batch, seq}, {}, shapejit::DType::i64};
    desc.inplace = true;
    const shapejit::RopePlan plan = shapejit::plan_rope(desc);
    std::printf("%s", plan.describe().c_str());

    const auto q_host = random_bf16(static_cast<std::size_t>(batch * seq * q_heads * D), 1);
    const auto k_host = random_bf16(static_cast<std::size_t>(batch * seq * k_heads * D), 2);
    std::vector<std::int64_t> positions(static_cast<std::size_t>(batch * seq));
    for (std::int64_t b = 0; b < batch; ++b)  // each sequence continues from a different cached length
      for (std::int64_t s = 0; s < seq; ++s) positions[static_cast<std::size_t>(b * seq + s)] = (b * 997 + s) % rows;

    DeviceBuffer q(q_host.size() * 2), k(k_host.size() * 2), pos(positions.size() * 8);
    DeviceBuffer cos(tables.cos.size()), sin(tables.sin.size());
    q.upload(q_host.data(), q.bytes());
    k.upload(k_host.data(), k.bytes());
    pos.upload(positions.data(), pos.bytes());
    cos.upload(tables.cos.data(), cos.bytes());
    sin.upload(tables.sin.data(), sin.bytes());
    const shapejit::RopePointers pointers{q.get(), q.get(), k.get(), k.get(), cos.get(), sin.get(), pos.get(), 0};

    plan.launch(pointers);
    std::vector<std::uint16_t> q_out(q_host.size()), k_out(k_host.size());
    q.download(q_out.data(), q.bytes());
    k.download(k_out.data(), k.bytes());
    const auto* cos_f = reinterpret_cast<const float*>(tables.cos.data());
    const auto* sin_f = reinterpret_cast<const float*>(tables.sin.data());
    double worst = 0;
    for (std::int64_t t = 0; t < batch * seq; t += 1 + (batch * seq) / 512) {
      const std::int64_t p = positions[static_cast<std::size_t>(t)];
      worst = std::fmax(worst, worst_error_ratio(q_host, q_out, t, q_heads, p, cos_f, sin_f));
      worst = std::fmax(worst, worst_error_ratio(k_host, k_out, t, k_heads, p, cos_f, sin_f));
    }
    std::printf("check: worst error %.2f of the allowed (1 bf16 ulp + f32 rounding) over sampled tokens: %s\n", worst,
                worst <= 1.0 ? "ok" : "FAILED");

    // Bytes moved per call: q and k read and written, positions, and each token's sin/cos rows.
    const double bytes = 2.0 * static_cast<double>(q.bytes() + k.bytes()) + static_cast<double>(pos.bytes()) +
                         static_cast<double>(batch * seq) * 64 * 2 * 4;
    const double ms = shapejit::support::median_ms([&](CUstream stream) { plan.launch(pointers, stream); });
    const double copy = shapejit::support::copy_bandwidth_gbs(std::size_t{512} << 20);
    std::printf("rope: %.1f us per call, %.0f GB/s (%.0f%% of a %.0f GB/s device copy)\n", ms * 1e3,
                bytes / (ms * 1e6), 100 * bytes / (ms * 1e6) / copy, copy);
    return worst <= 1.0 ? 0 : 1;
  } catch (const shapejit::Error& e) {
    std::fprintf(stderr, "rope_llama: %s\n", e.what());
    return 1;
  }
}
