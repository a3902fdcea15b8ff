// The operator registry: manifest lines are parsed and planned by the library, the lines a plan
// records plan again to the same kernels, and bad lines are errors naming the option.
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "ops/registry.hpp"
#include "ops/rope/impl.hpp"
#include "shapejit/rearrange.hpp"
#include "shapejit/rope.hpp"
#include "shapejit/shapejit.h"

using namespace shapejit;

namespace {

std::string error_of(std::string_view line) {
  try {
    ops::plan_manifest_line(line);
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::vector<std::string> sources(const std::vector<jit::Program>& programs) {
  std::vector<std::string> out;
  for (const jit::Program& p : programs) out.push_back(p.source);
  return out;
}

}  // namespace

TEST_CASE("every registered operator has a name, a summary, options with help and a planner") {
  REQUIRE(ops::operators().size() >= 2);
  for (const ops::Operator& op : ops::operators()) {
    CAPTURE(op.name);
    CHECK_FALSE(op.name.empty());
    CHECK_FALSE(op.summary.empty());
    CHECK(static_cast<bool>(op.plan));
    CHECK(&ops::find_operator(op.name) == &op);
    for (const ops::ManifestOption& o : op.options) CHECK_FALSE(o.help.empty());
  }
}

TEST_CASE("a rearrange plan's manifest line plans again, in the library, to the same kernels") {
  const TensorDesc src{{6, 40, 33}, {}, DType::f16};
  const TensorDesc view = permuted(src, {2, 0, 1});
  const RearrangePlan plan = plan_rearrange(TensorDesc{view.shape, {}, DType::f16}, view);
  const ops::PlannedLine again = ops::plan_manifest_line(plan.manifest_line());
  REQUIRE_FALSE(again.programs.empty());
  const ops::PlannedLine direct =
      ops::plan_manifest_line("rearrange --dtype f16 --shape 6,40,33 --perm 2,0,1   ");
  CHECK(sources(again.programs) == sources(direct.programs));
  CHECK(contains(again.json, "\"op\": \"rearrange\""));
}

TEST_CASE("a rope plan's manifest line plans again to the same kernels, options in any order and with =") {
  RopeDesc desc;
  desc.style = RopeStyle::gptj;
  desc.x = TensorDesc{{2, 64, 8, 128}, {}, DType::bf16};
  desc.k = TensorDesc{{2, 64, 2, 128}, {}, DType::bf16};
  desc.table = TensorDesc{{64, 64}, {}, DType::f32};
  desc.positions = TensorDesc{{2, 64}, {}, DType::i32};
  const RopePlan plan = plan_rope(desc);
  std::vector<std::string> expected;
  for (const jit::Program* p : plan.impl().programs()) expected.push_back(p->source);
  CHECK(sources(ops::plan_manifest_line(plan.manifest_line()).programs) == expected);
  CHECK(sources(ops::plan_manifest_line("rope --shape=2,64,8,128 --k-heads 2 --pos-dtype=i32 --dtype bf16 --algo gptj")
                    .programs) == expected);
}

namespace {

/// q [2, 8, 8, 64] and k (4 heads) bf16, i32 positions, fused with the transform of groups of 4 heads.
RopeDesc fused_rope_desc() {
  RopeDesc desc;
  desc.x = TensorDesc{{2, 8, 8, 64}, {}, DType::bf16};
  desc.k = TensorDesc{{2, 8, 4, 64}, {}, DType::bf16};
  desc.table = TensorDesc{{16, 32}, {}, DType::f32};
  desc.positions = TensorDesc{{2, 8}, {}, DType::i32};
  desc.hadamard_group = 4;
  return desc;
}

}  // namespace

TEST_CASE("a fused rope + Hadamard plan's manifest line plans again to the same kernels, scale and order included") {
  RopeDesc desc = fused_rope_desc();
  for (const HadamardOrder order : {HadamardOrder::rope_then_hadamard, HadamardOrder::hadamard_then_rope}) {
    desc.hadamard_order = order;
    for (const std::optional<double> scale : {std::optional<double>(), std::optional<double>(1.0 / 3.0)}) {
      desc.hadamard_scale = scale;
      const RopePlan plan = plan_rope(desc);  // needs the fused planner
      CAPTURE(plan.manifest_line());
      CHECK(contains(plan.manifest_line(), "--hadamard-group 4"));
      CHECK(contains(plan.manifest_line(), "--hadamard-scale") == scale.has_value());
      CHECK(contains(plan.manifest_line(), "--hadamard-order") == (order == HadamardOrder::hadamard_then_rope));
      std::vector<std::string> expected;
      for (const jit::Program* p : plan.impl().programs()) expected.push_back(p->source);
      const ops::PlannedLine again = ops::plan_manifest_line(plan.manifest_line());
      CHECK(sources(again.programs) == expected);
      CHECK(contains(again.text, "manifest:   " + plan.manifest_line() + "\n"));  // the scale round-trips exactly
    }
  }
}

TEST_CASE("a quantized rope + Hadamard plan's manifest line plans again to the same kernels") {
  RopeDesc desc = fused_rope_desc();
  const RopeQuantize kinds[] = {RopeQuantize::none, RopeQuantize::int8, RopeQuantize::fp8_e4m3};
  for (const HadamardOrder order : {HadamardOrder::rope_then_hadamard, HadamardOrder::hadamard_then_rope}) {
    desc.hadamard_order = order;
    for (const RopeQuantize q : kinds) {
      for (const RopeQuantize k : kinds) {
        if (q == RopeQuantize::none && k == RopeQuantize::none) continue;
        desc.q_quantize = q;
        desc.k_quantize = k;
        const RopePlan plan = plan_rope(desc);  // needs the quantizing planner
        CAPTURE(plan.manifest_line());
        CHECK(contains(plan.manifest_line(), " --q-quantize ") == (q != RopeQuantize::none));
        CHECK(contains(plan.manifest_line(), " --k-quantize ") == (k != RopeQuantize::none));
        if (q != RopeQuantize::none)
          CHECK(contains(plan.manifest_line(), " --q-quantize " + std::string(rope_quantize_name(q))));
        if (k != RopeQuantize::none)
          CHECK(contains(plan.manifest_line(), " --k-quantize " + std::string(rope_quantize_name(k))));
        std::vector<std::string> expected;
        for (const jit::Program* p : plan.impl().programs()) expected.push_back(p->source);
        const ops::PlannedLine again = ops::plan_manifest_line(plan.manifest_line());
        CHECK(sources(again.programs) == expected);
        CHECK(contains(again.text, "manifest:   " + plan.manifest_line() + "\n"));
      }
    }
  }
  // none is the default, written or not.
  const std::string base = "rope --algo neox --dtype bf16 --shape 2,8,8,64 --k-heads 4 --hadamard-group 4";
  CHECK(sources(ops::plan_manifest_line(base + " --q-quantize none --k-quantize none").programs) ==
        sources(ops::plan_manifest_line(base).programs));
}

TEST_CASE("list options take commas, several words or repeats, and a # comment ends the line, as on the CLI") {
  const std::vector<std::string> expected =
      sources(ops::plan_manifest_line("rearrange --dtype f16 --shape 6,40,33 --perm 2,0,1").programs);
  CHECK(sources(ops::plan_manifest_line("rearrange --dtype f16 --shape 6 40 33 --perm 2 0 1").programs) == expected);
  CHECK(sources(ops::plan_manifest_line("rearrange --dtype f16 --shape 6,40 --shape 33 --perm 2,0,1  # c").programs) ==
        expected);
  CHECK_FALSE(ops::plan_manifest_line("rearrange --dtype f32 --shape 8,4 --src-strides -1,8").programs.empty());
}

TEST_CASE("bad manifest lines are errors naming the operation or option") {
  CHECK(contains(error_of("transpose --dtype f16"), "unknown operation 'transpose'; a manifest line starts with one of: rearrange, rope"));
  CHECK(contains(error_of(""), "empty"));
  CHECK(contains(error_of("rearrange --dtype f16"), "--shape is required"));
  CHECK(contains(error_of("rearrange --dtype f16 --shape 4,x"), "--shape: x is not an integer"));
  CHECK(contains(error_of("rearrange --dtype f16 --shape 4,4 --colour red"), "unknown option --colour"));
  CHECK(contains(error_of("rearrange --dtype f16 --dtype f32 --shape 4"), "--dtype is given twice"));
  CHECK(contains(error_of("rearrange --dtype f16 --shape 4,4,"), "--shape:  is not an integer"));
  CHECK(contains(error_of("rearrange --dtype f16 --shape 4,4 --perm 4294967296,1"), "--perm: 4294967296 is not a dimension"));
  CHECK(contains(error_of("rope --algo neox --dtype bf16 --shape 1,4,32,128 --index 4294967360"), "--index"));
  CHECK(contains(error_of("rearrange --dtype f16 --shape 4 --exact=1"), "--exact is a flag"));
  CHECK(contains(error_of("rearrange --dtype f16 --shape"), "--shape needs a value"));
  CHECK(contains(error_of("rearrange f16"), "'f16' is not an option"));
  CHECK(contains(error_of("rope --algo sideways --dtype bf16 --shape 1,4,32,128"), "--algo: sideways is not one of neox, gptj"));
  CHECK(contains(error_of("rope --algo neox --dtype bf16 --shape 1,4,32,128 --access 3"), "--access: 3 is not one of"));
  CHECK(contains(error_of("rope --algo neox --dtype bf16 --shape 1,4,32,128 --hadamard-group 4 --hadamard-order sideways"),
                 "--hadamard-order: sideways is not one of rope-then-hadamard, hadamard-then-rope"));
  CHECK(contains(error_of("rope --algo neox --dtype bf16 --shape 1,4,32,128 --hadamard-group 4 --hadamard-scale 0.5x"),
                 "--hadamard-scale 0.5x is not a number"));
  CHECK(contains(error_of("rope --algo neox --dtype bf16 --shape 1,4,32,128 --hadamard-group 4 --q-quantize int4"),
                 "--q-quantize: int4 is not one of none, int8, fp8-e4m3"));
  CHECK(contains(error_of("rope --algo neox --dtype bf16 --shape 1,4,32,128 --k-heads 8 --hadamard-group 4 --k-quantize fp8"),
                 "--k-quantize: fp8 is not one of none, int8, fp8-e4m3"));
  CHECK(contains(error_of("rope --algo neox --dtype bf16 --shape 1,4,32,128 --hadamard-group four"),
                 "--hadamard-group: four is not an integer"));
  CHECK(contains(error_of("rearrange --dtype f16 --shape " + std::string(5000, '7')), "manifest lines are at most 4096"));
}

TEST_CASE("manifest lines are described through the C++ and C APIs") {
  const std::string line = "rearrange --dtype f32 --shape 64,48 --perm 1,0";
  CHECK(contains(describe_manifest_line(line), "transpose"));
  CHECK(contains(describe_manifest_line(line, true), "\"op\": \"rearrange\""));
  std::size_t length = 0;
  CHECK(sj_describe_manifest_line(line.c_str(), 0, nullptr, 0, &length) == SJ_INVALID_ARGUMENT);
  REQUIRE(length > 0);
  std::string buffer(length + 1, '\0');
  REQUIRE(sj_describe_manifest_line(line.c_str(), 0, buffer.data(), buffer.size(), &length) == SJ_OK);
  CHECK(buffer.c_str() == describe_manifest_line(line));
  CHECK(sj_describe_manifest_line("rearrange --dtype f99 --shape 4", 0, buffer.data(), buffer.size(), nullptr) ==
        SJ_INVALID_ARGUMENT);
  CHECK(contains(sj_last_error(), "--dtype f99"));
}
