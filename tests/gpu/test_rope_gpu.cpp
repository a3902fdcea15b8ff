// Rope on the GPU against the float64 CPU reference computed from the same rounded inputs and tables.
//
// Tolerances: a rotated output y = x0*c -/+ x1*s is compared with the reference r as
//   |y - r| <= ulp(r) + 1e-6 * (|x0| + |x1|)   for f16 and bf16 (one unit of the output dtype,
//                                              plus the f32 arithmetic's error on the terms)
//   |y - r| <= 1e-6 * (|x0| + |x1|)            for f32  (|cos|, |sin| <= 1 in these tables)
//   |y - r| <= 1e-12 * (|x0| + |x1|)           for f64
// Pass-through elements and every element of a token at position 0 must be bit-exact; tokens
// whose position is outside the table must be NaN throughout.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>

#include "gpu.hpp"
#include "ops/rope/reference.hpp"
#include "ops/rope/impl.hpp"
#include "shapejit/hadamard.hpp"
#include "shapejit/rope.h"
#include "shapejit/rope.hpp"

using namespace shapejit;
using shapejit::test::DeviceBuffer;

namespace {

std::size_t size_of(DType t) { return dtype_size(t); }

/// One allocation with a host copy.
struct Storage {
  Storage(DType t, std::int64_t n)
      : dtype(t), elements(n), host(static_cast<std::size_t>(n) * size_of(t)), device(std::max<std::size_t>(host.size(), 1)) {}
  DType dtype;
  std::int64_t elements;
  std::vector<std::uint8_t> host;
  DeviceBuffer device;

  void upload() { device.upload(host.data(), host.size()); }
  std::vector<std::uint8_t> download() const {
    std::vector<std::uint8_t> out(host.size());
    device.download(out.data(), out.size());
    return out;
  }
};

/// A strided view into a Storage, starting `offset` elements in.
struct View {
  std::shared_ptr<Storage> storage;
  std::int64_t offset = 0;
  TensorDesc desc;

  void* device() const { return static_cast<char*>(storage->device.get()) + offset * static_cast<std::int64_t>(size_of(desc.dtype)); }
  const void* host() const { return storage->host.data() + offset * static_cast<std::int64_t>(size_of(desc.dtype)); }
  /// Element index within the storage of logical index (b, s, h, i); b is ignored for 3-D views.
  std::int64_t at(std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t i) const {
    const auto st = desc.effective_strides();
    const std::size_t r = st.size();
    return offset + (r == 4 ? b * st[0] : 0) + s * st[r - 3] + h * st[r - 2] + i * st[r - 1];
  }
};

/// Elements a view with non-negative strides reaches past its start.
std::int64_t span(const TensorDesc& d) {
  const auto st = d.effective_strides();
  std::int64_t n = 1;
  for (std::size_t i = 0; i < d.shape.size(); ++i) {
    if (d.shape[i] == 0) return 0;
    n += (d.shape[i] - 1) * st[i];
  }
  return n;
}

View own_view(const TensorDesc& desc) { return {std::make_shared<Storage>(desc.dtype, span(desc)), 0, desc}; }

/// Fills a whole storage with values uniform in [-2, 2], rounded to its dtype.
void fill_random(Storage& s, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> dist(-2.0, 2.0);
  for (std::int64_t i = 0; i < s.elements; ++i) detail::store_from_double(s.host.data(), s.dtype, i, dist(rng));
}

std::uint64_t raw_bits(const void* base, DType t, std::int64_t index) {
  std::uint64_t v = 0;
  std::memcpy(&v, static_cast<const char*>(base) + index * static_cast<std::int64_t>(size_of(t)), size_of(t));
  return v;
}

double tolerance(DType t, double reference, double magnitude) {
  switch (t) {
    case DType::f16:
    case DType::bf16: return test::ulp(t, reference) + 1e-6 * magnitude;
    case DType::f32: return 1e-6 * magnitude;
    default: return 1e-12 * magnitude;
  }
}

/// Where the CPU reference and the device disagree, and how often.
struct Mismatches {
  std::int64_t count = 0, checked = 0;
  std::string first;
  void note(const std::string& what) {
    if (count++ == 0) first = what;
  }
};

/// The tensors of one rope call with host copies.
struct RopeCall {
  RopeDesc desc;
  View x, y, k, k_out;
  bool has_k = false;
  std::shared_ptr<Storage> cos, sin, positions;
  std::int64_t offset = 0;

  RopePointers device_pointers() const {
    return {x.device(), y.device(), has_k ? k.device() : nullptr, has_k ? k_out.device() : nullptr,
            cos->device.get(), sin->device.get(), positions ? positions->device.get() : nullptr, offset};
  }
  RopePointers host_pointers() const {
    return {x.host(), nullptr, has_k ? k.host() : nullptr, nullptr, cos->host.data(), sin->host.data(),
            positions ? positions->host.data() : nullptr, offset};
  }
};

/// Fused with a Hadamard transform: the sum of |input| over the group of head `head` of q or k
/// (every output of the group is bounded by twice that times the scale).
double input_group_l1(const RopeCall& call, const plan::RopePlanData& plan, std::int64_t b, std::int64_t s, bool is_q,
                      std::int64_t head) {
  const View& in = is_q ? call.x : call.k;
  const std::int64_t group = plan.spec.hadamard_group, first = head / group * group;
  double l1 = 0;
  for (std::int64_t h = first; h < first + group; ++h)
    for (std::int64_t i = 0; i < plan.spec.head_dim; ++i)
      l1 += std::fabs(detail::load_as_double(in.storage->host.data(), plan.spec.data, in.at(b, s, h, i)));
  return l1;
}

/// Compares every output element of `call` (after a launch) with the reference, and checks that
/// nothing outside the output views changed. Fused plans: each output within one unit of the data
/// type plus the f32 (f64) arithmetic's error on its group's magnitude.
Mismatches verify(const RopeCall& call, const plan::RopePlanData& plan) {
  Mismatches m;
  const plan::RopeSpec& spec = plan.spec;
  const DType t = spec.data;
  const std::int64_t D = spec.head_dim, R = spec.rotary_dim, half = R / 2;
  // Host copies keep what each output storage held before the launch: the inputs in place, else poison.
  const bool shared_storage = call.has_k && call.k_out.storage == call.y.storage;  // packed q and k in place
  const bool separate_k = call.has_k && !shared_storage;
  const std::vector<std::uint8_t> y_out = call.y.storage->download();
  const std::vector<std::uint8_t> k_out = separate_k ? call.k_out.storage->download() : std::vector<std::uint8_t>{};
  std::vector<char> y_written(static_cast<std::size_t>(call.y.storage->elements), 0);
  std::vector<char> k_written(separate_k ? static_cast<std::size_t>(call.k_out.storage->elements) : 0, 0);

  std::vector<double> ref;
  const bool fused = spec.hadamard_group != 0;
  double group_l1 = 0;  // fused: the sum of |input| over the current head's group
  const std::int64_t tokens = plan.batch * plan.seq;
  for (std::int64_t token = 0; token < tokens; ++token) {
    const std::int64_t b = token / plan.seq, s = token % plan.seq;
    detail::rope_reference_token(plan, call.host_pointers(), b, s, ref);
    const bool bad = std::isnan(ref[0]);
    for (std::int64_t h = 0; h < plan.heads_q + plan.heads_k; ++h) {
      const bool is_q = h < plan.heads_q;
      const View& in = is_q ? call.x : call.k;
      const View& out = is_q ? call.y : call.k_out;
      const std::vector<std::uint8_t>& got = is_q || shared_storage ? y_out : k_out;
      std::vector<char>& written = is_q || shared_storage ? y_written : k_written;
      const std::int64_t hh = is_q ? h : h - plan.heads_q;
      for (std::int64_t i = 0; i < D; ++i) {
        const std::int64_t o = out.at(b, s, hh, i);
        written[static_cast<std::size_t>(o)] = 1;
        const double r = ref[static_cast<std::size_t>(h * D + i)];
        const double v = detail::load_as_double(got.data(), t, o);
        ++m.checked;
        auto where = [&] {
          std::ostringstream w;
          w << "token (" << b << "," << s << ") head " << h << " element " << i << ": got " << v << ", reference " << r;
          return w.str();
        };
        if (bad) {
          if (!std::isnan(v)) m.note(where() + " (bad position: NaN expected)");
          continue;
        }
        if (fused) {
          if (i == 0) group_l1 = input_group_l1(call, plan, b, s, is_q, hh);
          const double bound = 2 * group_l1 * std::fabs(plan.args.hadamard_scale);
          if (!(std::fabs(v - r) <= test::ulp(t, r) + (t == DType::f64 ? 1e-12 : 1e-5) * bound)) m.note(where());
          continue;
        }
        const std::uint64_t input_bits = raw_bits(in.storage->host.data(), t, in.at(b, s, hh, i));
        if (i >= R) {  // pass-through: bit-exact
          if (raw_bits(got.data(), t, o) != input_bits) m.note(where() + " (pass-through not bit-exact)");
          continue;
        }
        const std::int64_t partner = spec.style == RopeStyle::neox ? (i < half ? i + half : i - half) : (i ^ 1);
        const double magnitude = std::fabs(detail::load_as_double(in.storage->host.data(), t, in.at(b, s, hh, i))) +
                                 std::fabs(detail::load_as_double(in.storage->host.data(), t, in.at(b, s, hh, partner)));
        if (!(std::fabs(v - r) <= tolerance(t, r, magnitude))) m.note(where());
      }
    }
  }
  // Everything an output view does not cover keeps its bytes (poison, or the inputs in place).
  const std::size_t e = size_of(t);
  for (std::size_t i = 0; i < y_written.size(); ++i)
    if (!y_written[i] && std::memcmp(&y_out[i * e], &call.y.storage->host[i * e], e) != 0)
      m.note("element " + std::to_string(i) + " outside the output view was written");
  for (std::size_t i = 0; i < k_written.size(); ++i)
    if (!k_written[i] && std::memcmp(&k_out[i * e], &call.k_out.storage->host[i * e], e) != 0)
      m.note("element " + std::to_string(i) + " outside the k output view was written");
  return m;
}

/// Writes bit-exactness of position-0 tokens: every element of such a token equals its input.
std::int64_t position_zero_mismatches(const RopeCall& call, const plan::RopePlanData& plan) {
  std::int64_t bad = 0;
  const std::vector<std::uint8_t> y_out = call.y.storage->download();
  for (std::int64_t b = 0; b < plan.batch; ++b)
    for (std::int64_t s = 0; s < plan.seq; ++s) {
      std::int64_t position = s + call.offset;
      if (plan.spec.position) {
        const std::int64_t at = b * plan.args.position_stride[0] + s * plan.args.position_stride[1];
        position = static_cast<std::int64_t>(detail::load_as_double(call.positions->host.data(), *plan.spec.position, at));
      }
      if (position != 0) continue;
      for (std::int64_t h = 0; h < plan.heads_q; ++h)
        for (std::int64_t i = 0; i < plan.spec.head_dim; ++i)
          bad += raw_bits(y_out.data(), plan.spec.data, call.y.at(b, s, h, i)) !=
                 raw_bits(call.x.storage->host.data(), plan.spec.data, call.x.at(b, s, h, i));
    }
  return bad;
}

enum class Layout { contiguous, swapped, padded, packed };
enum class Pattern { zero, last, permuted, repeated, random, arange, arange_offset };

/// One generated case of the grid.
struct Case {
  RopeStyle style = RopeStyle::neox;
  DType data = DType::bf16, table = DType::f32;
  std::optional<DType> position = DType::i32;
  bool positions_batched = false;
  std::int64_t batch = 0;  ///< 0: 3-D
  std::int64_t seq = 1, heads = 1, k_heads = -1, dhead = 64, rotary = 0;
  Layout layout = Layout::contiguous;
  Pattern pattern = Pattern::random;
  bool inplace = false, inverse = false;
  std::int64_t hadamard_group = 0;
  HadamardOrder hadamard_order = HadamardOrder::rope_then_hadamard;
  RopeAxisRule axis_rule = RopeAxisRule::none;  ///< multi-axis positions [axes, ...], each axis its own draw
  std::vector<std::int64_t> axis_sections;
  /// Positions stored token-major ([batch, seq, axes] in memory) with two elements outside the table
  /// after each token's: the view's strides are strided and its axis stride is 1.
  bool positions_token_major = false;
  std::vector<std::int64_t> x_strides, y_strides;  ///< explicit (file cases)
  double theta = 1e4;

