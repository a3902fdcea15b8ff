// A fresh process for the deployment tests (caches, offline mode and NVRTC are per process).
//
//   deploy_child offline-miss
//       Asks for a kernel that no cache holds. Prints "offline_miss nvrtc_loaded=0|1" and the
//       message; exit 0 on that error with NVRTC never loaded. Needs no GPU.
//   deploy_child run MANIFEST [--lines N] [--twice] [--fsize-limit BYTES]
//       Plans and launches every line of MANIFEST (rope and rearrange) through the public API on
//       random data and checks each result against a CPU reference; --lines N: the first N lines
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
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "jit/kernel_cache.hpp"
#include "jit/nvrtc.hpp"
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

// ---- manifest lines: the options of `shapejit plan rope|rearrange`, parsed by hand

struct Line {
  std::string op;
  std::map<std::string, std::string> options;  ///< "--shape" -> "1,4096,32,128"; flags -> ""

  bool has(const std::string& name) const { return options.count(name) > 0; }
  std::string get(const std::string& name, const std::string& fallback = "") const {
    const auto it = options.find(name);
    return it == options.end() ? fallback : it->second;
  }
  std::vector<std::int64_t> list(const std::string& name) const {
    std::vector<std::int64_t> out;
    std::stringstream in(get(name));
    for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoll(item));
    return out;
  }
  DType dtype(const std::string& name, const std::string& fallback) const {
    const auto t = parse_dtype(get(name, fallback));
    if (!t) throw std::runtime_error(name + " " + get(name) + " is not a dtype");
    return *t;
  }
};

Line parse_line(const std::string& text) {
  static const std::vector<std::string> kFlags = {"--inplace", "--inverse", "--exact", "--checked"};
  Line line;
  std::stringstream in(text);
  in >> line.op;
  for (std::string word; in >> word;) {
    const bool flag = std::find(kFlags.begin(), kFlags.end(), word) != kFlags.end();
    std::string value;
    if (!flag) in >> value;
    line.options[word] = value;
  }
  return line;
}

std::vector<std::string> manifest_lines(const std::string& path, std::size_t limit) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::vector<std::string> lines;
  for (std::string raw; std::getline(in, raw) && lines.size() < limit;) {
    const std::string text = raw.substr(0, raw.find('#'));
    if (text.find_first_not_of(" \t\r") != std::string::npos) lines.push_back(text);
  }
  return lines;
}

// ---- host values of every float and integer dtype

double load_float(const std::uint8_t* base, DType t, std::int64_t i) {
  std::uint16_t h = 0;
  switch (t) {
    case DType::f32: { float f; std::memcpy(&f, base + 4 * i, 4); return f; }
    case DType::f64: { double d; std::memcpy(&d, base + 8 * i, 8); return d; }
    case DType::bf16: {
      std::memcpy(&h, base + 2 * i, 2);
      const std::uint32_t bits = std::uint32_t{h} << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case DType::f16: {
      std::memcpy(&h, base + 2 * i, 2);
      const int exponent = (h >> 10) & 31, mantissa = h & 1023;
      const double magnitude = exponent == 0 ? std::ldexp(mantissa, -24)
                               : exponent == 31 ? (mantissa ? NAN : INFINITY)
                                                : std::ldexp(1024 + mantissa, exponent - 25);
      return (h & 0x8000) ? -magnitude : magnitude;
    }
    default: throw std::runtime_error("not a float dtype");
  }
}

void store_int(std::uint8_t* base, DType t, std::int64_t i, std::int64_t value) {
  const std::size_t size = dtype_size(t);
  std::memcpy(base + static_cast<std::int64_t>(size) * i, &value, size);  // little-endian truncation
}

/// Random finite values of magnitude 1/32 to 8, exact in every float dtype, as raw bytes.
std::vector<std::uint8_t> random_floats(std::int64_t n, DType t, std::uint64_t seed) {
  std::vector<std::uint8_t> bits = support::random_bytes(static_cast<std::size_t>(n) * dtype_size(t), seed);
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint8_t* p = bits.data() + static_cast<std::int64_t>(dtype_size(t)) * i;
    const double value = std::ldexp(1.0 + (p[0] & 127) / 128.0, static_cast<int>(p[1] % 8) - 5) * ((p[1] & 128) ? -1 : 1);
    if (t == DType::f32) { const float f = static_cast<float>(value); std::memcpy(p, &f, 4); }
    if (t == DType::f64) std::memcpy(p, &value, 8);
    if (t == DType::bf16) {  // value has 8 significant bits: exact in bf16 and f16
      const float f = static_cast<float>(value);
      std::uint32_t b;
      std::memcpy(&b, &f, 4);
      const std::uint16_t h = static_cast<std::uint16_t>(b >> 16);
      std::memcpy(p, &h, 2);
    }
    if (t == DType::f16) {
      int exponent = 0;
      const double fraction = std::frexp(std::fabs(value), &exponent);  // value = fraction * 2^exponent
      const std::uint16_t h = static_cast<std::uint16_t>((value < 0 ? 0x8000 : 0) | ((exponent + 14) << 10) |
                                                         (static_cast<int>(fraction * 2048) - 1024));
      std::memcpy(p, &h, 2);
    }
  }
  return bits;
}

