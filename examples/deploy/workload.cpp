// The workload of the deployment walk-through (examples/deploy/run.sh): one attention input step
// of a Llama-3-8B-like layer. Rotates q and k (bf16, f32 tables, i64 positions) with rope, then
// relayouts q from [B,S,H,D] to [B,H,S,D] for the attention kernel, checks both against the CPU,
// and prints the JIT counters (a deployed run shows compiles=0).
//
//   deploy_workload [--plan-only] [--head-dim D]
//     --plan-only  plan without launching (no GPU needed; enough for SHAPEJIT_RECORD)
//     --head-dim   another head size (default 128), to see what a kernel missing from a
//                  deployment does offline
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "jit/nvrtc.hpp"
#include "shapejit/rearrange.hpp"
#include "shapejit/rope.hpp"
#include "support/device.hpp"

using namespace shapejit;

namespace {

constexpr std::int64_t kBatch = 2, kSeq = 64, kHeads = 32, kKvHeads = 8;

float bf16_to_float(std::uint16_t h) {
  const std::uint32_t bits = std::uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

std::uint16_t float_to_bf16(float f) {  // round to nearest even (inputs here are finite)
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<std::uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

std::vector<std::uint16_t> random_bf16(std::int64_t n, std::uint64_t seed) {
  const std::vector<std::uint8_t> noise = support::random_bytes(static_cast<std::size_t>(n), seed);
  std::vector<std::uint16_t> out(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = float_to_bf16(static_cast<float>(noise[i]) / 64.0f - 2.0f);
  return out;
}

/// NeoX rotation of one [B,S,H,D] bf16 tensor on the CPU, in double.
std::vector<double> reference_rope(const std::vector<std::uint16_t>& x, std::int64_t heads, std::int64_t dhead,
                                   const RopeTables& t, const std::vector<std::int64_t>& positions) {
  std::vector<double> out(x.size());
  const std::int64_t half = dhead / 2;
  for (std::int64_t token = 0; token < kBatch * kSeq; ++token)
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::int64_t row = (token * heads + h) * dhead, p = positions[static_cast<std::size_t>(token)];
      for (std::int64_t i = 0; i < half; ++i) {
        float c, s;
        std::memcpy(&c, t.cos.data() + 4 * (p * t.width + i), 4);
        std::memcpy(&s, t.sin.data() + 4 * (p * t.width + i), 4);
        const double x0 = bf16_to_float(x[row + i]), x1 = bf16_to_float(x[row + i + half]);
        out[row + i] = x0 * c - x1 * s;
        out[row + i + half] = x0 * s + x1 * c;
      }
    }
  return out;
}

double relative_error(const std::vector<std::uint16_t>& got, const std::vector<double>& want) {
  double err = 0, ref = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = bf16_to_float(got[i]) - want[i];
    err += d * d;
    ref += want[i] * want[i];
  }
  return std::sqrt(err / ref);
}

}  // namespace

int main(int argc, char** argv) {
  bool plan_only = false;
  std::int64_t dhead = 128;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--plan-only") == 0) plan_only = true;
    else if (std::strcmp(argv[i], "--head-dim") == 0 && i + 1 < argc) dhead = std::stoll(argv[++i]);
    else {
      std::fprintf(stderr, "usage: deploy_workload [--plan-only] [--head-dim D]\n");
      return 2;
    }
  }
  try {
    // Plans: creating them is what record mode writes down.
    const RopeTables tables = rope_tables(kSeq, dhead, DType::f32, RopeTableOptions::llama3_defaults());
    RopeDesc rope_desc;
    rope_desc.style = RopeStyle::neox;
    rope_desc.x = TensorDesc{{kBatch, kSeq, kHeads, dhead}, {}, DType::bf16};
    rope_desc.k = TensorDesc{{kBatch, kSeq, kKvHeads, dhead}, {}, DType::bf16};
    rope_desc.table = tables.desc();
    rope_desc.positions = TensorDesc{{kBatch, kSeq}, {}, DType::i64};
    const RopePlan rope_plan = plan_rope(rope_desc);
    const TensorDesc q_bshd{{kBatch, kSeq, kHeads, dhead}, {}, DType::bf16};
    const TensorDesc q_view = permuted(q_bshd, {0, 2, 1, 3});
    const RearrangePlan to_bhsd = plan_rearrange(TensorDesc{q_view.shape, {}, DType::bf16}, q_view);
    std::printf("planned:\n  %s\n  %s\n", rope_plan.manifest_line().c_str(), to_bhsd.manifest_line().c_str());
    if (plan_only) return 0;

    const std::vector<std::uint16_t> q = random_bf16(q_bshd.numel(), 1), k = random_bf16(rope_desc.k->numel(), 2);
    std::vector<std::int64_t> positions(kBatch * kSeq);
    for (std::size_t i = 0; i < positions.size(); ++i) positions[i] = static_cast<std::int64_t>((i * 37) % kSeq);
    support::DeviceBuffer dq(q.size() * 2), dk(k.size() * 2), dq_rot(q.size() * 2), dk_rot(k.size() * 2),
        dq_bhsd(q.size() * 2), dcos(tables.cos.size()), dsin(tables.sin.size()), dpos(positions.size() * 8);
    dq.upload(q.data(), dq.bytes());
    dk.upload(k.data(), dk.bytes());
    dcos.upload(tables.cos.data(), dcos.bytes());
    dsin.upload(tables.sin.data(), dsin.bytes());
    dpos.upload(positions.data(), dpos.bytes());
    dq_bhsd.fill(0xff);

    rope_plan.launch({dq.get(), dq_rot.get(), dk.get(), dk_rot.get(), dcos.get(), dsin.get(), dpos.get(), 0});
    to_bhsd.launch(dq_bhsd.get(), dq_rot.get());

    std::vector<std::uint16_t> q_rot(q.size()), k_rot(k.size()), q_bhsd(q.size());
    dq_rot.download(q_rot.data(), dq_rot.bytes());
    dk_rot.download(k_rot.data(), dk_rot.bytes());
    dq_bhsd.download(q_bhsd.data(), dq_bhsd.bytes());
    const double q_error = relative_error(q_rot, reference_rope(q, kHeads, dhead, tables, positions));
    const double k_error = relative_error(k_rot, reference_rope(k, kKvHeads, dhead, tables, positions));
    bool relayout_ok = true;
    for (std::int64_t b = 0; b < kBatch; ++b)
      for (std::int64_t s = 0; s < kSeq; ++s)
        for (std::int64_t h = 0; h < kHeads; ++h)
          relayout_ok = relayout_ok && std::memcmp(&q_bhsd[((b * kHeads + h) * kSeq + s) * dhead],
                                                   &q_rot[((b * kSeq + s) * kHeads + h) * dhead], dhead * 2) == 0;
    const Counters c = counters();
    std::printf("rope: q error %.2e, k error %.2e; relayout %s\n", q_error, k_error, relayout_ok ? "exact" : "WRONG");
    std::printf("jit: compiles=%llu disk_hits=%llu nvrtc %s\n", static_cast<unsigned long long>(c.compiles),
                static_cast<unsigned long long>(c.disk_hits), jit::nvrtc_loaded() ? "loaded" : "never loaded");
    return q_error < 1e-2 && k_error < 1e-2 && relayout_ok ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "deploy_workload: %s\n", e.what());
    return 1;
  }
}