  std::string name() const {
    std::ostringstream o;
    o << rope_style_name(style) << " " << dtype_name(data) << " table " << dtype_name(table) << " pos "
      << (position ? std::string(dtype_name(*position)) : "none") << (positions_batched ? "[B,S]" : "[S]") << " B" << batch
      << " S" << seq << " H" << heads << " Hk" << k_heads << " D" << dhead << " R" << rotary << " layout "
      << static_cast<int>(layout) << " pattern " << static_cast<int>(pattern) << (inplace ? " inplace" : "")
      << (inverse ? " inverse" : "") << (positions_token_major ? " positions token-major" : "");
    if (hadamard_group != 0) o << " hadamard G" << hadamard_group << " " << hadamard_order_name(hadamard_order);
    if (axis_rule != RopeAxisRule::none) {
      o << " axes " << rope_axis_rule_name(axis_rule);
      for (std::int64_t s : axis_sections) o << " " << s;
    }
    return o.str();
  }
};

std::vector<std::int64_t> data_shape(const Case& c, std::int64_t heads) {
  if (c.batch == 0) return {c.seq, heads, c.dhead};
  return {c.batch, c.seq, heads, c.dhead};
}

/// Strides of a tensor of `heads` heads in the case's layout (row = token of `row_heads` heads).
std::vector<std::int64_t> layout_strides(const Case& c, std::int64_t heads, std::int64_t row_heads) {
  const std::int64_t D = c.dhead;
  const std::int64_t B = std::max<std::int64_t>(c.batch, 1);
  switch (c.layout) {
    case Layout::swapped:  // memory [seq, batch, heads, dhead]
      if (c.batch != 0) return {heads * D, B * heads * D, D, 1};
      return {heads * D, D, 1};
    case Layout::padded:
      if (c.batch != 0) return {c.seq * heads * (D + 64), heads * (D + 64), D + 64, 1};
      return {heads * (D + 64), D + 64, 1};
    case Layout::packed:
      if (c.batch != 0) return {c.seq * row_heads * D, row_heads * D, D, 1};
      return {row_heads * D, D, 1};
    default: return contiguous_strides(data_shape(c, heads));
  }
}

std::int64_t position_value(Pattern p, std::int64_t b, std::int64_t s, std::int64_t rows, std::mt19937_64& rng) {
  switch (p) {
    case Pattern::zero: return 0;
    case Pattern::last: return rows - 1;
    case Pattern::permuted: return (s * 7919 + b * 31) % rows;
    case Pattern::repeated: return (s / 3 + b) % rows;
    case Pattern::arange: return s % rows;
    case Pattern::arange_offset: return (s + 5 + b * 3) % rows;
    default: return static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(rows));
  }
}

/// Builds the tensors of a case (inputs random, outputs poisoned) and its descriptor.
RopeCall build_call(const Case& c, std::mt19937_64& rng) {
  RopeCall call;
  RopeDesc& d = call.desc;
  d.style = c.style;
  d.rotary_dim = c.rotary;
  d.inplace = c.inplace;
  d.inverse = c.inverse;
  d.hadamard_group = c.hadamard_group;
  d.hadamard_order = c.hadamard_order;
  const std::int64_t R = c.rotary == 0 ? c.dhead : c.rotary;
  call.has_k = c.k_heads >= 0;
  const std::int64_t k_heads = std::max<std::int64_t>(c.k_heads, 0);
  if (c.layout == Layout::packed) {
    const std::int64_t row = c.heads + 2 * k_heads;
    const TensorDesc qkv{data_shape(c, row), {}, c.data};
    auto storage = std::make_shared<Storage>(c.data, span(qkv));
    fill_random(*storage, rng);
    call.x = {storage, 0, {data_shape(c, c.heads), layout_strides(c, c.heads, row), c.data}};
    if (call.has_k) call.k = {storage, c.heads * c.dhead, {data_shape(c, k_heads), layout_strides(c, k_heads, row), c.data}};
  } else {
    TensorDesc xd{data_shape(c, c.heads), c.x_strides.empty() ? layout_strides(c, c.heads, c.heads) : c.x_strides, c.data};
    call.x = own_view(xd);
    fill_random(*call.x.storage, rng);
    if (call.has_k) {
      call.k = own_view({data_shape(c, k_heads), layout_strides(c, k_heads, k_heads), c.data});
      fill_random(*call.k.storage, rng);
    }
  }
  if (c.inplace) {
    call.y = call.x;
    call.k_out = call.k;
  } else {
    // Outputs: explicit strides, else contiguous (a layout different from padded/packed inputs),
    // else the inputs' layout (swapped).
    std::vector<std::int64_t> ys = c.y_strides;
    if (ys.empty()) ys = c.layout == Layout::swapped ? layout_strides(c, c.heads, c.heads) : contiguous_strides(data_shape(c, c.heads));
    call.y = own_view({data_shape(c, c.heads), ys, c.data});
    std::fill(call.y.storage->host.begin(), call.y.storage->host.end(), 0xff);  // poison: NaN in every float dtype
    if (call.has_k) {
      const auto ks = c.layout == Layout::swapped ? layout_strides(c, k_heads, k_heads) : contiguous_strides(data_shape(c, k_heads));
      call.k_out = own_view({data_shape(c, k_heads), ks, c.data});
      std::fill(call.k_out.storage->host.begin(), call.k_out.storage->host.end(), 0xff);
    }
  }
  d.x = call.x.desc;
  d.y = call.y.desc;
  if (call.has_k) {
    d.k = call.k.desc;
    d.k_out = call.k_out.desc;
  }

  const bool narrow = c.position && dtype_size(*c.position) == 1;
  std::int64_t rows = narrow ? 100 : 300;
  if (!c.position) {
    rows = c.seq + 16;
    call.offset = 7;
  }
  RopeTableOptions options;
  options.theta = c.theta;
  const RopeTables tables = rope_tables(rows, R, c.table, options);
  call.cos = std::make_shared<Storage>(c.table, rows * tables.width);
  call.sin = std::make_shared<Storage>(c.table, rows * tables.width);
  call.cos->host = tables.cos;
  call.sin->host = tables.sin;
  d.table = tables.desc();

  if (c.position) {
    const std::int64_t B = std::max<std::int64_t>(c.batch, 1);
    std::vector<std::int64_t> shape =
        c.positions_batched ? std::vector<std::int64_t>{B, c.seq} : std::vector<std::int64_t>{c.seq};
    const auto axes = static_cast<std::int64_t>(std::max<std::size_t>(c.axis_sections.size(), 1));
    if (c.axis_rule != RopeAxisRule::none) shape.insert(shape.begin(), axes);
    const std::int64_t per_axis = (c.positions_batched ? B : 1) * c.seq;
    const std::int64_t token_row = axes + 2;  // token-major: a token's axes, then two gap elements
    const std::size_t pos_size = dtype_size(*c.position);
    call.positions = std::make_shared<Storage>(*c.position, (c.positions_token_major ? token_row : axes) * per_axis);
    auto at = [&](std::int64_t a, std::int64_t b, std::int64_t s) {
      return c.positions_token_major ? (b * c.seq + s) * token_row + a : a * per_axis + b * c.seq + s;
    };
    const std::int64_t outside = rows + 5;  // what the gaps hold: a read of one makes a NaN token
    for (std::int64_t t = 0; c.positions_token_major && t < per_axis; ++t)
      for (std::int64_t g = axes; g < token_row; ++g)
        std::memcpy(call.positions->host.data() + (t * token_row + g) * pos_size, &outside, pos_size);
    for (std::int64_t a = 0; a < axes; ++a)
      for (std::int64_t b = 0; b < (c.positions_batched ? B : 1); ++b)
        for (std::int64_t s = 0; s < c.seq; ++s) {
          const std::int64_t v = position_value(a == 0 ? c.pattern : Pattern::random, b, s, rows, rng);
          std::memcpy(call.positions->host.data() + at(a, b, s) * pos_size, &v, pos_size);
        }
    std::vector<std::int64_t> strides;  // token-major: axis 1, batch seq * row, seq row
    if (c.positions_token_major) {
      if (c.axis_rule != RopeAxisRule::none) strides.push_back(1);
      if (c.positions_batched) strides.push_back(c.seq * token_row);
      strides.push_back(token_row);
    }
    d.positions = TensorDesc{shape, strides, *c.position};
    d.axis_rule = c.axis_rule;
    d.axis_sections = c.axis_sections;
  }
  return call;
}

void upload_all(RopeCall& call) {
  call.x.storage->upload();
  if (call.has_k && call.k.storage != call.x.storage) call.k.storage->upload();
  if (call.y.storage != call.x.storage) call.y.storage->upload();
  if (call.has_k && call.k_out.storage != call.k.storage) call.k_out.storage->upload();
  call.cos->upload();
  call.sin->upload();
  if (call.positions) call.positions->upload();
}

/// Plans `call` in checked mode and launches it: the invalid_argument message it must throw.
std::string checked_launch_error(const RopeCall& call) {
  RopeDesc checked = call.desc;
  checked.checked = true;
  try {
    plan_rope(checked).launch(call.device_pointers());
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
    return e.what();
  }
  FAIL("a checked launch with a bad position must throw");
  return "";
}