// ---- rope

/// Relative tolerance of one output element: half an ulp of the data dtype, doubled.
double rope_relative_tolerance(DType t) {
  return t == DType::bf16 ? 0x1p-7 : t == DType::f16 ? 0x1p-10 : t == DType::f32 ? 0x1p-22 : 0x1p-50;
}

struct RopeCase {
  RopeDesc desc;
  RopeTables tables;
  std::int64_t batch = 1, seq = 0, heads = 0, k_heads = 0, dhead = 0, rotary = 0;
  std::vector<std::uint8_t> positions;
};

RopeCase rope_case(const Line& line) {
  RopeCase c;
  const std::vector<std::int64_t> shape = line.list("--shape");
  if (shape.size() != 3 && shape.size() != 4) throw std::runtime_error("--shape must have 3 or 4 extents");
  const std::size_t r = shape.size();
  c.batch = r == 4 ? shape[0] : 1;
  c.seq = shape[r - 3];
  c.heads = shape[r - 2];
  c.dhead = shape[r - 1];
  c.rotary = std::stoll(line.get("--rotary-dim", "0"));
  if (c.rotary == 0) c.rotary = c.dhead;
  const DType data = line.dtype("--dtype", "");
  RopeDesc& d = c.desc;
  d.style = line.get("--algo") == "gptj" ? RopeStyle::gptj : RopeStyle::neox;
  d.x = TensorDesc{shape, {}, data};
  d.rotary_dim = c.rotary;
  d.inplace = line.has("--inplace");
  d.inverse = line.has("--inverse");
  if (line.has("--k-heads")) {
    c.k_heads = std::stoll(line.get("--k-heads"));
    std::vector<std::int64_t> k_shape = shape;
    k_shape[r - 2] = c.k_heads;
    d.k = TensorDesc{k_shape, {}, data};
  }
  c.tables = rope_tables(std::max<std::int64_t>(c.seq, 1), c.rotary,
                         line.dtype("--table-dtype", data == DType::f64 ? "f64" : "f32"));
  d.table = c.tables.desc();
  if (line.get("--pos-dtype", "i64") != "none") {
    const DType pos = line.dtype("--pos-dtype", "i64");
    const bool shared = line.get("--pos-layout") == "seq" || r == 3;
    d.positions = TensorDesc{shared ? std::vector<std::int64_t>{c.seq} : std::vector<std::int64_t>{c.batch, c.seq}, {}, pos};
    const std::int64_t n = d.positions->numel();
    c.positions.resize(static_cast<std::size_t>(n) * dtype_size(pos));
    const std::vector<std::uint8_t> noise = support::random_bytes(static_cast<std::size_t>(n) * 4, 99);
    for (std::int64_t i = 0; i < n; ++i) {
      std::uint32_t v;
      std::memcpy(&v, noise.data() + 4 * i, 4);
      store_int(c.positions.data(), pos, i, static_cast<std::int64_t>(v % static_cast<std::uint32_t>(c.tables.rows)));
    }
  }
  return c;
}

