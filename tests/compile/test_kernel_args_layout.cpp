// Each kernel-argument struct is declared twice, on the host (what a launch passes) and in its
// template (what the kernel reads). The template's declaration, as NVRTC receives it in a real
// generated program, is laid out here by the C++ rules the device follows (natural alignment,
// 8-byte pointers) and compared with the host struct field by field, offsets and sizes.
#include <doctest/doctest.h>

#include <cstddef>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "jit/nvrtc.hpp"
#include "ops/rearrange/codegen.hpp"
#include "ops/rearrange/plan.hpp"
#include "ops/hadamard/impl.hpp"
#include "ops/rope/impl.hpp"
#include "shapejit/rearrange.hpp"
#include "shapejit/hadamard.hpp"
#include "shapejit/rope.hpp"

using namespace shapejit;

namespace {

struct Field {
  std::string name;
  std::size_t offset = 0, size = 0;
};

struct Layout {
  std::vector<Field> fields;
  std::size_t size = 0, align = 1;
};

/// Lays out the structs a generated source declares (`struct Name { ... };`), in order.
class DeviceLayouts {
 public:
  explicit DeviceLayouts(const std::string& source) : source_(source) {
    const std::regex constant(R"(constexpr long long (\w+) = (-?\d+)LL;)");
    for (std::sregex_iterator it(source.begin(), source.end(), constant), end; it != end; ++it)
      constants_[(*it)[1]] = std::stoull((*it)[2]);
  }

  Layout of(const std::string& name) {
    if (auto it = layouts_.find(name); it != layouts_.end()) return it->second;
    const std::size_t start = source_.find("struct " + name + " {");
    REQUIRE_MESSAGE(start != std::string::npos, "the source declares no struct " << name);
    const std::size_t open = source_.find('{', start), close = source_.find("};", open);
    Layout layout;
    std::istringstream body(source_.substr(open + 1, close - open - 1));
    std::string declarations;
    for (std::string line; std::getline(body, line);) declarations += line.substr(0, line.find("//")) + " ";
    std::istringstream decls(declarations);
    for (std::string decl; std::getline(decls, decl, ';');) add_declaration(decl, layout);
    layout.size = round_up(layout.size, layout.align);
    return layouts_[name] = layout;
  }

 private:
  static std::size_t round_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

  /// Size and alignment of a field type.
  std::pair<std::size_t, std::size_t> type_size(const std::string& type) {
    if (type.find("long long") != std::string::npos || type == "double") return {8, 8};
    if (type == "unsigned" || type == "int" || type == "unsigned int" || type == "float") return {4, 4};
    const Layout nested = of(type);
    return {nested.size, nested.align};
  }

  /// "long long a, b[3]" or "const T* x, *y": each declared name with its type's size, aligned.
  void add_declaration(const std::string& decl, Layout& layout) {
    if (decl.find_first_not_of(" \t\n") == std::string::npos) return;
    static const std::regex declarator(R"((\**)\s*(\w+)\s*(?:\[\s*(\w+)\s*\])?\s*$)");
    std::istringstream items(decl);
    std::string type;
    for (std::string item; std::getline(items, item, ',');) {
      std::smatch m;
      REQUIRE_MESSAGE(std::regex_search(item, m, declarator), "cannot read the declaration: " << decl);
      if (type.empty()) type = item.substr(0, static_cast<std::size_t>(m.position(0)));
      const bool pointer = m[1].length() > 0 || type.find('*') != std::string::npos;
      type.erase(0, type.find_first_not_of(" \t"));
      type.erase(type.find_last_not_of(" \t*") + 1);
      const auto [size, align] = pointer ? std::pair<std::size_t, std::size_t>{8, 8} : type_size(type);
      std::size_t count = 1;
      if (m[3].matched) {
        const std::string extent = m[3];
        count = std::isdigit(static_cast<unsigned char>(extent[0])) ? std::stoull(extent) : constants_.at(extent);
      }
      layout.size = round_up(layout.size, align);
      layout.fields.push_back({m[2], layout.size, size * count});
      layout.size += size * count;
      layout.align = std::max(layout.align, align);
    }
  }