/// Plans, launches and verifies one case; returns the mismatches.
Mismatches run_case(const Case& c, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  RopeCall call = build_call(c, rng);
  upload_all(call);
  const RopePlan plan = plan_rope(call.desc);
  plan.launch(call.device_pointers());
  Mismatches m = verify(call, plan.impl().data);
  if (c.hadamard_group != 0) return m;  // position 0 is the identity only without a transform
  if (const std::int64_t zero = position_zero_mismatches(call, plan.impl().data); zero > 0)
    m.note(std::to_string(zero) + " elements of position-0 tokens differ from their inputs");
  return m;
}

void check_case(const Case& c, std::uint64_t seed) {
  const Mismatches m = run_case(c, seed);
  INFO(c.name());
  INFO(m.first);
  CHECK(m.checked > 0);
  CHECK(m.count == 0);
}

/// tests/cases/rope-tests.txt, found next to the source tree (from the repo root or the build tree).
std::vector<std::string> case_file_lines() {
  for (const char* path : {"tests/cases/rope-tests.txt", "../tests/cases/rope-tests.txt", "../../tests/cases/rope-tests.txt"}) {
    std::ifstream in(path);
    if (!in) continue;
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);)
      if (!line.empty() && line[0] != '#') lines.push_back(line);
    return lines;
  }
  return {};
}

std::vector<std::int64_t> parse_list(const std::string& text) {
  std::vector<std::int64_t> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoll(item));
  return out;
}

std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(' '), b = s.find_last_not_of(' ');
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

}  // namespace

TEST_CASE("rope: the case file's shapes and strides, both styles, f16 bf16 f32, out of place and in place" *
          test::gpu_only()) {
  const auto lines = case_file_lines();
  REQUIRE(lines.size() >= 9);
  int runs = 0;
  for (const std::string& line : lines) {
    const auto bar1 = line.find('|'), bar2 = line.find('|', bar1 + 1);
    const auto shape = parse_list(trim(line.substr(0, bar1)));
    const std::string xs = trim(line.substr(bar1 + 1, bar2 - bar1 - 1)), ys = trim(line.substr(bar2 + 1));
    for (RopeStyle style : {RopeStyle::gptj, RopeStyle::neox})
      for (DType t : {DType::f16, DType::bf16, DType::f32}) {
        Case c;
        c.style = style;
        c.data = t;
        c.table = DType::f32;
        c.theta = 1e5;
        c.pattern = Pattern::arange;  // the file's positions: arange(seq) as i32
        c.position = DType::i32;
        if (shape.size() == 4) c.batch = shape[0];
        c.seq = shape[shape.size() - 3];
        c.heads = shape[shape.size() - 2];
        c.dhead = shape.back();
        c.x_strides = xs == "-" ? std::vector<std::int64_t>{} : parse_list(xs);
        c.y_strides = ys == "-" ? std::vector<std::int64_t>{} : parse_list(ys);
        check_case(c, 1000 + runs++);
        const auto contiguous = contiguous_strides(shape);
        const auto x_eff = c.x_strides.empty() ? contiguous : c.x_strides;
        const auto y_eff = c.y_strides.empty() ? contiguous : c.y_strides;
        if (x_eff == y_eff) {
          c.inplace = true;
          c.y_strides.clear();
          check_case(c, 1000 + runs++);
        }
      }
  }
  CHECK(runs >= 9 * 6);
}

TEST_CASE("rope: styles x data dtypes x table dtypes x position dtypes over head dims, heads, seq, batch, "
          "strides and position patterns" * test::gpu_only()) {
  const std::int64_t dheads[] = {8, 32, 64, 80, 96, 112, 128, 160, 192, 256, 512, 18, 38};
  const std::int64_t heads[] = {1, 4, 7, 17, 32, 73};
  const std::int64_t seqs[] = {1, 2, 11, 199, 217, 781};
  const std::int64_t batches[] = {0, 1, 2, 5, 32};
  const DType positions[] = {DType::i8, DType::i16, DType::i32, DType::i64, DType::u8, DType::u16, DType::u32, DType::u64};
  const Layout layouts[] = {Layout::contiguous, Layout::swapped, Layout::padded, Layout::packed};
  const Pattern patterns[] = {Pattern::zero, Pattern::last, Pattern::permuted, Pattern::repeated, Pattern::random, Pattern::arange_offset};
  int n = 0;
  for (RopeStyle style : {RopeStyle::gptj, RopeStyle::neox})
    for (DType data : {DType::f16, DType::bf16, DType::f32, DType::f64})
      for (DType table : {data, data == DType::f64 ? DType::f64 : DType::f32})
        for (int p = 0; p <= 8; ++p, ++n) {
          Case c;
          c.style = style;
          c.data = data;
          c.table = table;
          c.position = p < 8 ? std::optional(positions[p]) : std::nullopt;
          c.dhead = dheads[n % 13];
          const std::int64_t rotary_choices[] = {c.dhead, c.dhead / 2, c.dhead / 4};
          c.rotary = rotary_choices[(n / 13) % 3];
          if (c.rotary % 2 != 0) c.rotary = c.dhead;
          c.heads = heads[n % 6];
          c.k_heads = n % 3 == 0 ? -1 : heads[(n / 6) % 6];
          c.seq = seqs[(n / 2) % 6];
          c.batch = batches[n % 5];
          c.layout = layouts[(n / 5) % 4];
          if (c.layout == Layout::swapped && c.batch == 0) c.batch = 2;
          c.pattern = patterns[n % 6];
          c.positions_batched = c.batch > 0 && n % 2 == 0;
          c.inplace = n % 4 == 1;
          c.inverse = n % 7 == 3;
          // Keep each case under ~2M elements.
          while (std::max<std::int64_t>(c.batch, 1) * c.seq * (c.heads + std::max<std::int64_t>(c.k_heads, 0)) * c.dhead >
                 (std::int64_t{1} << 21)) {
            if (c.seq > 1) c.seq = (c.seq + 1) / 2;
            else if (c.batch > 1) c.batch /= 2;
            else c.heads = (c.heads + 1) / 2;
          }
          check_case(c, 5000 + static_cast<std::uint64_t>(n));
        }
  CHECK(n == 2 * 4 * 2 * 9);
}

TEST_CASE("rope: model shapes, q and k with different head counts, long positions" * test::gpu_only()) {
  const std::pair<std::int64_t, std::int64_t> models[] = {{256, 64}, {96, 24}, {80, 32}, {128, 64}};
  int n = 0;
  for (auto [D, R] : models)
    for (RopeStyle style : {RopeStyle::gptj, RopeStyle::neox}) {
      Case c;
      c.style = style;
      c.dhead = D;
      c.rotary = R;
      c.batch = 2;
      c.seq = 37;
      c.heads = 32;
      c.k_heads = 8;
      c.position = DType::i64;
      c.positions_batched = true;
      check_case(c, 9000 + static_cast<std::uint64_t>(n++));
    }
  Case many_q;  // 73 q heads, 1 k head
  many_q.batch = 3;
  many_q.seq = 19;
  many_q.heads = 73;
  many_q.k_heads = 1;
  many_q.dhead = 128;
  check_case(many_q, 9100);
  Case long_seq;  // seq 8192
  long_seq.seq = 8192;
  long_seq.heads = 4;
  long_seq.k_heads = 2;
  long_seq.dhead = 64;
  long_seq.position = std::nullopt;
  check_case(long_seq, 9101);

  // Positions up to 131071 with f32 tables at theta 5e5 and 1e6.
  for (double theta : {5e5, 1e6}) {
    std::mt19937_64 rng(9200);
    Case c;
    c.batch = 2;
    c.seq = 64;
    c.heads = 8;
    c.k_heads = 2;
    c.dhead = 128;
    c.position = DType::i64;
    c.positions_batched = true;
    c.theta = theta;
    RopeCall call = build_call(c, rng);
    RopeTableOptions options;
    options.theta = theta;
    const RopeTables tables = rope_tables(131072, 128, DType::f32, options);
    call.cos = std::make_shared<Storage>(DType::f32, 131072 * 64);
    call.sin = std::make_shared<Storage>(DType::f32, 131072 * 64);
    call.cos->host = tables.cos;
    call.sin->host = tables.sin;
    call.desc.table = tables.desc();
    for (std::int64_t i = 0; i < 128; ++i) {
      const std::int64_t v = i == 0 ? 131071 : static_cast<std::int64_t>(rng() % 131072);
      std::memcpy(call.positions->host.data() + i * 8, &v, 8);
    }
    upload_all(call);
    const RopePlan plan = plan_rope(call.desc);
    plan.launch(call.device_pointers());
    const Mismatches m = verify(call, plan.impl().data);
    INFO("theta " << theta << ": " << m.first);
    CHECK(m.count == 0);
  }
}

