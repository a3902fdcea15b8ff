// A fresh process for the deployment tests (caches, offline mode and NVRTC are per process).
//
//   deploy_child offline-miss
//       Asks for a kernel that no cache holds. Prints "offline_miss nvrtc_loaded=0|1" and the
//       message; exit 0 on that error with NVRTC never loaded. Needs no GPU.
//   deploy_child run MANIFEST [--lines N] [--twice] [--fsize-limit BYTES]
//       Plans and launches every line of MANIFEST (rearrange, and rope with its multi-axis and
//       KV-cache append options) through the public API on random data, each line's contiguous
//       descriptor as precompile plans it (a cache append gets blocks for every token), and
//       checks each result against a CPU reference (rope: the library's float64 reference; the
//       caches' rows of skipped tokens stay untouched; a line fused with a Hadamard transform is
//       reported as failed, not checked here); --lines N: the first N lines
//       only; --twice: every line a second time (memory hits); --fsize-limit: an RLIMIT_FSIZE
//       first. Prints the JIT counters, whether NVRTC was loaded, and the time from plan to
//       launch of the first call of each operation. Exit 0: all correct; 3: an offline miss
//       (its message printed); 1: anything else.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/convert.hpp"
#include "jit/kernel_cache.hpp"
#include "jit/nvrtc.hpp"
#include "ops/registry.hpp"
#include "ops/rope/manifest.hpp"
#include "ops/rope/reference.hpp"
#include "shapejit/rearrange.hpp"
#include "shapejit/rope.hpp"
#include "support/device.hpp"

namespace {

using namespace shapejit;
using support::DeviceBuffer;

int offline_miss() {
  const jit::Program program{"probe", "extern \"C\" __global__ void sj_kernel() {} // deploy_child", {},
                             "rearrange --dtype f32 --shape 8 --perm 0"};
  try {
    jit::obtain_kernel(program, "sm_90");
    std::printf("no error: the kernel was found or compiled\n");
    return 1;
  } catch (const Error& e) {
    const bool expected = e.code() == ErrorCode::offline_miss;
    std::printf("%s nvrtc_loaded=%d\n%s\n", expected ? "offline_miss" : "unexpected error", jit::nvrtc_loaded() ? 1 : 0,
                e.what());
    return expected && !jit::nvrtc_loaded() ? 0 : 1;
  }
}

// ---- host data

/// Random finite values of magnitude 1/32 to 8 with 8 significant bits (exact in every float
/// dtype), as `n` elements of dtype `t`.
std::vector<std::uint8_t> random_floats(std::int64_t n, DType t, std::uint64_t seed) {
  const std::vector<std::uint8_t> noise = support::random_bytes(static_cast<std::size_t>(n) * 2, seed);
  std::vector<std::uint8_t> out(static_cast<std::size_t>(n) * dtype_size(t));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint8_t m = noise[static_cast<std::size_t>(2 * i)], e = noise[static_cast<std::size_t>(2 * i + 1)];
    const double value = std::ldexp(1.0 + (m & 127) / 128.0, (e % 8) - 5) * ((e & 128) ? -1 : 1);
    detail::store_from_double(out.data(), t, i, value);
  }
  return out;
}

/// `values` as elements of integer dtype `t` (their low bytes: little-endian).
std::vector<std::uint8_t> integer_bytes(const std::vector<std::int64_t>& values, DType t) {
  std::vector<std::uint8_t> out(values.size() * dtype_size(t));
  for (std::size_t i = 0; i < values.size(); ++i) std::memcpy(out.data() + i * dtype_size(t), &values[i], dtype_size(t));
  return out;
}

/// Random integers in [0, bound) as `n` elements of integer dtype `t`.
std::vector<std::uint8_t> random_indices(std::int64_t n, DType t, std::int64_t bound, std::uint64_t seed) {
  const std::vector<std::uint8_t> noise = support::random_bytes(static_cast<std::size_t>(n) * 4, seed);
  std::vector<std::int64_t> values(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::uint32_t v;
    std::memcpy(&v, noise.data() + 4 * i, 4);
    values[i] = v % static_cast<std::uint32_t>(bound);
  }
  return integer_bytes(values, t);
}

/// Host bytes and their device copy.
struct Tensor {
  std::vector<std::uint8_t> host;
  std::unique_ptr<DeviceBuffer> device;

