// KV-cache compression, QuaRot style: rope, then a grouped-head Hadamard transform, then int8, in one
// launch. Llama-3 q (32 heads) and k (8 heads) of a [batch, seq, heads, 128] bf16 batch: each
// token's heads are taken 8 at a time (n = 1024 values), rotated by the Llama 3.1 tables, multiplied
// by H_1024 / 32 (which spreads outliers over the group), and written as int8 codes with one f32
// scale per token and head group. Code * scale gives the transformed value back within one step;
// checked against a float64 CPU computation of the same steps, and timed.
//
//   kv_rotate [batch] [seq]      (default 4 2048)
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

constexpr std::int64_t kQHeads = 32, kKHeads = 8, kDim = 128, kGroup = 8, kRows = 8192;
constexpr std::int64_t kN = kGroup * kDim;

/// One head group of one token on the CPU, in double: NeoX rotation of each head at `position`,
/// then the orthonormal Walsh-Hadamard transform of the group's n values (Sylvester order).
std::vector<double> reference_group(const std::uint16_t* group, std::int64_t position, const float* cos_table,
                                    const float* sin_table) {
  std::vector<double> v(kN);
  for (std::int64_t i = 0; i < kN; ++i) v[static_cast<std::size_t>(i)] = bf16_to_float(group[i]);
  for (std::int64_t h = 0; h < kGroup; ++h)
    for (std::int64_t i = 0; i < kDim / 2; ++i) {
      double& x0 = v[static_cast<std::size_t>(h * kDim + i)];
      double& x1 = v[static_cast<std::size_t>(h * kDim + i + kDim / 2)];
      const double c = cos_table[position * kDim / 2 + i], s = sin_table[position * kDim / 2 + i];
      const double a = x0, b = x1;
      x0 = a * c - b * s;
      x1 = a * s + b * c;
    }
  for (std::int64_t h = 1; h < kN; h *= 2)
    for (std::int64_t i = 0; i < kN; ++i)
      if ((i & h) == 0) {
        const double a = v[static_cast<std::size_t>(i)], b = v[static_cast<std::size_t>(i + h)];
        v[static_cast<std::size_t>(i)] = a + b;
        v[static_cast<std::size_t>(i + h)] = a - b;
      }
  for (double& x : v) x /= std::sqrt(static_cast<double>(kN));
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t batch = argc > 1 ? std::atoll(argv[1]) : 4;
  const std::int64_t seq = argc > 2 ? std::atoll(argv[2]) : 2048;
  const std::int64_t tokens = batch * seq;
  try {
    const shapejit::RopeTables tables =
        shapejit::rope_tables(kRows, kDim, shapejit::DType::f32, shapejit::RopeTableOptions::llama3_defaults());

    shapejit::RopeDesc desc;
    desc.style = shapejit::RopeStyle::neox;
    desc.x = {{batch, seq, kQHeads, kDim}, {}, shapejit::DType::bf16};
    desc.k = shapejit::TensorDesc{{batch, seq, kKHeads, kDim}, {}, shapejit::DType::bf16};
    desc.table = tables.desc();
    desc.positions = shapejit::TensorDesc{{batch, seq}, {}, shapejit::DType::i64};
    desc.hadamard_group = kGroup;  // scale 1/sqrt(1024), rope first (the default order)
    desc.q_quantize = shapejit::RopeQuantize::int8;
    desc.k_quantize = shapejit::RopeQuantize::int8;
    const shapejit::RopePlan plan = shapejit::plan_rope(desc);
    std::printf("%s", plan.describe().c_str());

    const auto q_host = random_bf16(static_cast<std::size_t>(tokens * kQHeads * kDim), 1);
    const auto k_host = random_bf16(static_cast<std::size_t>(tokens * kKHeads * kDim), 2);
    std::vector<std::int64_t> positions(static_cast<std::size_t>(tokens));
    for (std::int64_t t = 0; t < tokens; ++t) positions[static_cast<std::size_t>(t)] = (t / seq * 997 + t % seq) % kRows;

    DeviceBuffer q(q_host.size() * 2), k(k_host.size() * 2), pos(positions.size() * 8);
    DeviceBuffer cos(tables.cos.size()), sin(tables.sin.size());
    DeviceBuffer q_codes(q_host.size()), k_codes(k_host.size());
    DeviceBuffer q_scales(static_cast<std::size_t>(tokens * kQHeads / kGroup) * 4), k_scales(static_cast<std::size_t>(tokens) * 4);
    q.upload(q_host.data(), q.bytes());
    k.upload(k_host.data(), k.bytes());
    pos.upload(positions.data(), pos.bytes());
    cos.upload(tables.cos.data(), cos.bytes());
    sin.upload(tables.sin.data(), sin.bytes());
    shapejit::RopePointers pointers{q.get(), q_codes.get(), k.get(), k_codes.get(), cos.get(), sin.get(), pos.get(), 0};
    pointers.q_scale = q_scales.get();
    pointers.k_scale = k_scales.get();

    plan.launch(pointers);
    std::vector<std::int8_t> q_got(q_host.size()), k_got(k_host.size());
    std::vector<float> q_scale(static_cast<std::size_t>(tokens * kQHeads / kGroup)), k_scale(static_cast<std::size_t>(tokens));
    q_codes.download(q_got.data(), q_codes.bytes());
    k_codes.download(k_got.data(), k_codes.bytes());
    q_scales.download(q_scale.data(), q_scales.bytes());
    k_scales.download(k_scale.data(), k_scales.bytes());

    // Sampled tokens: every code of each head group within one int8 step of the float64 value.
    const auto* cos_f = reinterpret_cast<const float*>(tables.cos.data());
    const auto* sin_f = reinterpret_cast<const float*>(tables.sin.data());
    double worst = 0;
    auto check_group = [&](const std::vector<std::uint16_t>& in, const std::vector<std::int8_t>& codes, float scale,
                           std::int64_t first, std::int64_t position) {
      const std::vector<double> want = reference_group(&in[static_cast<std::size_t>(first)], position, cos_f, sin_f);
      for (std::int64_t i = 0; i < kN; ++i) {
        const double got = codes[static_cast<std::size_t>(first + i)] * static_cast<double>(scale);
        worst = std::fmax(worst, std::fabs(got - want[static_cast<std::size_t>(i)]) / (scale + 1e-5));
      }
    };
    for (std::int64_t t = 0; t < tokens; t += 1 + tokens / 64) {
      const std::int64_t p = positions[static_cast<std::size_t>(t)];
      for (std::int64_t g = 0; g < kQHeads / kGroup; ++g)
        check_group(q_host, q_got, q_scale[static_cast<std::size_t>(t * kQHeads / kGroup + g)], (t * kQHeads + g * kGroup) * kDim, p);
      check_group(k_host, k_got, k_scale[static_cast<std::size_t>(t)], t * kKHeads * kDim, p);
    }
    const bool ok = worst <= 1.0;
    std::printf("check: worst error %.2f of one int8 step over sampled tokens' q and k codes: %s\n", worst,
                ok ? "ok" : "FAILED");

    // Bytes per call: q and k read, their codes and scales written, positions, tables.
    const double bytes = static_cast<double>(q.bytes() + k.bytes() + q_codes.bytes() + k_codes.bytes() +
                                             q_scales.bytes() + k_scales.bytes() + pos.bytes()) +
                         static_cast<double>(tokens) * 64 * 2 * 4;
    const double ms = shapejit::support::median_ms([&](CUstream stream) { plan.launch(pointers, stream); });
    const double copy = shapejit::support::copy_bandwidth_gbs(std::size_t{512} << 20);
    std::printf("rope + hadamard + int8 q and k: %.1f us per call, %.0f GB/s (%.0f%% of a %.0f GB/s device copy)\n",
                ms * 1e3, bytes / (ms * 1e6), 100 * bytes / (ms * 1e6) / copy, copy);
    return ok ? 0 : 1;
  } catch (const shapejit::Error& e) {
    std::fprintf(stderr, "kv_rotate: %s\n", e.what());
    return 1;
  }
}