TEST_CASE("rope: inverse(forward(x)) returns x" * test::gpu_only()) {
  // Two roundings to the data dtype, each at most half a unit of the rotated pair's magnitude.
  for (DType t : {DType::f32, DType::bf16}) {
    std::mt19937_64 rng(77);
    Case c;
    c.data = t;
    c.batch = 2;
    c.seq = 50;
    c.heads = 6;
    c.k_heads = 2;
    c.dhead = 128;
    c.rotary = 64;
    c.inplace = true;
    RopeCall call = build_call(c, rng);
    upload_all(call);
    const RopePlan forward = plan_rope(call.desc);
    RopeDesc back = call.desc;
    back.inverse = true;
    const RopePlan inverse = plan_rope(back);
    forward.launch(call.device_pointers());
    inverse.launch(call.device_pointers());
    const double unit = t == DType::f32 ? 1e-6 : std::ldexp(1.0, -7);
    for (const Storage* storage : {call.x.storage.get(), call.k.storage.get()}) {
      const std::vector<std::uint8_t> after = storage->download();
      std::int64_t bad = 0;
      for (std::int64_t e = 0; e < storage->elements; ++e) {
        const std::int64_t i = e % 128, partner = e + (i < 32 ? 32 : -32);
        const double a = detail::load_as_double(storage->host.data(), t, e);
        const double b = detail::load_as_double(after.data(), t, e);
        if (i >= 64) {
          bad += raw_bits(storage->host.data(), t, e) != raw_bits(after.data(), t, e);
          continue;
        }
        const double magnitude = std::fabs(a) + std::fabs(detail::load_as_double(storage->host.data(), t, partner));
        bad += !(std::fabs(a - b) <= unit * magnitude);
      }
      INFO(dtype_name(t));
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("rope, multi-axis positions: sections, interleaved and blocks rules against the float64 reference, with a "
          "bad axis position and checked mode" * test::gpu_only()) {
  std::uint64_t seed = 1300;
  // Qwen2-VL M-RoPE (NeoX, sections 16/24/24 of R/2 = 64), Qwen3-VL interleaved (24/20/20), and
  // sections that split chunks (GPT-J, 4 axes over R/2 = 24, some empty), 3-D and 4-D, q and k.
  struct AxisCase {
    RopeStyle style;
    DType data, position;
    RopeAxisRule rule;
    std::vector<std::int64_t> sections;
    std::int64_t batch, dhead, rotary;
    bool batched, inverse;
    bool inplace = false, token_major = false;
  };
  const AxisCase cases[] = {
      {RopeStyle::neox, DType::bf16, DType::i64, RopeAxisRule::sections, {16, 24, 24}, 2, 128, 0, true, false},
      {RopeStyle::neox, DType::f16, DType::i32, RopeAxisRule::interleaved, {24, 20, 20}, 2, 128, 0, false, false},
      {RopeStyle::gptj, DType::f32, DType::u16, RopeAxisRule::sections, {5, 0, 11, 8}, 0, 64, 48, false, true},
      {RopeStyle::neox, DType::f64, DType::i8, RopeAxisRule::interleaved, {6, 5, 5}, 0, 40, 32, false, false},
      {RopeStyle::gptj, DType::bf16, DType::i16, RopeAxisRule::sections, {3, 29}, 3, 64, 0, true, false},
      // ChatGLM 2-D (NeoX halves of 32 pairs), blocks that cut 16-byte chunks, GPT-J blocks (FLUX: 8/28/28).
      {RopeStyle::neox, DType::bf16, DType::i64, RopeAxisRule::blocks, {32, 32}, 2, 128, 0, true, false},
      {RopeStyle::neox, DType::f16, DType::i32, RopeAxisRule::blocks, {4, 6, 2, 12}, 0, 64, 48, false, true},
      {RopeStyle::gptj, DType::bf16, DType::i32, RopeAxisRule::blocks, {8, 28, 28}, 2, 128, 0, false, false},
      // In place, positions token-major ([T, axes] arrays viewed axis-first), the other position
      // dtypes, and one axis (1-D rope through [1, ...] positions).
      {RopeStyle::neox, DType::bf16, DType::u8, RopeAxisRule::interleaved, {24, 20, 20}, 2, 128, 0, true, false, true, true},
      {RopeStyle::neox, DType::f16, DType::u32, RopeAxisRule::sections, {16, 24, 24}, 0, 128, 0, false, true, false, true},
      {RopeStyle::gptj, DType::bf16, DType::u64, RopeAxisRule::blocks, {8, 28, 28}, 2, 128, 0, true, false, true, false},
      {RopeStyle::neox, DType::bf16, DType::i64, RopeAxisRule::sections, {64}, 2, 128, 0, true, false, false, true},
      {RopeStyle::gptj, DType::f32, DType::i32, RopeAxisRule::blocks, {32}, 0, 64, 0, false, true, true, false},
  };
  for (const AxisCase& a : cases) {
    Case c;
    c.style = a.style;
    c.data = a.data;
    c.table = a.data == DType::f64 ? DType::f64 : DType::f32;
    c.position = a.position;
    c.positions_batched = a.batched;
    c.batch = a.batch;
    c.seq = 7;
    c.heads = 4;
    c.k_heads = 2;
    c.dhead = a.dhead;
    c.rotary = a.rotary;
    c.inverse = a.inverse;
    c.inplace = a.inplace;
    c.positions_token_major = a.token_major;
    c.axis_rule = a.rule;
    c.axis_sections = a.sections;
    check_case(c, ++seed);
  }

  // One axis of token (1, 4) past the table: the whole token is NaN, checked mode names its positions.
  Case c;
  c.batch = 2;
  c.seq = 6;
  c.heads = 2;
  c.k_heads = 1;
  c.dhead = 64;
  c.position = DType::i32;
  c.positions_batched = true;
  c.axis_rule = RopeAxisRule::sections;
  c.axis_sections = {8, 12, 12};
  std::mt19937_64 rng(77);
  RopeCall call = build_call(c, rng);
  const auto rows = static_cast<std::int32_t>(call.desc.table.shape[0]);
  std::memcpy(call.positions->host.data() + (2 * 2 * 6 + 1 * 6 + 4) * 4, &rows, 4);  // axis 2, token (1, 4)
  upload_all(call);
  const RopePlan plan = plan_rope(call.desc);
  plan.launch(call.device_pointers());
  const Mismatches m = verify(call, plan.impl().data);
  INFO(m.first);
  CHECK(m.count == 0);
  const std::string message = checked_launch_error(call);
  INFO(message);
  CHECK(message.find("positions[axes, batch 1, seq 4] = (") != std::string::npos);
  CHECK(message.find(", " + std::to_string(rows) + "): some axis is outside the table") != std::string::npos);
}

TEST_CASE("rope: positions outside the table give NaN tokens and no out-of-bounds access; checked mode names "
          "the first" * test::gpu_only()) {
  for (DType pos : {DType::i32, DType::u64, DType::i8}) {
    std::mt19937_64 rng(31);
    Case c;
    c.batch = 2;
    c.seq = 9;
    c.heads = 3;
    c.k_heads = 2;
    c.dhead = 64;
    c.rotary = 32;
    c.position = pos;
    c.positions_batched = true;
    RopeCall call = build_call(c, rng);
    // Token (1, 3) one row past the end, (0, 5) negative (or huge unsigned), (1, 8) far beyond.
    const std::int64_t rows = call.desc.table.shape[0];
    auto set = [&](std::int64_t b, std::int64_t s, std::int64_t v) {
      std::memcpy(call.positions->host.data() + (b * 9 + s) * dtype_size(pos), &v, dtype_size(pos));
    };
    set(1, 3, rows);
    set(0, 5, -1);
    set(1, 8, pos == DType::i8 ? 127 : 1 << 30);
    upload_all(call);
    const RopePlan plan = plan_rope(call.desc);
    plan.launch(call.device_pointers());
    const Mismatches m = verify(call, plan.impl().data);
    INFO(dtype_name(pos) << ": " << m.first);
    CHECK(m.count == 0);

    const std::string message = checked_launch_error(call);
    INFO(message);
    const std::string minus_one = pos == DType::u64 ? "18446744073709551615" : "-1";
    CHECK(message.find("positions[batch 0, seq 5] = " + minus_one + " is outside the table rows [0, " +
                       std::to_string(rows) + ")") != std::string::npos);
  }
  // Without positions: seq index + offset past the table.
  Case c;
  c.seq = 20;
  c.heads = 2;
  c.position = std::nullopt;
  std::mt19937_64 rng(5);
  RopeCall call = build_call(c, rng);
  call.desc.checked = true;
  upload_all(call);
  const RopePlan plan = plan_rope(call.desc);
  call.offset = 0;
  CHECK_NOTHROW(plan.launch(call.device_pointers()));
  call.offset = call.desc.table.shape[0] - 10;
  try {
    plan.launch(call.device_pointers());
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("(seq 10 + offset") != std::string::npos);
  }
}

TEST_CASE("rope: a decode loop from seq 1 to 4096 compiles its kernel once" * test::gpu_only()) {
  std::mt19937_64 rng(11);
  Case c;
  c.batch = 1;
  c.seq = 4096;
  c.heads = 4;
  c.k_heads = 2;
  c.dhead = 64;
  c.position = DType::i64;
  c.positions_batched = true;
  c.pattern = Pattern::random;
  RopeCall call = build_call(c, rng);
  upload_all(call);
  std::uint64_t loads_after_first = 0;
  for (std::int64_t seq = 1; seq <= 4096; ++seq) {
    RopeDesc d = call.desc;
    d.x.shape[1] = d.y->shape[1] = d.k->shape[1] = d.k_out->shape[1] = seq;
    d.positions = TensorDesc{{1, seq}, {4096, 1}, DType::i64};
    const Counters before = counters();
    plan_rope(d).launch(call.device_pointers());
    const Counters after = counters();
    if (seq > 1) loads_after_first += (after.compiles - before.compiles) + (after.disk_hits - before.disk_hits);
  }
  CHECK(loads_after_first == 0);
  const Mismatches m = verify(call, plan_rope(call.desc).impl().data);  // the last step covered every token
  INFO(m.first);
  CHECK(m.count == 0);
}

TEST_CASE("rope: more than 2^31 elements use 64-bit offsets and stay right" * test::gpu_only()) {
  // f16 in place, [1, 2^21 + 8, 8, 128]: 2^31 + 8192 elements (4 GiB); inputs repeat a random block.
  const std::int64_t seq = (std::int64_t{1} << 21) + 8, H = 8, D = 128, block_tokens = 8192;
  const std::int64_t row = H * D;
  RopeDesc d;
  d.style = RopeStyle::neox;
  d.x = {{1, seq, H, D}, {}, DType::f16};
  d.inplace = true;
  const std::int64_t rows = 4096;
  const RopeTables tables = rope_tables(rows, D, DType::f32);
  d.table = tables.desc();
  d.positions = TensorDesc{{seq}, {}, DType::i32};
  const RopePlan plan = plan_rope(d);
  CHECK(plan.impl().data.spec.wide_index);

  Storage block(DType::f16, block_tokens * row);
  std::mt19937_64 rng(2024);
  fill_random(block, rng);
  DeviceBuffer x(static_cast<std::size_t>(seq * row) * 2);
  for (std::int64_t t = 0; t < seq; t += block_tokens)
    x.upload(block.host.data(), static_cast<std::size_t>(std::min(block_tokens, seq - t) * row) * 2,
             static_cast<std::size_t>(t * row) * 2);
  std::vector<std::int32_t> positions(static_cast<std::size_t>(seq));
  for (auto& p : positions) p = static_cast<std::int32_t>(rng() % rows);
  DeviceBuffer pos(positions.size() * 4), cos(tables.cos.size()), sin(tables.sin.size());
  pos.upload(positions.data(), positions.size() * 4);
  cos.upload(tables.cos.data(), tables.cos.size());
  sin.upload(tables.sin.data(), tables.sin.size());
  plan.launch({x.get(), x.get(), nullptr, nullptr, cos.get(), sin.get(), pos.get(), 0});

  // Check the first and last tokens and a spread between against the reference of each token's input.
  RopeDesc one = d;  // the reference reads one token laid out as [1, 1, H, D]
  one.x.shape = {1, 1, H, D};
  one.positions = TensorDesc{{1}, {}, DType::i32};
  const plan::RopePlanData one_plan = plan::plan_rope_data(one);
  std::vector<double> ref;
  std::vector<std::uint16_t> got(static_cast<std::size_t>(row));
  int bad = 0, checked = 0;
  for (std::int64_t t = 0; t < seq; t += (t < 64 || t > seq - 64) ? 1 : 2039) {
    const std::int32_t p = positions[static_cast<std::size_t>(t)];
    detail::rope_reference_token(one_plan,
                                 {block.host.data() + (t % block_tokens) * row * 2, nullptr, nullptr, nullptr,
                                  tables.cos.data(), tables.sin.data(), &p, 0},
                                 0, 0, ref);
    x.download(got.data(), got.size() * 2, static_cast<std::size_t>(t * row) * 2);
    for (std::int64_t i = 0; i < row; ++i) {
      const double v = detail::load_as_double(got.data(), DType::f16, i);
      const double r = ref[static_cast<std::size_t>(i)];
      bad += !(std::fabs(v - r) <= tolerance(DType::f16, r, 4.0));
    }
    ++checked;
  }
  CHECK(checked > 1000);
  CHECK(bad == 0);
}

TEST_CASE("rope: batch or heads above 65535" * test::gpu_only()) {
  Case heads;
  heads.batch = 1;
  heads.seq = 1;
  heads.heads = 70000;
  heads.k_heads = 3;
  heads.dhead = 64;
  check_case(heads, 424242);
  Case batch;
  batch.batch = 70000;
  batch.seq = 1;
  batch.heads = 2;
  batch.k_heads = 1;
  batch.dhead = 64;
  batch.data = DType::f16;
  batch.position = DType::i64;
  batch.positions_batched = true;
  check_case(batch, 434343);
}

TEST_CASE("rope: misaligned pointers take the scalar variant; one-shot rope and the C API agree" * test::gpu_only()) {
  std::mt19937_64 rng(3);
  Case c;
  c.batch = 2;
  c.seq = 33;
  c.heads = 5;
  c.k_heads = 2;
  c.dhead = 128;
  c.position = DType::i32;
  RopeCall call = build_call(c, rng);
  // Shift x one element into a larger allocation: rows no longer start on 16 bytes.
  auto shifted = std::make_shared<Storage>(c.data, call.x.storage->elements + 1);
  std::copy(call.x.storage->host.begin(), call.x.storage->host.end(), shifted->host.begin() + 2);
  call.x = {shifted, 1, call.x.desc};
  upload_all(call);
  const RopePlan plan = plan_rope(call.desc);
  REQUIRE(plan.impl().scalar_kernel != nullptr);
  plan.launch(call.device_pointers());
  Mismatches m = verify(call, plan.impl().data);
  INFO(m.first);
  CHECK(m.count == 0);

  // One-shot C++ and the C API on fresh poison.
  for (int api = 0; api < 2; ++api) {
    std::fill(call.y.storage->host.begin(), call.y.storage->host.end(), 0xff);
    std::fill(call.k_out.storage->host.begin(), call.k_out.storage->host.end(), 0xff);
    call.y.storage->upload();
    call.k_out.storage->upload();
    if (api == 0) {
      rope(call.desc, call.device_pointers());
    } else {
      const auto& x = call.desc.x;
      const auto& k = *call.desc.k;
      const auto& t = call.desc.table;
      const auto& p = *call.desc.positions;
      sj_rope_desc cd = {};
      cd.style = SJ_ROPE_NEOX;
      cd.x = {4, x.shape.data(), x.strides.empty() ? nullptr : x.strides.data(), SJ_BF16, 0};
      cd.k = {4, k.shape.data(), k.strides.empty() ? nullptr : k.strides.data(), SJ_BF16, 0};
      cd.table = {2, t.shape.data(), nullptr, SJ_F32, 0};
      cd.positions = {1, p.shape.data(), nullptr, SJ_I32, 0};
      const RopePointers dp = call.device_pointers();
      const sj_rope_pointers cp = {dp.x, dp.y, dp.k, dp.k_out, dp.cos, dp.sin, dp.positions, 0, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
      sj_rope_plan cplan = nullptr;
      REQUIRE(sj_rope_plan_create(&cplan, &cd) == SJ_OK);
      CHECK(sj_rope_plan_launch(cplan, &cp, nullptr) == SJ_OK);
      CHECK(sj_rope_plan_destroy(cplan) == SJ_OK);
    }
    m = verify(call, plan.impl().data);
    INFO("api " << api << ": " << m.first);
    CHECK(m.count == 0);
  }
}

// ---- rope fused with a Hadamard transform ---------------------------------------------------

namespace {

Case fused_case(RopeStyle style, DType data, HadamardOrder order, std::int64_t heads, std::int64_t k_heads,
                std::int64_t dhead, std::int64_t group) {
  Case c;
  c.style = style;
  c.data = data;
  c.table = data == DType::f64 ? DType::f64 : DType::f32;
  c.batch = 2;
  c.seq = 5;
  c.heads = heads;
  c.k_heads = k_heads;
  c.dhead = dhead;
  c.hadamard_group = group;
  c.hadamard_order = order;
  return c;
}

constexpr HadamardOrder kOrders[] = {HadamardOrder::rope_then_hadamard, HadamardOrder::hadamard_then_rope};

}  // namespace

TEST_CASE("rope + hadamard: styles x data dtypes x orders with GQA, against the float64 reference" *
          test::gpu_only()) {
  std::uint64_t seed = 900;
  for (RopeStyle style : {RopeStyle::gptj, RopeStyle::neox})
    for (DType data : {DType::f16, DType::bf16, DType::f32, DType::f64})
      for (HadamardOrder order : kOrders) check_case(fused_case(style, data, order, 8, 4, 64, 4), ++seed);
}

TEST_CASE("rope + hadamard: size classes, strided and in-place layouts, partial rotary, 3-D, position dtypes, "
          "inverse" * test::gpu_only()) {
  std::uint64_t seed = 1000;
  for (RopeStyle style : {RopeStyle::gptj, RopeStyle::neox})
    for (HadamardOrder order : kOrders) {
      // n = 128 (several rows per warp), 4096 (bit passes across warps), 768, 2560 and 1792 (m-point factors),
      // 3072 (m-point bit passes across warps, stored from the last pass's layout when the transform runs last).
      for (auto [heads, dhead, group] : {std::array<std::int64_t, 3>{2, 128, 1}, {32, 128, 32}, {12, 64, 12},
                                         {20, 128, 20}, {28, 64, 28}, {24, 128, 24}}) {
        Case c = fused_case(style, DType::f32, order, heads, heads, dhead, group);
        c.batch = 1;
        c.seq = 3;
        check_case(c, ++seed);
      }
      for (Layout layout : {Layout::padded, Layout::swapped, Layout::packed}) {
        Case c = fused_case(style, DType::bf16, order, 6, 2, 64, 2);
        c.layout = layout;
        c.inplace = layout == Layout::packed;
        check_case(c, ++seed);
      }
      Case partial = fused_case(style, DType::f16, order, 4, 2, 64, 2);
      partial.rotary = 32;
      partial.inverse = true;
      check_case(partial, ++seed);
      Case three_d = fused_case(style, DType::bf16, order, 4, 2, 96, 2);  // n = 192 = 12 x 16
      three_d.batch = 0;
      three_d.seq = 7;
      three_d.rotary = 48;
      check_case(three_d, ++seed);
      for (std::optional<DType> pos : {std::optional<DType>{DType::u8}, {DType::i16}, {DType::u64}, {std::nullopt}}) {
        Case c = fused_case(style, DType::bf16, order, 4, 4, 64, 4);
        c.position = pos;
        c.positions_batched = pos == DType::i16;
        check_case(c, ++seed);
      }
    }
}

TEST_CASE("rope + hadamard: the inverse plan undoes the forward one, in either order and with a given scale" *
          test::gpu_only()) {
  for (HadamardOrder order : kOrders) {
    std::mt19937_64 rng(order == HadamardOrder::rope_then_hadamard ? 7 : 8);
    Case c = fused_case(RopeStyle::neox, DType::f32, order, 8, 4, 128, 4);
    c.inplace = true;
    RopeCall call = build_call(c, rng);
    call.desc.hadamard_scale = 0.25;
    upload_all(call);
    RopeDesc back = call.desc;
    back.inverse = true;
    plan_rope(call.desc).launch(call.device_pointers());
    plan_rope(back).launch(call.device_pointers());
    for (const Storage* storage : {call.x.storage.get(), call.k.storage.get()}) {
      const std::vector<std::uint8_t> after = storage->download();
      std::int64_t bad = 0;
      for (std::int64_t e = 0; e < storage->elements; ++e) {
        const double a = detail::load_as_double(storage->host.data(), DType::f32, e);
        const double b = detail::load_as_double(after.data(), DType::f32, e);
        bad += !(std::fabs(a - b) <= 2e-5);  // |x| <= 2 and n = 512: a few f32 units of the row's norm
      }
      INFO(hadamard_order_name(order));
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("rope + hadamard: one launch equals rope and hadamard launched one after the other" * test::gpu_only()) {
  for (HadamardOrder order : kOrders) {
    std::mt19937_64 rng(41);
    Case c = fused_case(RopeStyle::gptj, DType::f32, order, 8, 8, 64, 8);
    c.k_heads = -1;
    RopeCall call = build_call(c, rng);
    upload_all(call);
    plan_rope(call.desc).launch(call.device_pointers());
    const std::vector<std::uint8_t> fused = call.y.storage->download();

    // The same steps as two plans, through a temporary of y's layout.
    RopeDesc plain = call.desc;
    plain.hadamard_group = 0;
    plain.hadamard_order = HadamardOrder::rope_then_hadamard;
    HadamardDesc transform;
    transform.x = *call.desc.y;
    transform.group = c.hadamard_group;
    const bool hadamard_first = order == HadamardOrder::hadamard_then_rope;
    if (hadamard_first) transform.x = call.desc.x;
    transform.y = *call.desc.y;
    const HadamardPlan hadamard = plan_hadamard(transform);
    View temp = own_view(*call.desc.y);
    temp.storage->upload();
    RopePointers p = call.device_pointers();
    if (hadamard_first) {
      hadamard.launch({call.x.device(), temp.device()});
      plain.x = *call.desc.y;
      p.x = temp.device();
      plan_rope(plain).launch(p);
    } else {
      p.y = temp.device();
      plan_rope(plain).launch(p);
      hadamard.launch({temp.device(), call.y.device()});
    }
    const std::vector<std::uint8_t> separate = call.y.storage->download();
    std::int64_t bad = 0;
    for (std::int64_t e = 0; e < call.y.storage->elements; ++e)
      bad += !(std::fabs(detail::load_as_double(fused.data(), DType::f32, e) -
                         detail::load_as_double(separate.data(), DType::f32, e)) <= 2e-5);
    INFO(hadamard_order_name(order));
    CHECK(bad == 0);
  }
}

TEST_CASE("rope + hadamard: bad positions give NaN rows and checked mode names the token; misaligned pointers "
          "take the scalar variant" * test::gpu_only()) {
  for (HadamardOrder order : kOrders) {
    std::mt19937_64 rng(61);
    Case c = fused_case(RopeStyle::neox, DType::bf16, order, 4, 2, 64, 2);
    c.position = DType::i32;
    c.positions_batched = true;
    RopeCall call = build_call(c, rng);
    const std::int64_t rows = call.desc.table.shape[0];
    const std::int32_t bad_position = static_cast<std::int32_t>(rows);
    std::memcpy(call.positions->host.data() + (1 * c.seq + 2) * 4, &bad_position, 4);  // token (1, 2)
    upload_all(call);
    const RopePlan plan = plan_rope(call.desc);
    plan.launch(call.device_pointers());
    Mismatches m = verify(call, plan.impl().data);
    INFO(hadamard_order_name(order) << ": " << m.first);
    CHECK(m.count == 0);
    CHECK(checked_launch_error(call).find("positions[batch 1, seq 2] = " + std::to_string(rows)) != std::string::npos);

    // x one element into a larger allocation: rows no longer start on 16 bytes.
    auto shifted = std::make_shared<Storage>(c.data, call.x.storage->elements + 1);
    std::copy(call.x.storage->host.begin(), call.x.storage->host.end(), shifted->host.begin() + 2);
    call.x = {shifted, 1, call.x.desc};
    std::fill(call.y.storage->host.begin(), call.y.storage->host.end(), 0xff);
    upload_all(call);
    REQUIRE(plan.impl().scalar_kernel != nullptr);
    plan.launch(call.device_pointers());
    m = verify(call, plan.impl().data);
    INFO("misaligned: " << m.first);
    CHECK(m.count == 0);
  }
}

/// A quantized fused call: which outputs are 8-bit codes, and how many elements into their storage
/// the code views start (1 and 3 leave them misaligned).
struct QuantCase {
  Case c;
  RopeQuantize q = RopeQuantize::none, k = RopeQuantize::none;
  std::int64_t code_offset = 0;
};

/// Runs a fused call whose q and/or k outputs are codes, with one token outside the table: q's codes
/// (or floats) in rows padded by 32 elements, k's contiguous, q's scales strided [B, S, Gq] inside
/// [B, S, Gq + 1]. Every code dequantizes to the float64 result within one step of its row's scale
/// (scale = absmax / 127 or / 448), the bad token's scales are NaN, and padding keeps its poison.
void check_quantized(const QuantCase& qc, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Case c = qc.c;
  c.position = DType::i32;
  c.positions_batched = true;
  RopeCall call = build_call(c, rng);
  const std::int32_t bad_position = static_cast<std::int32_t>(call.desc.table.shape[0]);
  std::memcpy(call.positions->host.data() + (1 * c.seq + 3) * 4, &bad_position, 4);  // token (1, 3)
  const std::int64_t G = c.hadamard_group, D = c.dhead, n = G * D, pitch = D + 32;
  const std::int64_t q_groups = c.heads / G, k_groups = c.k_heads / G;
  auto output_type = [&](RopeQuantize z) { return z == RopeQuantize::none ? c.data : z == RopeQuantize::int8 ? DType::i8 : DType::u8; };
  const DType q_type = output_type(qc.q), k_type = output_type(qc.k);
  const TensorDesc q_desc{call.x.desc.shape, {c.seq * c.heads * pitch, c.heads * pitch, pitch, 1}, q_type};
  const TensorDesc k_desc{call.k.desc.shape, {}, k_type};
  View q_out{std::make_shared<Storage>(q_type, span(q_desc) + qc.code_offset), qc.code_offset, q_desc};
  View k_out{std::make_shared<Storage>(k_type, span(k_desc) + qc.code_offset), qc.code_offset, k_desc};
  auto q_scales = std::make_shared<Storage>(DType::f32, 2 * c.seq * (q_groups + 1));
  auto k_scales = std::make_shared<Storage>(DType::f32, 2 * c.seq * k_groups);
  for (auto* storage : {q_out.storage.get(), k_out.storage.get(), q_scales.get(), k_scales.get()}) {
    std::fill(storage->host.begin(), storage->host.end(), 0x5a);
    storage->upload();
  }
  RopeDesc desc = call.desc;
  desc.y = q_out.desc;
  desc.k_out = k_out.desc;
  desc.q_quantize = qc.q;
  desc.k_quantize = qc.k;
  if (qc.q != RopeQuantize::none) desc.q_scale = TensorDesc{{2, c.seq, q_groups}, {c.seq * (q_groups + 1), q_groups + 1, 1}, DType::f32};
  upload_all(call);
  const RopePlan plan = plan_rope(desc);
  RopePointers p = call.device_pointers();
  p.y = q_out.device();
  p.k_out = k_out.device();
  if (qc.q != RopeQuantize::none) p.q_scale = q_scales->device.get();
  if (qc.k != RopeQuantize::none) p.k_scale = k_scales->device.get();
  plan.launch(p);
  const std::vector<std::uint8_t> q_got = q_out.storage->download(), k_got = k_out.storage->download();
  const std::vector<std::uint8_t> qs_got = q_scales->download(), ks_got = k_scales->download();

  const plan::RopePlanData& data = plan.impl().data;
  std::int64_t checked = 0, bad = 0;
  std::string first;
  auto fail = [&](const std::string& what) {
    if (bad++ == 0) first = what;
  };
  std::vector<double> ref;
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t s = 0; s < c.seq; ++s) {
      detail::rope_reference_token(data, call.host_pointers(), b, s, ref);
      for (std::int64_t g = 0; g < q_groups + k_groups; ++g) {
        const bool is_q = g < q_groups;
        const RopeQuantize z = is_q ? qc.q : qc.k;
        const View& out = is_q ? q_out : k_out;
        const std::vector<std::uint8_t>& got = is_q ? q_got : k_got;
        const std::int64_t first_head = (is_q ? g : g - q_groups) * G;
        const bool bad_token = std::isnan(ref[static_cast<std::size_t>(g * n)]);
        if (z == RopeQuantize::none) {  // float output, as unquantized fused calls write it
          for (std::int64_t i = 0; i < n; ++i) {
            const double want = ref[static_cast<std::size_t>(g * n + i)];
            const double value = detail::load_as_double(got.data(), c.data, out.at(b, s, first_head + i / D, i % D));
            ++checked;
            if (!(bad_token ? std::isnan(value) : std::fabs(value - want) <= tolerance(c.data, want, 1.0)))
              fail("float value " + std::to_string(i) + " of group " + std::to_string(g) + ": " + std::to_string(value));
          }
          continue;
        }
        const std::int64_t scale_at = is_q ? (b * c.seq + s) * (q_groups + 1) + g : (b * c.seq + s) * k_groups + g - q_groups;
        const double scale = detail::load_as_double((is_q ? qs_got : ks_got).data(), DType::f32, scale_at);
        double absmax = 0;
        for (std::int64_t i = 0; i < n; ++i) absmax = std::fmax(absmax, std::fabs(ref[static_cast<std::size_t>(g * n + i)]));
        const double limit = z == RopeQuantize::int8 ? 127 : 448;
        ++checked;
        if (bad_token) {
          if (!std::isnan(scale)) fail("bad token's scale is not NaN");
          continue;
        }
        if (!(std::fabs(scale - absmax / limit) <= 1e-5 * absmax / limit))
          fail("scale " + std::to_string(scale) + ", want " + std::to_string(absmax / limit));
        for (std::int64_t i = 0; i < n; ++i) {
          const std::int64_t o = out.at(b, s, first_head + i / D, i % D);
          const double want = ref[static_cast<std::size_t>(g * n + i)];
          const double value = detail::rope_code_value(z, got[static_cast<std::size_t>(o)], scale);
          const double step = detail::rope_code_step(z, want, scale);
          ++checked;
          if (!(std::fabs(value - want) <= step + 1e-5 * absmax))
            fail("token (" + std::to_string(b) + "," + std::to_string(s) + ") group " + std::to_string(g) + " value " +
                 std::to_string(i) + ": " + std::to_string(value) + ", want " + std::to_string(want));
        }
      }
    }
  // Padding past each q row, the code views' first elements and the unused scale column keep their
  // poison.
  const std::size_t q_bytes = size_of(q_type);
  for (std::int64_t e = 0; e < q_out.storage->elements; ++e)
    if (e < qc.code_offset || (e - qc.code_offset) % pitch >= D)
      for (std::size_t byte = 0; byte < q_bytes; ++byte) bad += q_got[static_cast<std::size_t>(e) * q_bytes + byte] != 0x5a;
  for (std::int64_t e = 0; e < qc.code_offset * static_cast<std::int64_t>(size_of(k_type)); ++e)
    bad += k_got[static_cast<std::size_t>(e)] != 0x5a;
  if (qc.q != RopeQuantize::none)
    for (std::int64_t e = q_groups; e < 2 * c.seq * (q_groups + 1); e += q_groups + 1)
      bad += std::memcmp(&qs_got[static_cast<std::size_t>(e * 4)], &q_scales->host[static_cast<std::size_t>(e * 4)], 4) != 0;
  INFO(c.name() << " q " << rope_quantize_name(qc.q) << " k " << rope_quantize_name(qc.k) << " codes at +"
                << qc.code_offset << ": " << first);
  const std::int64_t valid_tokens = 2 * c.seq - 1;
  const std::int64_t per_token = (qc.q == RopeQuantize::none ? 0 : q_groups) + (qc.k == RopeQuantize::none ? 0 : k_groups) +
                                 (q_groups + k_groups) * n;
  const std::int64_t bad_token = (qc.q == RopeQuantize::none ? q_groups * n : q_groups) +
                                 (qc.k == RopeQuantize::none ? k_groups * n : k_groups);
  CHECK(checked == valid_tokens * per_token + bad_token);  // every group and value; the bad token's scales only
  CHECK(bad == 0);
}

TEST_CASE("rope + hadamard: int8 and fp8 e4m3 outputs dequantize to the float64 result within one step, with "
          "strided scales and a token outside the table" * test::gpu_only()) {
  std::uint64_t seed = 71;
  for (RopeQuantize quantize : {RopeQuantize::int8, RopeQuantize::fp8_e4m3})
    for (HadamardOrder order : kOrders)
      check_quantized({fused_case(RopeStyle::neox, DType::bf16, order, 8, 4, 128, 4), quantize, quantize, 0}, ++seed);
}

TEST_CASE("rope + hadamard, quantized: rows across warps, k or q alone, GPT-J, misaligned codes" * test::gpu_only()) {
  std::uint64_t seed = 171;
  const auto rope_first = HadamardOrder::rope_then_hadamard, transform_first = HadamardOrder::hadamard_then_rope;
  const QuantCase cases[] = {
      // n = 4096 over four warps: the row's absmax crosses warps; k alone, its codes one byte off.
      {fused_case(RopeStyle::neox, DType::f32, rope_first, 32, 32, 128, 32), RopeQuantize::none, RopeQuantize::int8, 1},
      {fused_case(RopeStyle::neox, DType::bf16, transform_first, 32, 8, 128, 8), RopeQuantize::int8, RopeQuantize::fp8_e4m3, 3},
      {fused_case(RopeStyle::gptj, DType::bf16, transform_first, 8, 4, 64, 4), RopeQuantize::fp8_e4m3, RopeQuantize::none, 1},
      {fused_case(RopeStyle::gptj, DType::f16, rope_first, 8, 8, 128, 8), RopeQuantize::int8, RopeQuantize::int8, 2},
      // n = 3072 = 12 x 256: m-point passes across warps, codes stored from the last pass's layout.
      {fused_case(RopeStyle::neox, DType::bf16, rope_first, 24, 24, 128, 24), RopeQuantize::none, RopeQuantize::int8, 1},
  };
  for (const QuantCase& qc : cases) check_quantized(qc, ++seed);
}

namespace {

/// A cache-append call: a rope case with k, plus v, paged k and v caches and the slot mapping.
struct CacheCase {
  Case c;
  KvCacheLayout layout = KvCacheLayout::nhd;
  std::optional<DType> cache_dtype;  ///< std::nullopt: the data dtype (or the codes of `quantize`)
  RopeQuantize quantize = RopeQuantize::none;
  DType slot = DType::i64;
  bool write_k = false;       ///< out of place: k's rotation also goes to k_out
  bool strided = false;       ///< cache rows padded (each cache its own padding), v's heads padded
  bool blocks_inner = false;  ///< caches stored rows-major: the block stride smallest but dhead's, one gap block
  bool slots_2d = false;      ///< slots [batch, seq] (4-D data), else [batch * seq] with stride 2
  std::int64_t block_size = 16;
  std::int64_t cache_offset = 0;  ///< elements into their storage the caches start (odd: misaligned)
  float k_scale = 0;              ///< 8-bit caches: k's scale (0: one that keeps codes in range)

  std::string name() const {
    std::ostringstream o;
    o << c.name() << " cache " << kv_cache_layout_name(layout) << " "
      << (quantize != RopeQuantize::none ? std::string(rope_quantize_name(quantize)) : std::string(dtype_name(cache_dtype.value_or(c.data))))
      << " slots " << dtype_name(slot) << (slots_2d ? "[B,S]" : "[T]") << " block " << block_size
      << (write_k ? " write-k" : "") << (strided ? " strided" : "") << (blocks_inner ? " blocks-inner" : "")
      << " offset " << cache_offset;
    return o.str();
  }
};

struct CacheCall {
  RopeCall call;  ///< q, k, k_out (absent: the cache only), tables, positions
  View v, k_cache, v_cache;
  std::shared_ptr<Storage> slots, scales;  ///< scales: k's, then v's (f32)
  bool slots_2d = false;

  /// Token t's slot as stored (slots [B, S], or [T] at stride 2).
  std::int64_t slot(std::int64_t t) const {
    const DType d = call.desc.slots->dtype;
    return static_cast<std::int64_t>(detail::load_as_double(slots->host.data(), d, slots_2d ? t : 2 * t));
  }
  /// Element offset within its storage of element i of head h of `slot` in a cache view, from the
  /// view's own shape and strides (nhd [blocks, rows, heads, dhead], hnd [blocks, heads, rows, dhead]).
  static std::int64_t cache_at(const View& cache, bool nhd, std::int64_t slot, std::int64_t h, std::int64_t i) {
    const auto st = cache.desc.effective_strides();
    const std::int64_t rows = cache.desc.shape[nhd ? 1 : 2], block = slot / rows, row = slot % rows;
    return cache.offset + block * st[0] + (nhd ? row * st[1] + h * st[2] : h * st[1] + row * st[2]) + i;
  }

  RopePointers device_pointers() const {
    RopePointers p = call.device_pointers();
    if (!call.desc.k_out && !call.desc.inplace) p.k_out = nullptr;
    p.v = v.device();
    p.k_cache = k_cache.device();
    p.v_cache = v_cache.device();
    p.slots = slots->device.get();
    if (call.desc.cache_quantize != RopeQuantize::none) {
      p.k_cache_scale = static_cast<const float*>(scales->device.get());
      p.v_cache_scale = p.k_cache_scale + 1;
    }
    return p;
  }
  RopePointers host_pointers() const {
    RopePointers p = call.host_pointers();
    p.v = v.host();
    p.slots = slots->host.data();
    return p;
  }
};

/// The shape of a cache of `blocks` blocks for the case, and its strides (rows padded when strided;
/// blocks_inner: memory ordered [dim 1, dim 2, blocks + 1, dhead], the blocks' dimension innermost
/// but dhead's, with one block of gap).
TensorDesc cache_desc(const CacheCase& cc, std::int64_t blocks, std::int64_t padding, DType dtype) {
  const std::int64_t H = cc.c.k_heads, D = cc.c.dhead, S = cc.block_size;
  const bool nhd = cc.layout == KvCacheLayout::nhd;
  const std::vector<std::int64_t> shape = nhd ? std::vector<std::int64_t>{blocks, S, H, D} : std::vector<std::int64_t>{blocks, H, S, D};
  if (cc.blocks_inner) {
    const std::vector<std::int64_t> memory = contiguous_strides({shape[1], shape[2], blocks + 1, D + padding});
    return {shape, {memory[2], memory[0], memory[1], 1}, dtype};
  }
  std::vector<std::int64_t> padded = shape;
  padded[3] += padding;
  std::vector<std::int64_t> strides = contiguous_strides(padded);
  return {shape, strides, dtype};
}

/// Builds a cache call: inputs random, caches poisoned, distinct slots drawn at random with every
/// 7th token skipped (slot -1) and every 11th past the cache (`past`).
CacheCall build_cache_call(const CacheCase& cc, std::mt19937_64& rng, bool past = true) {
  CacheCall cache;
  cache.call = build_call(cc.c, rng);
  cache.slots_2d = cc.slots_2d;
  RopeDesc& d = cache.call.desc;
  if (!cc.c.inplace && !cc.write_k) d.k_out.reset();
  const Case& c = cc.c;
  const std::int64_t B = std::max<std::int64_t>(c.batch, 1), T = B * c.seq, D = c.dhead;
  if (c.layout == Layout::packed) {  // q, k, v heads side by side in one row, as a fused qkv projection writes them
    cache.v = cache.call.k;
    cache.v.offset = cache.call.k.offset + c.k_heads * D;
  } else {
    std::vector<std::int64_t> shape = data_shape(c, c.k_heads);
    std::vector<std::int64_t> padded = shape;
    if (cc.strided) padded.back() += 24;
    TensorDesc vd{shape, contiguous_strides(padded), c.data};
    cache.v = own_view(vd);
    fill_random(*cache.v.storage, rng);
  }

  const DType cache_dtype =
      cc.quantize != RopeQuantize::none ? plan::rope_code_dtype(cc.quantize) : cc.cache_dtype.value_or(c.data);
  const std::int64_t blocks = (T * 3 / 2 + cc.block_size - 1) / cc.block_size + 1, slots = blocks * cc.block_size;
  for (auto [view, padding] : {std::pair{&cache.k_cache, cc.strided ? 8 : 0}, {&cache.v_cache, cc.strided ? 40 : 0}}) {
    const TensorDesc desc = cache_desc(cc, blocks, padding, cache_dtype);
    *view = {std::make_shared<Storage>(cache_dtype, span(desc) + cc.cache_offset), cc.cache_offset, desc};
    std::fill(view->storage->host.begin(), view->storage->host.end(), 0xff);  // NaN in float dtypes
  }

  std::vector<std::int64_t> order(static_cast<std::size_t>(slots));
  for (std::int64_t i = 0; i < slots; ++i) order[static_cast<std::size_t>(i)] = i;
  std::shuffle(order.begin(), order.end(), rng);
  cache.slots = std::make_shared<Storage>(cc.slot, 2 * T);
  for (std::int64_t t = 0; t < T; ++t) {
    std::int64_t slot = order[static_cast<std::size_t>(t)];
    if (t % 7 == 3) slot = -1;
    if (past && t % 11 == 5) slot = slots + t;
    std::memcpy(cache.slots->host.data() + (cc.slots_2d ? t : 2 * t) * dtype_size(cc.slot), &slot, dtype_size(cc.slot));
  }
  cache.scales = std::make_shared<Storage>(DType::f32, 2);
  const float scales[2] = {cc.k_scale != 0 ? cc.k_scale : cc.quantize == RopeQuantize::int8 ? 0.03f : 0.01f, 0.02f};
  std::memcpy(cache.scales->host.data(), scales, sizeof scales);

  d.cache_layout = cc.layout;
  d.cache_quantize = cc.quantize;
  d.v = cache.v.desc;
  d.k_cache = cache.k_cache.desc;
  d.v_cache = cache.v_cache.desc;
  d.slots = cc.slots_2d ? TensorDesc{{B, c.seq}, {}, cc.slot} : TensorDesc{{T}, {2}, cc.slot};
  return cache;
}

void upload_cache_call(CacheCall& cache) {
  upload_all(cache.call);
  if (cache.v.storage != cache.call.x.storage && cache.v.storage != cache.call.k.storage) cache.v.storage->upload();
  cache.k_cache.storage->upload();
  cache.v_cache.storage->upload();
  cache.slots->upload();
  cache.scales->upload();
}

/// The value a cache element holds, decoded (codes times their scale).
double cache_element(const std::vector<std::uint8_t>& bytes, DType dtype, RopeQuantize quantize, std::int64_t at,
                     double scale) {
  if (quantize != RopeQuantize::none) return detail::rope_code_value(quantize, bytes[static_cast<std::size_t>(at)], scale);
  return detail::load_as_double(bytes.data(), dtype, at);
}

/// Whether a cache element `got` stands for the reference value `want`: within one code step of
/// the value clamped to the codes' range (int8 +-127, fp8 +-448 steps of the scale; int8 writes NaN
/// as 0) for codes, one unit of the cache dtype (plus the data's arithmetic) for a converted dtype,
/// exact for v in its own dtype.
bool cache_close(const CacheCase& cc, DType cache_dtype, double got, double want, double scale, bool exact) {
  if (std::isnan(want)) return cc.quantize == RopeQuantize::int8 ? got == 0 : std::isnan(got);
  if (cc.quantize != RopeQuantize::none) {
    const double limit = (cc.quantize == RopeQuantize::int8 ? 127 : 448) * scale;
    want = std::clamp(want, -limit, limit);
    return std::fabs(got - want) <= detail::rope_code_step(cc.quantize, want, scale);
  }
  if (exact && cache_dtype == cc.c.data) return got == want;
  return std::fabs(got - want) <= test::ulp(cache_dtype, want) + tolerance(cc.c.data, want, 4.0);
}

/// Compares q's output, k_out (when written) and both caches with the reference
/// after a launch, and checks that no cache element outside the appended rows changed.
Mismatches verify_cache(const CacheCase& cc, const CacheCall& cache, const plan::RopePlanData& plan) {
  Mismatches m;
  const RopeCall& call = cache.call;
  const DType t = plan.spec.data, ct = *plan.spec.cache;
  const std::int64_t D = plan.spec.head_dim;
  const std::vector<std::uint8_t> y_out = call.y.storage->download();
  const bool k_written = !plan.spec.k_out_skipped;
  const std::vector<std::uint8_t> k_out = k_written ? call.k_out.storage->download() : std::vector<std::uint8_t>{};
  const std::vector<std::uint8_t> kc = cache.k_cache.storage->download(), vc = cache.v_cache.storage->download();
  std::vector<char> kc_written(kc.size() / size_of(ct), 0), vc_written(vc.size() / size_of(ct), 0);
  const float* scales = reinterpret_cast<const float*>(cache.scales->host.data());
  std::vector<double> ref;
  for (std::int64_t token = 0; token < plan.batch * plan.seq; ++token) {
    const std::int64_t b = token / plan.seq, s = token % plan.seq;
    detail::rope_reference_token(plan, cache.host_pointers(), b, s, ref);
    std::int64_t slot = cache.slot(token);
    const std::int64_t cache_slots = cache.k_cache.desc.shape[0] * cc.block_size;
    if (slot >= cache_slots) slot = -1;  // past the cache: skipped
    for (std::int64_t h = 0; h < plan.args.heads_total; ++h) {
      const int tensor = h < plan.heads_q ? 0 : h < plan.heads_q + plan.heads_k ? 1 : 2;  // q, k, v
      const std::int64_t hh = tensor == 0 ? h : tensor == 1 ? h - plan.heads_q : h - plan.heads_q - plan.heads_k;
      for (std::int64_t i = 0; i < D; ++i) {
        const double want = ref[static_cast<std::size_t>(h * D + i)];
        auto where = [&](const char* what, double got) {
          std::ostringstream w;
          w << what << " of token (" << b << "," << s << ") head " << hh << " element " << i << ": got " << got
            << ", reference " << want;
          return w.str();
        };
        if (tensor == 0 || (tensor == 1 && k_written)) {
          const std::vector<std::uint8_t>& bytes = tensor == 0 || call.k_out.storage == call.y.storage ? y_out : k_out;
          const double got = detail::load_as_double(bytes.data(), t, (tensor == 0 ? call.y : call.k_out).at(b, s, hh, i));
          ++m.checked;
          if (!(std::isnan(want) ? std::isnan(got) : std::fabs(got - want) <= tolerance(t, want, 4.0)))
            m.note(where(tensor == 0 ? "q" : "k_out", got));
        }
        if (tensor == 0 || slot < 0) continue;
        const bool is_v = tensor == 2;
        const std::int64_t at = CacheCall::cache_at(is_v ? cache.v_cache : cache.k_cache, cc.layout == KvCacheLayout::nhd, slot, hh, i);
        (is_v ? vc_written : kc_written)[static_cast<std::size_t>(at)] = 1;
        const double scale = scales[is_v ? 1 : 0];
        const double got = cache_element(is_v ? vc : kc, ct, cc.quantize, at, scale);
        ++m.checked;
        if (!cache_close(cc, ct, got, want, scale, is_v || i >= plan.spec.rotary_dim)) m.note(where(is_v ? "v_cache" : "k_cache", got));
      }
    }
  }
  const std::size_t e = size_of(ct);
  for (auto [bytes, written, storage, name] : {std::tuple{&kc, &kc_written, cache.k_cache.storage.get(), "k_cache"},
                                               {&vc, &vc_written, cache.v_cache.storage.get(), "v_cache"}})
    for (std::size_t i = 0; i < written->size(); ++i)
      if (!(*written)[i] && std::memcmp(&(*bytes)[i * e], &storage->host[i * e], e) != 0) {
        m.note(std::string(name) + " element " + std::to_string(i) + " outside the appended rows was written");
        break;
      }
  return m;
}

Mismatches run_cache_case(const CacheCase& cc, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  CacheCall cache = build_cache_call(cc, rng);
  upload_cache_call(cache);
  const RopePlan plan = plan_rope(cache.call.desc);
  plan.launch(cache.device_pointers());
  return verify_cache(cc, cache, plan.impl().data);
}

CacheCase cache_case(RopeStyle style, DType data, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                     std::int64_t k_heads, std::int64_t dhead, KvCacheLayout layout) {
  CacheCase cc;
  cc.c.style = style;
  cc.c.data = data;
  cc.c.table = data == DType::f64 ? DType::f64 : DType::f32;
  cc.c.batch = batch;
  cc.c.seq = seq;
  cc.c.heads = heads;
  cc.c.k_heads = k_heads;
  cc.c.dhead = dhead;
  cc.c.position = DType::i64;
  cc.layout = layout;
  return cc;
}

}  // namespace

TEST_CASE("rope + KV-cache append: nhd and hnd caches of every dtype, slot dtypes and layouts, strided and packed "
          "inputs, in place and cache only, skipped and past-the-cache slots" * test::gpu_only()) {
  std::vector<CacheCase> cases;
  auto add = [&](CacheCase cc, auto&& edit) {
    edit(cc);
    cases.push_back(cc);
  };
  const auto nhd = KvCacheLayout::nhd, hnd = KvCacheLayout::hnd;
  add(cache_case(RopeStyle::neox, DType::bf16, 64, 1, 32, 8, 128, nhd), [](CacheCase& cc) { cc.c.inplace = true; });
  add(cache_case(RopeStyle::neox, DType::bf16, 2, 37, 8, 2, 128, hnd), [](CacheCase& cc) { cc.slots_2d = true; });
  add(cache_case(RopeStyle::gptj, DType::f16, 0, 50, 4, 4, 64, nhd), [](CacheCase& cc) {
    cc.c.rotary = 32;
    cc.slot = DType::i32;
    cc.strided = true;
  });
  add(cache_case(RopeStyle::neox, DType::f32, 3, 20, 6, 3, 96, hnd), [](CacheCase& cc) {
    cc.cache_dtype = DType::bf16;
    cc.write_k = true;
    cc.strided = true;
    cc.block_size = 5;
  });
  add(cache_case(RopeStyle::neox, DType::bf16, 2, 33, 8, 2, 128, nhd), [](CacheCase& cc) {
    cc.quantize = RopeQuantize::fp8_e4m3;
    cc.c.layout = Layout::packed;
    cc.c.inplace = true;
  });
  add(cache_case(RopeStyle::gptj, DType::bf16, 0, 70, 4, 2, 64, hnd), [](CacheCase& cc) {
    cc.quantize = RopeQuantize::int8;
    cc.c.rotary = 32;
    cc.slot = DType::i32;
  });
  // Scales small enough that k's codes clamp (int8) and saturate (fp8).
  add(cache_case(RopeStyle::neox, DType::bf16, 0, 40, 4, 2, 64, nhd), [](CacheCase& cc) {
    cc.quantize = RopeQuantize::int8;
    cc.k_scale = 0.005f;
  });
  add(cache_case(RopeStyle::neox, DType::f16, 0, 40, 4, 2, 64, hnd), [](CacheCase& cc) {
    cc.quantize = RopeQuantize::fp8_e4m3;
    cc.k_scale = 0.002f;
  });
  add(cache_case(RopeStyle::neox, DType::f64, 0, 30, 2, 1, 64, nhd), [](CacheCase& cc) { cc.c.inverse = true; });
  add(cache_case(RopeStyle::neox, DType::f16, 1, 40, 4, 2, 64, nhd), [](CacheCase& cc) {
    cc.cache_dtype = DType::f32;
    cc.c.layout = Layout::padded;
    cc.block_size = 1;
  });
  // Multi-axis positions (M-RoPE) with the append, and misaligned caches (the scalar variant).
  add(cache_case(RopeStyle::neox, DType::bf16, 0, 45, 4, 2, 128, nhd), [](CacheCase& cc) {
    cc.c.position = DType::i32;
    cc.c.axis_rule = RopeAxisRule::sections;
    cc.c.axis_sections = {16, 24, 24};
  });
  add(cache_case(RopeStyle::neox, DType::bf16, 0, 45, 4, 2, 64, hnd), [](CacheCase& cc) { cc.cache_offset = 1; });
  // Caches whose block stride is the smallest (rows-major storage with a gap block), both layouts.
  add(cache_case(RopeStyle::neox, DType::bf16, 2, 30, 8, 2, 128, nhd), [](CacheCase& cc) {
    cc.blocks_inner = true;
    cc.strided = true;
  });
  add(cache_case(RopeStyle::gptj, DType::f16, 0, 50, 4, 4, 64, hnd), [](CacheCase& cc) {
    cc.blocks_inner = true;
    cc.quantize = RopeQuantize::fp8_e4m3;
    cc.slot = DType::i32;
  });
  std::uint64_t seed = 9000;
  for (const CacheCase& cc : cases) {
    const Mismatches m = run_cache_case(cc, seed++);
    INFO(cc.name());
    INFO(m.first);
    CHECK(m.checked > 0);
    CHECK(m.count == 0);
  }
}

TEST_CASE("rope + KV-cache append: checked mode names a slot past the cache, negative slots are skipped silently, "
          "a bad position makes k's cache row NaN (int8: 0) and leaves v's" * test::gpu_only()) {
  for (RopeQuantize quantize : {RopeQuantize::none, RopeQuantize::int8}) {  // NaN k: bf16 NaN, int8 code 0
    CacheCase cc = cache_case(RopeStyle::neox, DType::bf16, 2, 12, 4, 2, 64, KvCacheLayout::nhd);
    cc.c.positions_batched = true;
    cc.quantize = quantize;
    std::mt19937_64 rng(77);
    CacheCall cache = build_cache_call(cc, rng, false);
    // Token (1, 2) one row past the table: its q and k are NaN, its v is appended as given.
    const std::int64_t rows = cache.call.desc.table.shape[0];
    std::memcpy(cache.call.positions->host.data() + 14 * 8, &rows, 8);
    upload_cache_call(cache);
    const RopePlan plan = plan_rope(cache.call.desc);
    plan.launch(cache.device_pointers());
    const Mismatches m = verify_cache(cc, cache, plan.impl().data);
    INFO(rope_quantize_name(quantize) << ": " << m.first);
    CHECK(m.checked > 0);
    CHECK(m.count == 0);

    // Checked: negative slots (tokens 3, 10, 17) pass; one past the cache fails naming its token.
    RopeDesc checked = cache.call.desc;
    checked.checked = true;
    const std::int64_t good_row = 0;
    std::memcpy(cache.call.positions->host.data() + 14 * 8, &good_row, 8);
    cache.call.positions->upload();
    const RopePlan checked_plan = plan_rope(checked);
    CHECK_NOTHROW(checked_plan.launch(cache.device_pointers()));
    const std::int64_t past = cache.k_cache.desc.shape[0] * cc.block_size;  // blocks x rows
    std::memcpy(cache.slots->host.data() + 2 * 13 * 8, &past, 8);  // token (1, 1)
    cache.slots->upload();
    try {
      checked_plan.launch(cache.device_pointers());
      FAIL("a checked launch with a slot past the cache must throw");
    } catch (const Error& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find("slots[batch 1, seq 1] = " + std::to_string(past) + " is past the cache's") !=
            std::string::npos);
    }
  }
}