  explicit Tensor(std::vector<std::uint8_t> bytes) : host(std::move(bytes)), device(std::make_unique<DeviceBuffer>(host.size())) {
    if (!host.empty()) device->upload(host.data(), host.size());
  }
  /// `bytes` bytes of `byte` (poison: 0xff is NaN in every float dtype).
  static Tensor filled(std::size_t bytes, std::uint8_t byte) { return Tensor(std::vector<std::uint8_t>(bytes, byte)); }
  void* get() const { return device->get(); }
  std::vector<std::uint8_t> download() const {
    std::vector<std::uint8_t> out(host.size());
    device->download(out.data(), out.size());
    return out;
  }
};

// ---- rope: the contiguous descriptor a line stands for (what precompile planned), given a cache
// of enough blocks for every token, checked against the library's float64 reference

/// Relative tolerance of one value rounded to dtype t: an ulp for 16-bit dtypes, a few for f32 and
/// f64 (their arithmetic's error).
double relative_tolerance(DType t) {
  return t == DType::bf16 ? 0x1p-7 : t == DType::f16 ? 0x1p-10 : t == DType::f32 ? 0x1p-22 : 0x1p-50;
}

constexpr std::int64_t kCacheBlock = 16;
constexpr float kCacheScale = 0.1f;  // 8-bit caches: values up to about 12 stay inside int8's and e4m3's ranges

/// A cache append's caches and slots: blocks for every token plus two spare ones, and distinct
/// slots drawn at random, every 7th token's skipped (slot -1).
std::vector<std::int64_t> give_cache(RopeDesc& d, std::int64_t tokens, std::uint64_t seed) {
  const std::int64_t blocks = tokens / kCacheBlock + 2, heads = d.k->shape[d.k->shape.size() - 2];
  const std::int64_t dhead = d.x.shape.back();
  d.k_cache->shape = d.cache_layout == KvCacheLayout::nhd ? std::vector<std::int64_t>{blocks, kCacheBlock, heads, dhead}
                                                          : std::vector<std::int64_t>{blocks, heads, kCacheBlock, dhead};
  d.v_cache = d.k_cache;
  std::vector<std::int64_t> free_slots(static_cast<std::size_t>(blocks * kCacheBlock));
  for (std::size_t i = 0; i < free_slots.size(); ++i) free_slots[i] = static_cast<std::int64_t>(i);
  std::mt19937_64 rng(seed);
  std::shuffle(free_slots.begin(), free_slots.end(), rng);
  std::vector<std::int64_t> slots(free_slots.begin(), free_slots.begin() + tokens);
  for (std::size_t t = 0; t < slots.size(); t += 7) slots[t] = -1;
  return slots;
}

/// Element offset of (slot, head, i) in a contiguous cache of the descriptor's layout.
std::int64_t cache_offset(const RopeDesc& d, std::int64_t slot, std::int64_t head, std::int64_t i) {
  const std::int64_t block = slot / kCacheBlock, row = slot % kCacheBlock;
  const std::int64_t heads = d.k->shape[d.k->shape.size() - 2], dhead = d.x.shape.back();
  return d.cache_layout == KvCacheLayout::nhd ? ((block * kCacheBlock + row) * heads + head) * dhead + i
                                              : ((block * heads + head) * kCacheBlock + row) * dhead + i;
}

/// Whether `got` (an element rounded to dtype t, or a cache code) stands for `want`, computed from
/// data of dtype `data` (f32 arithmetic, f64 for f64 data).
bool close(double got, double want, DType t, DType data, RopeQuantize code = RopeQuantize::none) {
  if (code != RopeQuantize::none) return std::fabs(got - want) <= detail::rope_code_step(code, want, kCacheScale);
  const double absolute = data == DType::f64 ? 1e-12 : 1e-5;
  return std::fabs(got - want) <= absolute + relative_tolerance(t) * std::fabs(want);  // NaN fails too
}

