// The rope entry points: plan, launch (plain and checked), one-shot with a plan cache, text forms.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

#include "core/byte_range.hpp"
#include "core/errors.hpp"
#include "core/plan_cache.hpp"
#include "jit/driver.hpp"
#include "jit/kernel_registry.hpp"
#include "jit/pointer_check.hpp"
#include "jit/record.hpp"
#include "ops/rope/codegen.hpp"
#include "ops/rope/impl.hpp"
#include "ops/plan_text.hpp"
#include "ops/rope/manifest.hpp"
#include "shapejit/rope.hpp"

namespace shapejit {
namespace detail {
namespace {

bool aligned(const void* p, std::size_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

void require_pointer(const void* p, const char* name, const char* why) {
  if (p == nullptr) invalid_argument("pointers.{} is NULL; {}", name, why);
}

/// One input/output pair's pointers against the plan's in-place rule.
void check_output_pointer(const void* in, const void* out, bool inplace, const std::int64_t (&in_strides)[3],
                          const std::int64_t (&out_strides)[3], const char* in_name, const char* out_name) {
  if (inplace && out != in)
    invalid_argument("pointers.{} differs from pointers.{} but the plan is in place; pass {} as {} (or plan with "
                     "inplace = false)",
                     out_name, in_name, in_name, out_name);
  if (!inplace && out == in && !std::equal(in_strides, in_strides + 3, out_strides))
    invalid_argument("pointers.{} is pointers.{} but their strides differ; give equal strides or separate memory",
                     out_name, in_name);
}

/// The data pointers with their element sizes (an output may hold 8-bit codes), then the scales.
std::array<std::tuple<const void*, const char*, std::size_t>, 12> pointer_elements(const plan::RopePlanData& plan,
                                                                                   const RopePointers& p) {
  const std::size_t data = dtype_size(plan.spec.data);
  const std::size_t k_out = plan.desc.k_out ? dtype_size(plan.desc.k_out->dtype) : data;
  const std::size_t cache = plan.spec.cache ? dtype_size(*plan.spec.cache) : 1;
  return {{{p.x, "x", data}, {p.y, "y", dtype_size(plan.desc.y->dtype)}, {p.k, "k", data}, {p.k_out, "k_out", k_out},
           {p.q_scale, "q_scale", 4}, {p.k_scale, "k_scale", 4}, {p.v, "v", data}, {p.k_cache, "k_cache", cache},
           {p.v_cache, "v_cache", cache}, {p.slots, "slots", dtype_size(plan.spec.slot)},
           {p.k_cache_scale, "k_cache_scale", 4}, {p.v_cache_scale, "v_cache_scale", 4}}};
}

/// The cache append's pointers: required with a cache (the scales with 8-bit caches), NULL without.
void check_cache_pointers(const plan::RopeSpec& spec, const RopePointers& p) {
  const bool codes = spec.cache_quantize != RopeQuantize::none;
  const std::tuple<const void*, const char*, bool> uses[] = {
      {p.v, "v", spec.cache.has_value()},          {p.k_cache, "k_cache", spec.cache.has_value()},
      {p.v_cache, "v_cache", spec.cache.has_value()}, {p.slots, "slots", spec.cache.has_value()},
      {p.k_cache_scale, "k_cache_scale", codes},   {p.v_cache_scale, "v_cache_scale", codes}};
  for (auto [ptr, name, used] : uses) {
    if (used) require_pointer(ptr, name, codes ? "the plan appends to 8-bit caches" : "the plan appends to a KV cache");
    else if (ptr != nullptr)
      invalid_argument("pointers.{} is set but the plan {}", name,
                       spec.cache ? "writes no 8-bit cache" : "has no cache append; plan with RopeDesc::cache_layout");
  }
  if (spec.cache && p.k_cache == p.v_cache)
    invalid_argument("pointers.k_cache and pointers.v_cache are the same memory; v's rows would overwrite k's");
}

/// With 8-bit outputs: the codes and scales must not overlap the inputs or each other (equal element
/// strides no longer mean the same bytes). `ranges` are the plan's, in the order below.
void check_quantized_overlaps(const RopePlanImpl& plan, const RopePointers& p) {
  const plan::RopeSpec& spec = plan.data.spec;
  struct Use {
    const void* ptr;
    const char* name;
    bool written;
  };
  const Use uses[] = {{p.x, "x", false},
                      {p.k, "k", false},
                      {p.y, "y", spec.q_quantize != RopeQuantize::none},
                      {p.k_out, "k_out", spec.k_quantize != RopeQuantize::none},
                      {p.q_scale, "q_scale", true},
                      {p.k_scale, "k_scale", true}};
  static_assert(std::size(uses) == std::tuple_size_v<decltype(plan.quantized_ranges)>);
  for (std::size_t i = 0; i < std::size(uses); ++i)
    for (std::size_t j = i + 1; j < std::size(uses); ++j) {
      const Use &a = uses[i], &b = uses[j];
      if (!(a.written || b.written) || !a.ptr || !b.ptr) continue;
      if (ranges_overlap(reinterpret_cast<std::uintptr_t>(a.ptr), plan.quantized_ranges[i],
                         reinterpret_cast<std::uintptr_t>(b.ptr), plan.quantized_ranges[j]))
        invalid_argument("pointers.{} and pointers.{} overlap; quantized outputs and scales need memory of their own",
                         a.name, b.name);
    }
}

/// Checks `p` against the plan and fills the pointer fields of `args`.
void bind_pointers(const RopePlanImpl& plan, const RopePointers& p, plan::RopeKernelArgs& args) {
  const plan::RopeSpec& spec = plan.data.spec;
  require_pointer(p.x, "x", "pass the input q");
  require_pointer(p.y, "y", "pass the output (x itself for an in-place plan)");
  require_pointer(p.cos, "cos", "pass the cos table");
  require_pointer(p.sin, "sin", "pass the sin table");
  check_output_pointer(p.x, p.y, spec.inplace, args.x_stride, args.y_stride, "x", "y");
  if (spec.has_k) {
    require_pointer(p.k, "k", "the plan rotates k too");
    if (spec.k_out_skipped) {
      if (p.k_out != nullptr)
        invalid_argument("pointers.k_out is set but the plan writes k to the cache only; plan with RopeDesc::k_out "
                         "to write it there too");
    } else {
      require_pointer(p.k_out, "k_out", "pass k's output (k itself for an in-place plan)");
      check_output_pointer(p.k, p.k_out, spec.inplace, args.k_stride, args.k_out_stride, "k", "k_out");
    }
  } else if (p.k != nullptr || p.k_out != nullptr) {
    invalid_argument("pointers.k or pointers.k_out is set but the plan has no k; plan with RopeDesc::k");
  }
  if (spec.position) {
    require_pointer(p.positions, "positions", "the plan reads position ids");
    if (!aligned(p.positions, dtype_size(*spec.position)))
      invalid_argument("pointers.positions is not aligned to its {}-byte elements", dtype_size(*spec.position));
  } else if (p.positions != nullptr) {
    invalid_argument("pointers.positions is set but the plan has none (positions are s + offset); plan with "
                     "RopeDesc::positions");
  }
  const std::size_t table_bytes = dtype_size(spec.table);
  for (auto [ptr, name, bytes] : pointer_elements(plan.data, p))
    if (!aligned(ptr, bytes)) invalid_argument("pointers.{} is not aligned to its {}-byte elements", name, bytes);
  for (auto [ptr, quantize, name] : {std::tuple{p.q_scale, spec.q_quantize, "q_scale"}, {p.k_scale, spec.k_quantize, "k_scale"}}) {
    if (quantize != RopeQuantize::none) require_pointer(ptr, name, "the plan writes that output's scales");
    else if (ptr != nullptr) invalid_argument("pointers.{} is set but that output is not quantized", name);
  }
  if (spec.q_quantize != RopeQuantize::none || spec.k_quantize != RopeQuantize::none)
    check_quantized_overlaps(plan, p);
  check_cache_pointers(spec, p);
  if (!aligned(p.cos, table_bytes) || !aligned(p.sin, table_bytes))
    invalid_argument("pointers.cos or pointers.sin is not aligned to its {}-byte elements", table_bytes);
  args.x = p.x;
  args.y = p.y;
  args.k = p.k;
  args.k_out = p.k_out;
  args.cos = p.cos;
  args.sin = p.sin;
  args.positions = p.positions;
  args.offset = p.offset;
  args.q_scale = p.q_scale;
  args.k_scale = p.k_scale;
  args.v = p.v;
  args.k_cache = p.k_cache;
  args.v_cache = p.v_cache;
  args.slots = p.slots;
  args.k_cache_scale = p.k_cache_scale;
  args.v_cache_scale = p.v_cache_scale;
}

/// Whether every pointer allows the plan's vector accesses.
bool vector_aligned(const plan::RopePlanData& plan, const plan::RopeKernelArgs& args) {
  const plan::RopeSpec& spec = plan.spec;
  const auto access = static_cast<std::size_t>(spec.access);
  const std::size_t data = access * dtype_size(spec.data), y = access * dtype_size(plan.desc.y->dtype);
  const std::size_t k_out = plan.desc.k_out ? access * dtype_size(plan.desc.k_out->dtype) : data;
  const std::size_t table = static_cast<std::size_t>(spec.table_access) * dtype_size(spec.table);
  const std::size_t cache = plan.spec.cache ? static_cast<std::size_t>(spec.cache_access) * dtype_size(*spec.cache) : 1;
  return aligned(args.x, data) && aligned(args.y, y) && aligned(args.k, data) && aligned(args.k_out, k_out) &&
         aligned(args.cos, table) && aligned(args.sin, table) && aligned(args.v, data) && aligned(args.k_cache, cache) &&
         aligned(args.v_cache, cache);
}

jit::LaunchDims launch_dims(const plan::RopeLaunchShape& shape) {
  jit::LaunchDims dims;
  dims.grid[0] = shape.grid[0];
  dims.grid[1] = shape.grid[1];
  for (int i = 0; i < 3; ++i) dims.block[i] = shape.block[i];
  dims.shared_bytes = shape.shared_bytes;
  return dims;
}

/// Position id of token (b, s) on an axis as stored on the device, as text.
std::string stored_position(const plan::RopePlanData& plan, const void* positions, std::int64_t b, std::int64_t s,
                            std::int64_t axis) {
  const DType t = *plan.spec.position;
  const std::int64_t at =
      axis * plan.args.position_axis_stride + b * plan.args.position_stride[0] + s * plan.args.position_stride[1];
  std::uint64_t raw = 0;
  const auto address = reinterpret_cast<CUdeviceptr>(positions) + static_cast<CUdeviceptr>(at * static_cast<std::int64_t>(dtype_size(t)));
  jit::check(jit::driver().cuMemcpyDtoH(&raw, address, dtype_size(t)), "cuMemcpyDtoH(rope position)");
  switch (t) {
    case DType::i8: return std::to_string(static_cast<std::int8_t>(raw));
    case DType::i16: return std::to_string(static_cast<std::int16_t>(raw));
    case DType::i32: return std::to_string(static_cast<std::int32_t>(raw));
    case DType::i64: return std::to_string(static_cast<std::int64_t>(raw));
    default: return std::to_string(raw);  // unsigned: the low bytes are the value
  }
}

/// Every pointer the kernel reads or writes, with the bytes it may reach.
std::vector<jit::PointerUse> pointer_uses(const plan::RopePlanData& plan, const plan::RopeKernelArgs& args) {
  const RopeDesc& desc = plan.desc;
  const TensorDesc& table = desc.table;
  // Only rows [0, P) and the first R/2 columns of a table are read.
  const TensorDesc read_table{{table.shape[0], plan.spec.rotary_dim / 2}, table.effective_strides(), table.dtype};
  std::vector<jit::PointerUse> uses = {{"pointers.x", args.x, byte_range(desc.x)},
                                       {"pointers.y", args.y, byte_range(*desc.y)},
                                       {"pointers.cos", args.cos, byte_range(read_table)},
                                       {"pointers.sin", args.sin, byte_range(read_table)}};
  if (plan.spec.has_k) uses.push_back({"pointers.k", args.k, byte_range(*desc.k)});
  if (desc.k_out) uses.push_back({"pointers.k_out", args.k_out, byte_range(*desc.k_out)});
  if (plan.spec.cache) {
    uses.push_back({"pointers.v", args.v, byte_range(*desc.v)});
    uses.push_back({"pointers.slots", args.slots, byte_range(*desc.slots)});
    if (plan.cache_blocks * plan.block_size > 0) {  // an empty cache is never written
      uses.push_back({"pointers.k_cache", args.k_cache, byte_range(*desc.k_cache)});
      uses.push_back({"pointers.v_cache", args.v_cache, byte_range(*desc.v_cache)});
    }
  }
  if (plan.spec.cache_quantize != RopeQuantize::none) {
    uses.push_back({"pointers.k_cache_scale", args.k_cache_scale, ByteRange{0, 4}});
    uses.push_back({"pointers.v_cache_scale", args.v_cache_scale, ByteRange{0, 4}});
  }
  if (plan.spec.position) uses.push_back({"pointers.positions", args.positions, byte_range(*desc.positions)});
  if (desc.q_scale) uses.push_back({"pointers.q_scale", args.q_scale, byte_range(*desc.q_scale)});
  if (desc.k_scale) uses.push_back({"pointers.k_scale", args.k_scale, byte_range(*desc.k_scale)});
  return uses;
}

/// Slot of token (b, s) as stored on the device, as text.
std::string stored_slot(const plan::RopePlanData& plan, const void* slots, std::int64_t b, std::int64_t s) {
  const std::int64_t at = b * plan.args.slot_stride[0] + s * plan.args.slot_stride[1];
  const std::size_t bytes = dtype_size(plan.spec.slot);
  std::uint64_t raw = 0;
  const auto address = reinterpret_cast<CUdeviceptr>(slots) + static_cast<CUdeviceptr>(at * static_cast<std::int64_t>(bytes));
  jit::check(jit::driver().cuMemcpyDtoH(&raw, address, bytes), "cuMemcpyDtoH(rope slot)");
  return bytes == 4 ? std::to_string(static_cast<std::int32_t>(raw)) : std::to_string(static_cast<std::int64_t>(raw));
}

/// "batch b, seq s" (4-D) or "seq s" for a token index.
std::string token_text(const plan::RopePlanData& plan, std::int64_t token) {
  const std::int64_t b = token / plan.seq, s = token % plan.seq;
  return plan.spec.four_d ? fmt::format("batch {}, seq {}", b, s) : fmt::format("seq {}", s);
}

/// The checked-mode error of the first token whose position is outside the table.
[[noreturn]] void bad_position_error(const plan::RopePlanData& plan, const plan::RopeKernelArgs& args,
                                     std::int64_t token) {
  const std::int64_t b = token / plan.seq, s = token % plan.seq;
  const std::string where = token_text(plan, token);
  const std::int64_t rows = plan.args.table_rows;
  const std::int64_t batch_at = plan.spec.positions_batched ? b : 0;
  if (plan.spec.position_axes > 1) {
    std::vector<std::string> ids;
    for (std::int64_t axis = 0; axis < plan.spec.position_axes; ++axis)
      ids.push_back(stored_position(plan, args.positions, batch_at, s, axis));
    invalid_argument("positions[axes, {}] = ({}): some axis is outside the table rows [0, {}) (the first such token, "
                     "{}); its outputs are NaN",
                     where, fmt::join(ids, ", "), rows, where);
  }
  if (plan.spec.position)
    invalid_argument("positions[{}] = {} is outside the table rows [0, {}) (the first such token, {}); its outputs "
                     "are NaN",
                     where, stored_position(plan, args.positions, batch_at, s, 0), rows, where);
  invalid_argument("position {} (seq {} + offset {}) is outside the table rows [0, {}) (the first such token, {}); "
                   "its outputs are NaN",
                   s + args.offset, s, args.offset, rows, where);
}

/// Launch, then wait and throw naming the first token whose position is outside the table (or,
/// with a cache append, whose slot is past the cache).
void checked_launch(const RopePlanImpl& plan, const jit::KernelHandle& kernel, plan::RopeKernelArgs& args,
                    const jit::StreamContext& context, void* stream) {
  const jit::Driver& d = jit::driver();
  CUdeviceptr words = 0;
  constexpr std::size_t bytes = 2 * sizeof(std::uint64_t);  // the first bad position's token, the first bad slot's
  jit::check(d.cuMemAlloc(&words, bytes), "cuMemAlloc(rope checked-mode words)");
  struct Free {
    CUdeviceptr p;
    ~Free() { jit::driver().cuMemFree(p); }
  } free_words{words};
  jit::check(d.cuMemsetD8(words, 0xff, bytes), "cuMemsetD8(rope checked-mode words)");
  // The memset runs on the legacy stream; a non-blocking caller stream would not wait for it.
  jit::check(d.cuCtxSynchronize(), "cuCtxSynchronize before a checked rope launch");
  args.bad_token = reinterpret_cast<unsigned long long*>(words);
  void* params[] = {&args};
  kernel.launch(context, launch_dims(plan.data.launch), stream, params);
  jit::check(d.cuStreamSynchronize(static_cast<CUstream>(stream)), "rope (checked launch)");
  std::uint64_t bad[2] = {};
  jit::check(d.cuMemcpyDtoH(bad, words, bytes), "cuMemcpyDtoH(rope checked-mode words)");
  if (bad[0] != ~std::uint64_t{0}) bad_position_error(plan.data, args, static_cast<std::int64_t>(bad[0]));
  if (bad[1] == ~std::uint64_t{0}) return;
  const auto token = static_cast<std::int64_t>(bad[1]);
  const std::string where = token_text(plan.data, token);
  invalid_argument("slots[{}] = {} is past the cache's {} slots ({} blocks of {}) (the first such token, {}); its k "
                   "and v were not appended",
                   where, stored_slot(plan.data, args.slots, token / plan.data.seq, token % plan.data.seq),
                   args.cache_slots, plan.data.cache_blocks, plan.data.block_size, where);
}

std::string describe_position_source(const RopeDesc& desc) {
  if (!desc.positions) return "none: position = seq index + offset";
  if (desc.axis_rule != RopeAxisRule::none)
    return fmt::format("{}, {} axes, rule {} [{}]", ops::tensor_text(*desc.positions), desc.axis_sections.size(),
                       rope_axis_rule_name(desc.axis_rule), fmt::join(desc.axis_sections, ","));
  return ops::tensor_text(*desc.positions);
}

}  // namespace

namespace {

const jit::KernelHandle& registered_rope_kernel(const plan::RopeSpec& spec, const std::string& manifest,
                                                unsigned shared_bytes) {
  return jit::registered_kernel(plan::rope_key(spec), [&] { return codegen::rope_program(spec, manifest); },
                                shared_bytes);
}

}  // namespace

RopePlanImpl::RopePlanImpl(plan::RopePlanData planned)
    : data(std::move(planned)),
      manifest(plan::rope_manifest_line(data)),
      kernel(&registered_rope_kernel(data.spec, manifest, data.launch.shared_bytes)) {
  if (data.spec.access > 1 || data.spec.table_access > 1)
    scalar_kernel = &registered_rope_kernel(plan::scalar_variant(data.spec), manifest, data.launch.shared_bytes);
  const bool quantized = data.spec.q_quantize != RopeQuantize::none || data.spec.k_quantize != RopeQuantize::none;
  if (quantized && !data.empty) {
    const RopeDesc& d = data.desc;
    std::size_t i = 0;
    for (const TensorDesc* t : {&d.x, d.k ? &*d.k : nullptr, &*d.y, d.k_out ? &*d.k_out : nullptr,
                                d.q_scale ? &*d.q_scale : nullptr, d.k_scale ? &*d.k_scale : nullptr})
      quantized_ranges[i++] = t ? byte_range(*t) : ByteRange{};
  }
}

std::vector<const jit::Program*> RopePlanImpl::programs() const {
  std::vector<const jit::Program*> out = {&kernel->program()};
  if (scalar_kernel) out.push_back(&scalar_kernel->program());
  return out;
}

std::vector<SpecKey> RopePlanImpl::kernel_keys() const {
  std::vector<SpecKey> out = {plan::rope_key(data.spec)};
  if (scalar_kernel) out.push_back(plan::rope_key(plan::scalar_variant(data.spec)));
  return out;
}

std::shared_ptr<const RopePlanImpl> make_rope_plan(const RopeDesc& desc, const plan::RopeOverrides& overrides) {
  return std::make_shared<const RopePlanImpl>(plan::plan_rope_data(desc, overrides));
}

std::string describe(const RopePlanImpl& plan) {
  const plan::RopePlanData& d = plan.data;
  const plan::RopeSpec& spec = d.spec;
  std::string text = fmt::format("rope plan ({}, {})\n", rope_style_name(spec.style),
                                 spec.inverse ? "inverse" : "forward");
  text += fmt::format("  x:          {}\n  y:          {}{}\n", ops::tensor_text(d.desc.x), ops::tensor_text(*d.desc.y),
                      spec.inplace ? " (in place)" : "");
  if (d.desc.k)
    text += fmt::format("  k:          {}\n  k_out:      {}\n", ops::tensor_text(*d.desc.k),
                        d.desc.k_out ? ops::tensor_text(*d.desc.k_out) : "none (k goes to the cache only)");
  if (spec.cache)
    text += fmt::format("  v:          {}\n  k_cache:    {} ({}, {} blocks of {}{})\n  v_cache:    {}\n  slots:      {}{}\n",
                        ops::tensor_text(*d.desc.v), ops::tensor_text(*d.desc.k_cache),
                        kv_cache_layout_name(d.desc.cache_layout), d.cache_blocks, d.block_size,
                        spec.cache_quantize == RopeQuantize::none
                            ? ""
                            : fmt::format(", {} codes of value / scale", rope_quantize_name(spec.cache_quantize)),
                        ops::tensor_text(*d.desc.v_cache), ops::tensor_text(*d.desc.slots),
                        spec.checked ? " (checked)" : "");
  text += fmt::format("  rotary dim: {} of {}\n  table:      {} (cos and sin)\n  positions:  {}{}\n",
                      spec.rotary_dim, spec.head_dim, ops::tensor_text(d.desc.table), describe_position_source(d.desc),
                      spec.checked ? " (checked)" : "");
  if (d.desc.check_pointers) text += "  pointers:   checked at each launch (device, allocation bounds)\n";
  text += fmt::format("  tokens:     {} x {} heads ({} q + {} k{})\n", d.args.tokens, d.args.heads_total, d.heads_q,
                      d.heads_k, spec.cache ? fmt::format(" + {} v", d.heads_k) : "");
  text += fmt::format("  launch:     grid [{},{}] block [{},{},{}], {} head(s) per thread{}\n", d.launch.grid[0],
                      d.launch.grid[1], d.launch.block[0], d.launch.block[1], d.launch.block[2],
                      d.launch.heads_per_thread, d.empty ? " (empty: nothing to launch)" : "");
  if (spec.hadamard_group != 0)
    text += fmt::format("  hadamard:   groups of {} heads, n = {}, scale {}, {}{}; {} thread(s) per row, {} row(s) per "
                        "block, shared memory {} bytes\n",
                        spec.hadamard_group, spec.hadamard_group * spec.head_dim, *d.desc.hadamard_scale,
                        hadamard_order_name(d.desc.hadamard_order), spec.inverse ? " (inverse: run in reverse)" : "",
                        spec.hadamard_threads, spec.hadamard_rows_per_block, d.launch.shared_bytes);
  for (auto [quantize, scales, name] : {std::tuple{spec.q_quantize, &d.desc.q_scale, "q"}, {spec.k_quantize, &d.desc.k_scale, "k"}})
    if (quantize != RopeQuantize::none)
      text += fmt::format("  quantized:  {}'s output as {} codes, scales {}\n", name, rope_quantize_name(quantize),
                          ops::tensor_text(**scales));
  text += fmt::format("  spec:       chunk {} elements, {}-element accesses, {}-element table accesses{}, {}-bit offsets\n",
                      spec.chunk, spec.access, spec.table_access,
                      spec.cache ? fmt::format(", {}-element cache accesses", spec.cache_access) : "",
                      spec.wide_index ? 64 : 32);
  text += ops::kernels_text(plan.programs(), 14);
  text += fmt::format("  manifest:   {}\n", plan.manifest);
  return text;
}

std::string json(const RopePlanImpl& plan) {
  const plan::RopePlanData& d = plan.data;
  const plan::RopeSpec& spec = d.spec;
  const auto tensor = ops::tensor_json;
  const std::string kernels = ops::kernels_json(plan.programs());
  const std::string hadamard =
      spec.hadamard_group == 0
          ? "null"
          : fmt::format(R"({{"group": {}, "n": {}, "scale": {}, "order": "{}"}})", spec.hadamard_group,
                        spec.hadamard_group * spec.head_dim, *d.desc.hadamard_scale,
                        hadamard_order_name(d.desc.hadamard_order));
  const std::string cache =
      !spec.cache ? "null"
                  : fmt::format(R"({{"layout": "{}", "v": {}, "k_cache": {}, "v_cache": {}, "slots": {}, "blocks": {}, )"
                                R"("block_size": {}, "quantize": "{}", "k_out_written": {}}})",
                                kv_cache_layout_name(d.desc.cache_layout), tensor(*d.desc.v), tensor(*d.desc.k_cache),
                                tensor(*d.desc.v_cache), tensor(*d.desc.slots), d.cache_blocks, d.block_size,
                                rope_quantize_name(spec.cache_quantize), !spec.k_out_skipped);
  return fmt::format(
      R"({{"op": "rope", "style": "{}", "x": {}, "y": {}, "k": {}, "k_out": {}, "table": {}, "positions": {}, )"
      R"("spec": {{{}, "positions": "{}", "check_pointers": {}, "index_bits": {}}}, "tokens": {}, "heads_q": {}, )"
      R"("heads_k": {}, "hadamard": {}, "cache": {}, "launch": {{"grid": [{}, {}], "block": [{}, {}, {}], "heads_per_thread": {}, )"
      R"("shared_bytes": {}, "empty": {}}}, "kernels": [{}], "manifest": "{}"}})",
      rope_style_name(spec.style), tensor(d.desc.x), tensor(*d.desc.y), d.desc.k ? tensor(*d.desc.k) : "null",
      d.desc.k_out ? tensor(*d.desc.k_out) : "null", tensor(d.desc.table),
      d.desc.positions ? tensor(*d.desc.positions) : "null", spec_json_members(spec),
      spec.position ? dtype_name(*spec.position) : "none", d.desc.check_pointers, spec.wide_index ? 64 : 32,
      d.args.tokens, d.heads_q, d.heads_k, hadamard, cache, d.launch.grid[0], d.launch.grid[1], d.launch.block[0],
      d.launch.block[1], d.launch.block[2], d.launch.heads_per_thread, d.launch.shared_bytes, d.empty, kernels,
      plan.manifest);
}

}  // namespace detail

std::string_view rope_style_name(RopeStyle style) noexcept { return style == RopeStyle::gptj ? "gptj" : "neox"; }

std::string_view rope_axis_rule_name(RopeAxisRule rule) noexcept {
  switch (rule) {
    case RopeAxisRule::sections: return "sections";
    case RopeAxisRule::interleaved: return "interleaved";
    case RopeAxisRule::blocks: return "blocks";
    case RopeAxisRule::none: break;
  }
  return "none";
}

std::string_view kv_cache_layout_name(KvCacheLayout layout) noexcept {
  return layout == KvCacheLayout::nhd ? "nhd" : layout == KvCacheLayout::hnd ? "hnd" : "none";
}

std::string_view rope_quantize_name(RopeQuantize q) noexcept {
  return q == RopeQuantize::int8 ? "int8" : q == RopeQuantize::fp8_e4m3 ? "fp8-e4m3" : "none";
}

std::string_view hadamard_order_name(HadamardOrder order) noexcept {
  return order == HadamardOrder::hadamard_then_rope ? "hadamard-then-rope" : "rope-then-hadamard";
}

RopePlan plan_rope(const RopeDesc& desc) {
  RopePlan plan;
  plan.impl_ = detail::make_rope_plan(desc, {});
  if (jit::recording()) jit::record_manifest_line(plan.impl_->manifest, plan.impl_->kernel_keys());
  return plan;
}

const detail::RopePlanImpl& RopePlan::impl() const {
  if (!impl_) fail(ErrorCode::invalid_argument, "this RopePlan is empty; create it with plan_rope");
  return *impl_;
}

void RopePlan::launch(const RopePointers& pointers, void* stream) const {
  const detail::RopePlanImpl& plan = impl();
  if (plan.data.empty) return;
  plan::RopeKernelArgs args = plan.data.args;
  detail::bind_pointers(plan, pointers, args);
  const jit::KernelHandle& kernel =
      detail::vector_aligned(plan.data, args) || !plan.scalar_kernel ? *plan.kernel : *plan.scalar_kernel;
  const jit::StreamContext context(stream);
  if (plan.data.desc.check_pointers)
    for (const jit::PointerUse& use : detail::pointer_uses(plan.data, args)) jit::check_pointer(use, context.device());
  if (plan.data.spec.checked) return detail::checked_launch(plan, kernel, args, context, stream);
  void* params[] = {&args};
  kernel.launch(context, detail::launch_dims(plan.data.launch), stream, params);
}

std::string RopePlan::describe() const { return detail::describe(impl()); }
std::string RopePlan::json() const { return detail::json(impl()); }
std::string RopePlan::manifest_line() const { return impl().manifest; }

namespace {

/// Everything in `desc`, as text: the one-shot cache's key.
std::string desc_key(const RopeDesc& desc) {
  auto tensor = [](const std::optional<TensorDesc>& t) {
    return t ? fmt::format("{}/{}:{}:{}", dtype_name(t->dtype), t->elem_bytes, fmt::join(t->shape, ","),
                           fmt::join(t->strides, ","))
             : std::string("-");
  };
  return fmt::format("{}|{}|{}|{}|{}|{}|{}|{}{}{}{}{}|{}/{}/{}|{}:{}|{}:{}|{}:{}|{}:{}:{}:{}:{}:{}", rope_style_name(desc.style),
                     tensor(desc.x), tensor(desc.y), tensor(desc.k), tensor(desc.k_out), tensor(desc.table),
                     tensor(desc.positions), desc.rotary_dim, desc.inplace ? 'i' : '-', desc.inverse ? 'v' : '-',
                     desc.checked ? 'c' : '-', desc.check_pointers ? 'p' : '-', desc.hadamard_group,
                     desc.hadamard_scale ? fmt::format("{}", *desc.hadamard_scale) : "-",
                     hadamard_order_name(desc.hadamard_order), rope_quantize_name(desc.q_quantize),
                     tensor(desc.q_scale), rope_quantize_name(desc.k_quantize), tensor(desc.k_scale),
                     rope_axis_rule_name(desc.axis_rule), fmt::join(desc.axis_sections, ","),
                     kv_cache_layout_name(desc.cache_layout), tensor(desc.v), tensor(desc.k_cache),
                     tensor(desc.v_cache), tensor(desc.slots), rope_quantize_name(desc.cache_quantize));
}

}  // namespace

void rope(const RopeDesc& desc, const RopePointers& pointers, void* stream) {
  static PlanCache<RopePlan> plans;
  const std::string key = desc_key(desc);
  std::optional<RopePlan> plan = plans.find(key);
  if (!plan) {
    plan = plan_rope(desc);
    plans.insert(key, *plan);
  }
  plan->launch(pointers, stream);
}

}  // namespace shapejit