  std::string source_;
  std::map<std::string, std::size_t> constants_;
  std::map<std::string, Layout> layouts_;
};

/// The host's side of one field: offset and size.
struct HostField {
  std::size_t offset, size;
};
#define HOST_FIELD(Host, field) HostField{offsetof(Host, field), sizeof(Host::field)}

/// Compares a device struct's fields, in declaration order, with the host's.
void check_layout(const Layout& device, const std::vector<HostField>& host, std::size_t host_size) {
  REQUIRE(device.fields.size() == host.size());
  for (std::size_t i = 0; i < host.size(); ++i) {
    CAPTURE(device.fields[i].name);
    CHECK(device.fields[i].offset == host[i].offset);
    CHECK(device.fields[i].size == host[i].size);
  }
  CHECK(device.size == host_size);
}

/// A transpose plan's kernel with `dims` dims in its arguments.
jit::Program rearrange_program_with_dims(int dims) {
  std::vector<std::int64_t> shape(static_cast<std::size_t>(dims), 5);
  shape.back() = 64;
  shape.front() = 48;
  std::vector<int> perm(static_cast<std::size_t>(dims));
  for (int i = 0; i < dims; ++i) perm[static_cast<std::size_t>(i)] = dims - 1 - i;
  const TensorDesc view = permuted(TensorDesc{shape, {}, DType::f32}, perm);
  const RearrangePlan plan = plan_rearrange(TensorDesc{view.shape, {}, DType::f32}, view);
  const plan::RearrangeVariant& v = plan.impl().data.variants.front();
  REQUIRE(v.spec.family != plan::RearrangeFamily::copy);
  REQUIRE(v.spec.num_dims == dims);
  return codegen::rearrange_program(v, plan.manifest_line());
}

}  // namespace

TEST_CASE("rearrange: RearrangeKernelArgs matches the template's SjArgs field by field") {
  using Args = plan::RearrangeKernelArgs;
  using Div = plan::KernelDivisor;
  using Dim = plan::KernelDim;
  for (int dims : {2, 3, 5}) {
    CAPTURE(dims);
    DeviceLayouts device(rearrange_program_with_dims(dims).source);
    check_layout(device.of("SjDiv"), {HOST_FIELD(Div, value), HOST_FIELD(Div, multiplier), HOST_FIELD(Div, shift)},
                 sizeof(Div));
    check_layout(device.of("SjDim"), {HOST_FIELD(Dim, extent), HOST_FIELD(Dim, src_stride), HOST_FIELD(Dim, dst_stride)},
                 sizeof(Dim));
    // The template declares only the num_dims dims a launch copies.
    const std::size_t dims_bytes = static_cast<std::size_t>(dims) * sizeof(Dim);
    check_layout(device.of("SjArgs"),
                 {HOST_FIELD(Args, num_tiles), HOST_FIELD(Args, extent_a), HOST_FIELD(Args, extent_b),
                  HOST_FIELD(Args, tiles_x), HOST_FIELD(Args, tiles_y), HostField{offsetof(Args, dim), dims_bytes}},
                 offsetof(Args, dim) + dims_bytes);
  }
}