/// Runs one rope line; returns "" or what was wrong. `plan_to_launch_ms` gets the host time from
/// planning to the launch call's return.
std::string run_rope(const ops::ManifestArgs& args, std::uint64_t seed, double& plan_to_launch_ms) {
  const plan::RopeManifest m = ops::rope_manifest(args);
  RopeDesc d = plan::manifest_desc(m);
  if (d.hadamard_group != 0) return "deploy_child does not check rope fused with a Hadamard transform";
  plan::plan_rope_data(d);  // the line's own errors first (its cache of one block plans too)
  const std::size_t rank = d.x.shape.size();
  const std::int64_t seq = d.x.shape[rank - 3], tokens = d.x.numel() / (d.x.shape[rank - 2] * d.x.shape[rank - 1]);
  const bool cache = d.cache_layout != KvCacheLayout::none;
  const std::vector<std::int64_t> slot_values = cache ? give_cache(d, tokens, seed) : std::vector<std::int64_t>{};
  const plan::RopePlanData data = plan::plan_rope_data(d);
  const DType t = d.x.dtype;
  const std::int64_t rotary = d.rotary_dim == 0 ? d.x.shape.back() : d.rotary_dim;
  const RopeTables tables = rope_tables(d.table.shape[0], rotary, d.table.dtype);

  Tensor x(random_floats(d.x.numel(), t, seed)), cos(tables.cos), sin(tables.sin);
  Tensor k(random_floats(d.k ? d.k->numel() : 0, t, seed + 1)), v(random_floats(d.v ? d.v->numel() : 0, t, seed + 2));
  Tensor positions(d.positions ? random_indices(d.positions->numel(), d.positions->dtype, tables.rows, seed + 3)
                               : std::vector<std::uint8_t>{});
  Tensor slots(cache ? integer_bytes(slot_values, d.slots->dtype) : std::vector<std::uint8_t>{});
  const std::size_t cache_bytes = cache ? static_cast<std::size_t>(d.k_cache->numel()) * dtype_size(d.k_cache->dtype) : 0;
  Tensor k_cache = Tensor::filled(cache_bytes, 0xff), v_cache = Tensor::filled(cache_bytes, 0xff);
  const float scales[2] = {kCacheScale, kCacheScale};
  Tensor cache_scales(std::vector<std::uint8_t>(reinterpret_cast<const std::uint8_t*>(scales),
                                                reinterpret_cast<const std::uint8_t*>(scales) + sizeof scales));
  // k's rotation is written to k_out unless a cache append out of place takes it alone.
  const bool k_written = d.k && (d.inplace || !cache || d.k_out);
  Tensor y = Tensor::filled(d.inplace ? 0 : x.host.size(), 0xff);
  Tensor k_out = Tensor::filled(d.inplace || !k_written ? 0 : k.host.size(), 0xff);

  RopePointers ptr;
  ptr.x = x.get();
  ptr.y = d.inplace ? x.get() : y.get();
  ptr.k = d.k ? k.get() : nullptr;
  ptr.k_out = !k_written ? nullptr : d.inplace ? k.get() : k_out.get();
  ptr.cos = cos.get();
  ptr.sin = sin.get();
  ptr.positions = d.positions ? positions.get() : nullptr;
  if (cache) {
    ptr.v = v.get();
    ptr.k_cache = k_cache.get();
    ptr.v_cache = v_cache.get();
    ptr.slots = slots.get();
    if (d.cache_quantize != RopeQuantize::none) {
      ptr.k_cache_scale = static_cast<const float*>(cache_scales.get());
      ptr.v_cache_scale = ptr.k_cache_scale + 1;
    }
  }
  const auto start = std::chrono::steady_clock::now();
  const RopePlan plan = plan_rope(d);
  plan.launch(ptr);
  plan_to_launch_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  const std::vector<std::uint8_t> q_got = (d.inplace ? x : y).download();
  const std::vector<std::uint8_t> k_got = !k_written ? std::vector<std::uint8_t>{} : (d.inplace ? k : k_out).download();
  const std::vector<std::uint8_t> k_cache_got = k_cache.download(), v_cache_got = v_cache.download();
  RopePointers host;
  host.x = x.host.data();
  host.k = k.host.data();
  host.v = v.host.data();
  host.cos = cos.host.data();
  host.sin = sin.host.data();
  host.positions = positions.host.data();
  const std::int64_t D = d.x.shape.back(), hq = data.heads_q, hk = data.heads_k;
  const DType cache_t = cache ? d.k_cache->dtype : t;
  const double cache_scale = d.cache_quantize == RopeQuantize::none ? 1.0 : kCacheScale;
  auto cache_value = [&](const std::vector<std::uint8_t>& bytes, std::int64_t at) {
    return d.cache_quantize == RopeQuantize::none ? detail::load_as_double(bytes.data(), cache_t, at)
                                                  : detail::rope_code_value(d.cache_quantize, bytes[static_cast<std::size_t>(at)], cache_scale);
  };
  std::vector<char> cache_row_written(cache ? static_cast<std::size_t>(d.k_cache->numel() / D) : 0, 0);
  std::vector<double> ref;
  for (std::int64_t token = 0; token < tokens; ++token) {
    const std::int64_t b = token / seq, s = token % seq;
    detail::rope_reference_token(data, host, b, s, ref);
    auto mismatch = [&](const char* what, std::int64_t h, std::int64_t i, double got, double want) {
      return fmt::format("{} of token {} head {} element {} is {}, expected {}", what, token, h, i, got, want);
    };
    for (std::int64_t h = 0; h < hq + (k_written ? hk : 0); ++h) {
      const bool is_q = h < hq;
      const std::int64_t at = (token * (is_q ? hq : hk) + (is_q ? h : h - hq)) * D;
      for (std::int64_t i = 0; i < D; ++i) {
        const double got = detail::load_as_double((is_q ? q_got : k_got).data(), t, at + i), want = ref[static_cast<std::size_t>(h * D + i)];
        if (!close(got, want, t, t)) return mismatch(is_q ? "q" : "k", is_q ? h : h - hq, i, got, want);
      }
    }
    const std::int64_t slot = cache ? slot_values[static_cast<std::size_t>(token)] : -1;
    if (slot < 0) continue;
    for (std::int64_t h = 0; h < hk; ++h) {
      cache_row_written[static_cast<std::size_t>(cache_offset(d, slot, h, 0) / D)] = 1;
      for (std::int64_t i = 0; i < D; ++i) {
        const std::int64_t at = cache_offset(d, slot, h, i);
        const double k_want = ref[static_cast<std::size_t>((hq + h) * D + i)], v_want = ref[static_cast<std::size_t>((hq + hk + h) * D + i)];
        const double k_got_value = cache_value(k_cache_got, at), v_got_value = cache_value(v_cache_got, at);
        if (!close(k_got_value, k_want, cache_t, t, d.cache_quantize))
          return mismatch("k cache row", h, i, k_got_value, k_want);
        if (!close(v_got_value, v_want, cache_t, t, d.cache_quantize)) return mismatch("v cache row", h, i, v_got_value, v_want);
      }
    }
  }
  // Rows of no appended token keep their poison.
  const std::size_t row_bytes = static_cast<std::size_t>(D) * (cache ? dtype_size(cache_t) : 0);
  for (std::size_t r = 0; r < cache_row_written.size(); ++r)
    for (const std::vector<std::uint8_t>* got : {&k_cache_got, &v_cache_got})
      if (!cache_row_written[r] && std::any_of(got->begin() + r * row_bytes, got->begin() + (r + 1) * row_bytes,
                                               [](std::uint8_t byte) { return byte != 0xff; }))
        return fmt::format("cache row {} was written, but no token's slot is there", r);
  return "";
}

