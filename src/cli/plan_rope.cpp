// `shapejit plan rope ...`: parses a rope manifest line, plans it, returns the plan and its kernels.
#include <fmt/format.h>

#include <memory>

#include "cli/commands.hpp"
#include "core/errors.hpp"
#include "ops/rope/impl.hpp"
#include "ops/rope/manifest.hpp"

namespace shapejit::cli {
namespace {

struct RopeOptions {
  std::string algo;
  std::string dtype;
  std::string table_dtype;
  std::string pos_dtype = "i64";
  std::string pos_layout = "batch";
  std::vector<std::int64_t> shape;
  std::int64_t k_heads = -1;
  std::int64_t rotary_dim = 0;
  bool inplace = false, inverse = false, checked = false, check_pointers = false;
  int access = 16, table_access = 16, index_bits = 0;
};

DType dtype_option(const std::string& name, const char* option) {
  const auto t = parse_dtype(name);
  if (!t) invalid_argument("{} {} is not a dtype name (f16 bf16 f32 f64, i8 ... u64)", option, name);
  return *t;
}

plan::RopeManifest to_manifest(const RopeOptions& o) {
  plan::RopeManifest m;
  m.style = o.algo == "gptj" ? RopeStyle::gptj : RopeStyle::neox;
  m.dtype = dtype_option(o.dtype, "--dtype");
  if (!o.table_dtype.empty()) m.table_dtype = dtype_option(o.table_dtype, "--table-dtype");
  m.position_dtype = o.pos_dtype == "none" ? std::nullopt : std::optional(dtype_option(o.pos_dtype, "--pos-dtype"));
  m.positions_shared = o.pos_layout == "seq";
  m.shape = o.shape;
  if (o.k_heads >= 0) m.k_heads = o.k_heads;
  m.rotary_dim = o.rotary_dim;
  m.inplace = o.inplace;
  m.inverse = o.inverse;
  m.checked = o.checked;
  m.check_pointers = o.check_pointers;
  m.overrides = {o.access, o.table_access, o.index_bits};
  return m;
}

PlanResult build(const plan::RopeManifest& m) {
  const auto plan = detail::make_rope_plan(plan::manifest_desc(m), m.overrides);
  PlanResult result;
  result.text = detail::describe(*plan);
  result.json = nlohmann::json::parse(detail::json(*plan));
  for (const jit::Program* p : plan->programs()) result.programs.push_back(*p);
  return result;
}

}  // namespace

void add_plan_rope(CLI::App& plan, PlanBuilder& builder) {
  auto o = std::make_shared<RopeOptions>();
  CLI::App* cmd = plan.add_subcommand("rope", "Rotary position embedding of [batch,] seq, heads, dhead data");
  cmd->add_option("--algo", o->algo, "Pair style: neox (x[i], x[i+R/2]) or gptj (x[2i], x[2i+1])")
      ->required()
      ->check(CLI::IsMember({"neox", "gptj"}));
  cmd->add_option("--dtype", o->dtype, "Data dtype: f16, bf16, f32 or f64")->required();
  cmd->add_option("--table-dtype", o->table_dtype, "sin/cos table dtype (default f32; f64 for f64 data)");
  cmd->add_option("--pos-dtype", o->pos_dtype, "Position id dtype (i8 ... u64), or none for seq index + offset")
      ->capture_default_str();
  cmd->add_option("--pos-layout", o->pos_layout, "Position ids per batch ([batch, seq]) or shared ([seq]), 4-D only")
      ->check(CLI::IsMember({"batch", "seq"}))
      ->capture_default_str();
  cmd->add_option("--shape", o->shape, "x's shape: seq,heads,dhead or batch,seq,heads,dhead")
      ->required()
      ->delimiter(',');
  cmd->add_option("--k-heads", o->k_heads, "Rotate k too, with this many heads, in the same launch");
  cmd->add_option("--rotary-dim", o->rotary_dim, "Rotated leading dims R (default dhead)");
  cmd->add_flag("--inplace", o->inplace, "Write the outputs over the inputs");
  cmd->add_flag("--inverse", o->inverse, "Rotate by -angle (backward pass)");
  cmd->add_flag("--checked", o->checked, "Fail on positions outside the table (synchronizes)");
  cmd->add_flag("--check-pointers", o->check_pointers,
                "Verify at each launch that every pointer is memory of the stream's device holding its view");
  cmd->add_option("--access", o->access, "At most this many data elements per access (strided plans)")
      ->check(CLI::IsMember({1, 2, 4, 8, 16}));
  cmd->add_option("--table-access", o->table_access, "At most this many table elements per access")
      ->check(CLI::IsMember({1, 2, 4, 8, 16}));
  cmd->add_option("--index", o->index_bits, "Offset width: 32 or 64 (default: as the shapes need)")
      ->check(CLI::IsMember({32, 64}));
  cmd->callback([o, &builder] { builder = [m = to_manifest(*o)] { return build(m); }; });
}

}  // namespace shapejit::cli