TEST_CASE("rope: RopeKernelArgs matches the template's RopeArgs field by field, plain, fused with hadamard and "
          "appending to a KV cache") {
  RopeDesc desc;
  desc.x = TensorDesc{{2, 8, 4, 64}, {}, DType::bf16};
  desc.k = TensorDesc{{2, 8, 2, 64}, {}, DType::bf16};
  desc.table = TensorDesc{{16, 32}, {}, DType::f32};
  desc.positions = TensorDesc{{2, 8}, {}, DType::i32};
  RopeDesc fused = desc;
  fused.hadamard_group = 2;
  RopeDesc cached = desc;
  cached.cache_layout = KvCacheLayout::nhd;
  cached.v = desc.k;
  cached.k_cache = cached.v_cache = TensorDesc{{4, 16, 2, 64}, {}, DType::u8};
  cached.cache_quantize = RopeQuantize::fp8_e4m3;
  cached.slots = TensorDesc{{16}, {}, DType::i32};
  std::vector<const jit::Program*> programs;
  const auto plain_plan = detail::make_rope_plan(desc, {});
  const auto fused_plan = detail::make_rope_plan(fused, {});
  const auto cached_plan = detail::make_rope_plan(cached, {});
  for (const auto& plan : {plain_plan, fused_plan, cached_plan})
    for (const jit::Program* program : plan->programs()) programs.push_back(program);
  using Args = plan::RopeKernelArgs;
  for (const jit::Program* program : programs) {
    DeviceLayouts device(program->source);
    check_layout(device.of("RopeArgs"),
                 {HOST_FIELD(Args, x), HOST_FIELD(Args, y), HOST_FIELD(Args, k), HOST_FIELD(Args, k_out),
                  HOST_FIELD(Args, cos), HOST_FIELD(Args, sin), HOST_FIELD(Args, positions),
                  HOST_FIELD(Args, bad_token), HOST_FIELD(Args, tokens), HOST_FIELD(Args, seq),
                  HOST_FIELD(Args, heads_q), HOST_FIELD(Args, heads_total), HOST_FIELD(Args, seq_div_multiplier),
                  HOST_FIELD(Args, seq_div_shift), HOST_FIELD(Args, x_stride), HOST_FIELD(Args, y_stride),
                  HOST_FIELD(Args, k_stride), HOST_FIELD(Args, k_out_stride), HOST_FIELD(Args, position_stride),
                  HOST_FIELD(Args, table_rows), HOST_FIELD(Args, table_stride), HOST_FIELD(Args, offset),
                  HOST_FIELD(Args, group_rows), HOST_FIELD(Args, group_div), HOST_FIELD(Args, hadamard_scale),
                  HOST_FIELD(Args, q_scale), HOST_FIELD(Args, k_scale), HOST_FIELD(Args, q_scale_stride),
                  HOST_FIELD(Args, k_scale_stride), HOST_FIELD(Args, position_axis_stride), HOST_FIELD(Args, v),
                  HOST_FIELD(Args, k_cache), HOST_FIELD(Args, v_cache), HOST_FIELD(Args, slots),
                  HOST_FIELD(Args, k_cache_scale), HOST_FIELD(Args, v_cache_scale), HOST_FIELD(Args, v_stride),
                  HOST_FIELD(Args, k_cache_stride), HOST_FIELD(Args, v_cache_stride), HOST_FIELD(Args, slot_stride),
                  HOST_FIELD(Args, cache_slots), HOST_FIELD(Args, block_size), HOST_FIELD(Args, block_div_multiplier),
                  HOST_FIELD(Args, block_div_shift)},
                 sizeof(Args));
  }
}

TEST_CASE("hadamard: HadamardKernelArgs matches the template's HadamardArgs field by field") {
  HadamardDesc desc;
  desc.x = TensorDesc{{2, 8, 4, 64}, {}, DType::bf16};
  desc.group = 2;
  const auto plan = detail::make_hadamard_plan(desc, {});
  using Args = plan::HadamardKernelArgs;
  using Dim = plan::HadamardDim;
  for (const jit::Program* program : plan->programs()) {
    DeviceLayouts device(program->source);
    check_layout(device.of("HadamardDim"),
                 {HOST_FIELD(Dim, extent), HOST_FIELD(Dim, multiplier), HOST_FIELD(Dim, shift),
                  HOST_FIELD(Dim, x_stride), HOST_FIELD(Dim, y_stride)},
                 sizeof(Dim));
    check_layout(device.of("HadamardArgs"),
                 {HOST_FIELD(Args, x), HOST_FIELD(Args, y), HOST_FIELD(Args, rows), HOST_FIELD(Args, scale),
                  HOST_FIELD(Args, x_head_stride), HOST_FIELD(Args, y_head_stride), HOST_FIELD(Args, dim)},
                 sizeof(Args));
  }
}

TEST_CASE("the layout reader sees padding, arrays and nested structs") {
  DeviceLayouts device(
      "constexpr long long N = 3LL;\nstruct A {\n  unsigned u;  // comment\n  long long v;\n};\n"
      "struct B {\n  unsigned w;\n  A a[N];\n  const float* p, *q;\n};\n");
  const Layout a = device.of("A");
  CHECK(a.fields[1].offset == 8);
  CHECK(a.size == 16);
  const Layout b = device.of("B");
  REQUIRE(b.fields.size() == 4);
  CHECK(b.fields[1].offset == 8);
  CHECK(b.fields[1].size == 48);
  CHECK(b.fields[3].offset == 64);
  CHECK(b.size == 72);
}