// ---- rearrange

/// Lowest and one-past-highest element offsets a strided view reaches.
std::pair<std::int64_t, std::int64_t> element_range(const TensorDesc& view) {
  std::int64_t low = 0, high = 1;
  const std::vector<std::int64_t> strides = view.effective_strides();
  for (std::size_t i = 0; i < view.shape.size(); ++i) (strides[i] < 0 ? low : high) += (view.shape[i] - 1) * strides[i];
  return {low, high};
}

std::string run_rearrange(const ops::ManifestArgs& args, std::uint64_t seed, double& plan_to_launch_ms) {
  const int elem_bytes = args.small_integer("elem-bytes", 0);
  const DType dtype = elem_bytes > 0 ? DType::u8 : parse_dtype(args.text("dtype")).value();
  const std::vector<std::int64_t> shape = args.integers("shape");
  std::vector<int> perm;
  for (std::int64_t p : args.integers("perm")) perm.push_back(static_cast<int>(p));
  if (perm.empty())
    for (std::size_t i = 0; i < shape.size(); ++i) perm.push_back(static_cast<int>(i));
  const TensorDesc src{shape, args.integers("src-strides"), dtype, elem_bytes};
  const TensorDesc view = permuted(src, perm);
  const TensorDesc dst{view.shape, args.integers("dst-strides"), dtype, elem_bytes};
  RearrangeOptions options;
  options.exact = args.has("exact");
  options.assumed_alignment = static_cast<std::size_t>(args.integer("align", 16));
  const auto elem = static_cast<std::int64_t>(src.element_size());
  const auto [src_low, src_high] = element_range(view);
  const auto [dst_low, dst_high] = element_range(dst);
  const std::vector<std::uint8_t> host_src = support::random_bytes(static_cast<std::size_t>((src_high - src_low) * elem), seed);
  DeviceBuffer dsrc(host_src.size()), ddst(static_cast<std::size_t>((dst_high - dst_low) * elem));
  dsrc.upload(host_src.data(), host_src.size());
  ddst.fill(0xab);
  std::vector<std::uint8_t> expected(ddst.bytes(), 0xab);
  // Reference: every logical element, in row-major order of the shared shape.
  const std::vector<std::int64_t> ss = view.effective_strides(), ds = dst.effective_strides();
  std::vector<std::int64_t> index(view.shape.size(), 0);
  for (std::int64_t n = 0; n < view.numel(); ++n) {
    std::int64_t so = -src_low, dof = -dst_low;
    for (std::size_t d = 0; d < index.size(); ++d) {
      so += index[d] * ss[d];
      dof += index[d] * ds[d];
    }
    std::memcpy(expected.data() + dof * elem, host_src.data() + so * elem, static_cast<std::size_t>(elem));
    for (std::size_t d = index.size(); d-- > 0 && ++index[d] == view.shape[d];) index[d] = 0;
  }
  const auto start = std::chrono::steady_clock::now();
  const RearrangePlan plan = plan_rearrange(dst, view, options);
  plan.launch(static_cast<std::uint8_t*>(ddst.get()) - dst_low * elem,
              static_cast<const std::uint8_t*>(dsrc.get()) - src_low * elem);
  plan_to_launch_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::vector<std::uint8_t> got(ddst.bytes());
  ddst.download(got.data(), got.size());
  return got == expected ? "" : "destination differs from the reference";
}