std::int64_t position_of(const RopeCase& c, std::int64_t b, std::int64_t s) {
  if (!c.desc.positions) return s;  // offset 0
  const DType t = c.desc.positions->dtype;
  const std::int64_t i = c.desc.positions->shape.size() == 2 ? b * c.seq + s : s;
  std::int64_t v = 0;
  std::memcpy(&v, c.positions.data() + static_cast<std::int64_t>(dtype_size(t)) * i, dtype_size(t));
  return v;
}

/// Checks one rotated tensor ([batch, seq, heads, dhead] contiguous) against the reference.
std::string check_rope_tensor(const RopeCase& c, const std::vector<std::uint8_t>& in, const std::vector<std::uint8_t>& out,
                              std::int64_t heads, const char* name) {
  const DType t = c.desc.x.dtype, table = c.tables.dtype;
  const std::int64_t half = c.rotary / 2, width = c.tables.width;
  const std::size_t elem = dtype_size(t);
  // Absolute slack for f32 arithmetic on inputs up to 8 (the kernel computes in f32).
  const double absolute = t == DType::f64 ? 1e-12 : 1e-5, relative = rope_relative_tolerance(t);
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t s = 0; s < c.seq; ++s) {
      const std::int64_t p = position_of(c, b, s);
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t row = ((b * c.seq + s) * heads + h) * c.dhead;
        for (std::int64_t i = 0; i < half; ++i) {
          const std::int64_t i0 = c.desc.style == RopeStyle::gptj ? 2 * i : i;
          const std::int64_t i1 = c.desc.style == RopeStyle::gptj ? 2 * i + 1 : i + half;
          const double cs = load_float(c.tables.cos.data(), table, p * width + i);
          const double sn = (c.desc.inverse ? -1 : 1) * load_float(c.tables.sin.data(), table, p * width + i);
          const double x0 = load_float(in.data(), t, row + i0), x1 = load_float(in.data(), t, row + i1);
          const double r0 = x0 * cs - x1 * sn, r1 = x0 * sn + x1 * cs;
          for (const auto& [index, want] : {std::pair{row + i0, r0}, std::pair{row + i1, r1}}) {
            const double got = load_float(out.data(), t, index);
            if (!(std::fabs(got - want) <= absolute + relative * std::fabs(want)))  // NaN fails too
              return std::string(name) + ": element " + std::to_string(index) + " is " + std::to_string(got) +
                     ", expected " + std::to_string(want);
          }
        }
        const std::size_t pass = static_cast<std::size_t>(c.dhead - c.rotary) * elem;
        const std::size_t at = static_cast<std::size_t>(row + c.rotary) * elem;
        if (pass > 0 && std::memcmp(in.data() + at, out.data() + at, pass) != 0)
          return std::string(name) + ": pass-through elements changed";
      }
    }
  return "";
}

/// Runs one rope line; returns "" or what was wrong. `plan_to_launch_ms` gets the host time from
/// planning to the launch call's return.
std::string run_rope(const Line& line, std::uint64_t seed, double& plan_to_launch_ms) {
  const RopeCase c = rope_case(line);
  const DType t = c.desc.x.dtype;
  const std::vector<std::uint8_t> x = random_floats(c.desc.x.numel(), t, seed);
  const std::vector<std::uint8_t> k = c.desc.k ? random_floats(c.desc.k->numel(), t, seed + 1) : std::vector<std::uint8_t>{};
  DeviceBuffer dx(x.size()), dk(k.size()), dcos(c.tables.cos.size()), dsin(c.tables.sin.size()),
      dpos(c.positions.size()), dy(c.desc.inplace ? 0 : x.size()), dk_out(c.desc.inplace ? 0 : k.size());
  dx.upload(x.data(), x.size());
  if (!k.empty()) dk.upload(k.data(), k.size());
  dcos.upload(c.tables.cos.data(), c.tables.cos.size());
  dsin.upload(c.tables.sin.data(), c.tables.sin.size());
  if (!c.positions.empty()) dpos.upload(c.positions.data(), c.positions.size());
  for (DeviceBuffer* out : {&dy, &dk_out})
    if (out->bytes() > 0) out->fill(0xff);  // NaN in every float dtype: an unwritten element fails
  RopePointers ptr;
  ptr.x = dx.get();
  ptr.y = c.desc.inplace ? dx.get() : dy.get();
  if (c.desc.k) {
    ptr.k = dk.get();
    ptr.k_out = c.desc.inplace ? dk.get() : dk_out.get();
  }
  ptr.cos = dcos.get();
  ptr.sin = dsin.get();
  ptr.positions = c.positions.empty() ? nullptr : dpos.get();
  const auto start = std::chrono::steady_clock::now();
  const RopePlan plan = plan_rope(c.desc);
  plan.launch(ptr);
  plan_to_launch_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::vector<std::uint8_t> y(x.size()), k_out(k.size());
  (c.desc.inplace ? dx : dy).download(y.data(), y.size());
  if (!k.empty()) (c.desc.inplace ? dk : dk_out).download(k_out.data(), k_out.size());
  std::string problem = check_rope_tensor(c, x, y, c.heads, "y");
  if (problem.empty() && c.desc.k) problem = check_rope_tensor(c, k, k_out, c.k_heads, "k_out");
  return problem;
}

// ---- rearrange

/// Lowest and one-past-highest element offsets a strided view reaches.
std::pair<std::int64_t, std::int64_t> element_range(const TensorDesc& view) {
  std::int64_t low = 0, high = 1;
  const std::vector<std::int64_t> strides = view.effective_strides();
  for (std::size_t i = 0; i < view.shape.size(); ++i) (strides[i] < 0 ? low : high) += (view.shape[i] - 1) * strides[i];
  return {low, high};
}

std::string run_rearrange(const Line& line, std::uint64_t seed, double& plan_to_launch_ms) {
  const int elem_bytes = std::stoi(line.get("--elem-bytes", "0"));
  const DType dtype = elem_bytes > 0 ? DType::u8 : line.dtype("--dtype", "");
  const std::vector<std::int64_t> shape = line.list("--shape");
  std::vector<int> perm;
  for (std::int64_t p : line.list("--perm")) perm.push_back(static_cast<int>(p));
  if (perm.empty())
    for (std::size_t i = 0; i < shape.size(); ++i) perm.push_back(static_cast<int>(i));
  const TensorDesc src{shape, line.list("--src-strides"), dtype, elem_bytes};
  const TensorDesc view = permuted(src, perm);
  const TensorDesc dst{view.shape, line.list("--dst-strides"), dtype, elem_bytes};
  RearrangeOptions options;
  options.exact = line.has("--exact");
  options.assumed_alignment = std::stoul(line.get("--align", "16"));
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
  const std::vector<std::string> lines = manifest_lines(manifest, limit);
  DeviceBuffer warm(16);  // creates the context, so the first call's time is the library's own
  std::map<std::string, double> first_call_ms;
  std::map<std::string, int> lines_of;
  int failures = 0;
  for (int round = 0; round < (twice ? 2 : 1); ++round) {
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const Line line = parse_line(lines[i]);
      double ms = 0;
      std::string problem;
      try {
        if (line.op == "rope") problem = run_rope(line, i + 1, ms);
        else if (line.op == "rearrange") problem = run_rearrange(line, i + 1, ms);
        else problem = "unknown operation";
      } catch (const Error& e) {
        if (e.code() == ErrorCode::offline_miss) {
          std::printf("offline_miss nvrtc_loaded=%d\n%s\n", jit::nvrtc_loaded() ? 1 : 0, e.what());
          return 3;
        }
        problem = e.what();
      }
      if (!problem.empty()) {
        std::printf("FAILED: %s\n  %s\n", lines[i].c_str(), problem.c_str());
        ++failures;
      }
      if (round == 0 && !first_call_ms.count(line.op)) first_call_ms[line.op] = ms;
      if (round == 0) ++lines_of[line.op];
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