int run(const std::string& manifest, std::size_t limit, bool twice) {
  std::vector<ops::ManifestLine> lines = ops::read_manifest(manifest);
  lines.resize(std::min(lines.size(), limit));
  DeviceBuffer warm(16);  // creates the context, so the first call's time is the library's own
  std::map<std::string, double> first_call_ms;
  std::map<std::string, int> lines_of;
  int failures = 0;
  for (int round = 0; round < (twice ? 2 : 1); ++round) {
    for (std::size_t i = 0; i < lines.size(); ++i) {
      std::string op, problem;
      double ms = 0;
      try {
        const ops::ParsedLine line = ops::parse_manifest_line(lines[i].text);
        op = line.op->name;
        if (op == "rope") problem = run_rope(line.args, i + 1, ms);
        else if (op == "rearrange") problem = run_rearrange(line.args, i + 1, ms);
        else problem = "deploy_child does not run " + op + " lines";
      } catch (const Error& e) {
        if (e.code() == ErrorCode::offline_miss) {
          std::printf("offline_miss nvrtc_loaded=%d\n%s\n", jit::nvrtc_loaded() ? 1 : 0, e.what());
          return 3;
        }
        problem = e.what();
      }
      if (!problem.empty()) {
        std::printf("FAILED: %s (%s)\n  %s\n", lines[i].text.c_str(), lines[i].where.c_str(), problem.c_str());
        ++failures;
      }
      if (round == 0 && !first_call_ms.count(op)) first_call_ms[op] = ms;
      if (round == 0) ++lines_of[op];
    }
  }
  const Counters c = counters();
  for (const auto& [op, ms] : first_call_ms) std::printf("first call of %s: plan to launch %.3f ms\n", op.c_str(), ms);
  std::printf("%s lines=%zu rope=%d rearrange=%d failed=%d compiles=%llu disk_hits=%llu memory_hits=%llu nvrtc_loaded=%d\n",
              failures == 0 ? "ok" : "FAILED", lines.size(), lines_of["rope"], lines_of["rearrange"], failures,
              static_cast<unsigned long long>(c.compiles), static_cast<unsigned long long>(c.disk_hits),
              static_cast<unsigned long long>(c.memory_hits), jit::nvrtc_loaded() ? 1 : 0);
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 1 && args[0] == "offline-miss") return offline_miss();
    if (args.size() >= 2 && args[0] == "run") {
      std::size_t limit = SIZE_MAX;
      bool twice = false;
      for (std::size_t i = 2; i < args.size(); ++i) {
        if (args[i] == "--twice") {
          twice = true;
        } else if (args[i] == "--lines" && i + 1 < args.size()) {
          limit = std::stoul(args[++i]);
        } else if (args[i] == "--fsize-limit" && i + 1 < args.size()) {
          const rlim_t bytes = std::stoul(args[++i]);
          const struct rlimit limit_bytes{bytes, bytes};
          ::setrlimit(RLIMIT_FSIZE, &limit_bytes);
        } else {
          throw std::runtime_error("unknown option " + args[i]);
        }
      }
      return run(args[1], limit, twice);
    }
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: deploy_child offline-miss | run MANIFEST [--lines N] [--twice] [--fsize-limit BYTES]\n");
  return 2;
}
