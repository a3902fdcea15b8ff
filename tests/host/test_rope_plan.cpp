// Rope planning without a GPU: every validation error, the planner's choices, manifest lines, the C API.
#include <doctest/doctest.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "jit/program.hpp"
#include "ops/rope/impl.hpp"
#include "ops/registry.hpp"
#include "ops/rope/manifest.hpp"
#include "shapejit/rope.h"
#include "shapejit/rope.hpp"

using namespace shapejit;

namespace {

/// A valid 4-D NeoX plan: bf16 q [2,5,4,64], k [2,5,2,64], f32 tables [16,32], i64 positions [2,5].
RopeDesc valid_desc() {
  RopeDesc d;
  d.style = RopeStyle::neox;
  d.x = {{2, 5, 4, 64}, {}, DType::bf16};
  d.k = TensorDesc{{2, 5, 2, 64}, {}, DType::bf16};
  d.table = {{16, 32}, {}, DType::f32};
  d.positions = TensorDesc{{2, 5}, {}, DType::i64};
  return d;
}

/// The message of the invalid_argument error planning `desc` throws ("" if it plans).
std::string plan_error(const RopeDesc& desc) {
  try {
    plan::plan_rope_data(desc);
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
    return e.what();
  }
  return "";
}

void check_rejected(const std::function<void(RopeDesc&)>& change, const std::string& expected) {
  RopeDesc desc = valid_desc();
  change(desc);
  const std::string message = plan_error(desc);
  INFO("message: " << message);
  CHECK(message.find(expected) != std::string::npos);
}

}  // namespace

TEST_CASE("the valid descriptor plans") { CHECK(plan_error(valid_desc()).empty()); }

TEST_CASE("rope rejects each invalid argument with a message naming it") {
  check_rejected([](RopeDesc& d) { d.x.shape = {5, 64}; }, "x has shape [5,64] (rank 2); it must be [seq, heads, dhead]");
  check_rejected([](RopeDesc& d) { d.x.shape[3] = 63, d.k->shape[3] = 63; }, "x.shape[3] (dhead) is 63; it must be even");
  check_rejected([](RopeDesc& d) { d.rotary_dim = 31; }, "rotary_dim is 31; it must be even");
  check_rejected([](RopeDesc& d) { d.rotary_dim = 66; }, "rotary_dim is 66; it must be at most dhead = 64");
  check_rejected([](RopeDesc& d) { d.table.shape = {16, 31}; }, "table is 31 wide; it must be at least rotary_dim/2 = 32");
  check_rejected([](RopeDesc& d) { d.x.strides = {1280, 256, 64, 2}; }, "x.strides[3] is 2; the dhead stride must be 1");
  check_rejected([](RopeDesc& d) { d.y = TensorDesc{{2, 5, 4, 64}, {1280, 256, 64, 3}, DType::bf16}; },
                 "y.strides[3] is 3; the dhead stride must be 1");
  check_rejected([](RopeDesc& d) { d.k->strides = {640, 128, 64, 4}; }, "k.strides[3] is 4");
  check_rejected([](RopeDesc& d) { d.y = TensorDesc{{2, 5, 3, 64}, {}, DType::bf16}; },
                 "y has shape [2,5,3,64] but x has [2,5,4,64]; they must match");
  check_rejected([](RopeDesc& d) { d.y = TensorDesc{{2, 5, 4, 64}, {}, DType::f16}; },
                 "y.dtype is f16 but must be bf16 (x's dtype)");
  check_rejected([](RopeDesc& d) { d.k->shape[0] = 3; }, "k has shape [3,5,2,64] but x has [2,5,4,64]; they may differ only in heads");
  check_rejected([](RopeDesc& d) { d.k->shape[1] = 4; }, "k has shape [2,4,2,64]");
  check_rejected([](RopeDesc& d) { d.k->shape[3] = 32; }, "k has shape [2,5,2,32]");
  check_rejected([](RopeDesc& d) { d.k->dtype = DType::f32; }, "k.dtype is f32 but x.dtype is bf16");
  check_rejected([](RopeDesc& d) { d.k_out = TensorDesc{{2, 5, 3, 64}, {}, DType::bf16}; }, "k_out has shape [2,5,3,64] but k has");
  check_rejected([](RopeDesc& d) { d.k.reset(), d.k_out = TensorDesc{{2, 5, 2, 64}, {}, DType::bf16}; },
                 "k_out is given without k");
  check_rejected([](RopeDesc& d) { d.positions->shape = {2, 6}; },
                 "positions has shape [2,6]; it must be [seq] = [5] or [batch, seq] = [2,5]");
  check_rejected([](RopeDesc& d) { d.positions->shape = {5, 1}; }, "positions has shape [5,1]");
  check_rejected([](RopeDesc& d) { d.positions->dtype = DType::f32; }, "positions.dtype is f32; positions must be an integer type");
  check_rejected([](RopeDesc& d) { d.x.dtype = DType::i32, d.k->dtype = DType::i32; },
                 "x.dtype is i32; rope data must be f16, bf16, f32 or f64");
  check_rejected([](RopeDesc& d) { d.table.dtype = DType::u16; }, "table.dtype is u16; sin/cos tables must be");
  check_rejected([](RopeDesc& d) { d.table.strides = {32, 2}; }, "table.strides[1] is 2; table columns must be contiguous");
  check_rejected([](RopeDesc& d) { d.table.shape = {0, 32}; }, "table has 0 rows");
  check_rejected([](RopeDesc& d) { d.table.shape = {16}; }, "table has shape [16]; it must be [P, W]");
  check_rejected([](RopeDesc& d) { d.y = TensorDesc{{2, 5, 4, 64}, {1280, 256, 0, 1}, DType::bf16}; },
                 "y.strides[2] is 0 with extent 4: output rows would overlap");
  check_rejected(
      [](RopeDesc& d) {
        d.inplace = true;
        d.y = TensorDesc{{2, 5, 4, 64}, {2560, 512, 128, 1}, DType::bf16};
      },
      "an in-place plan writes x itself");
  check_rejected([](RopeDesc& d) { d.x.shape[1] = -1; }, "x.shape[1] is -1; extents must be 0 or more");
  check_rejected([](RopeDesc& d) { d.x.strides = {1, 1}; }, "x has 2 strides for rank 4");

  RopeDesc three_d;
  three_d.x = {{5, 4, 64}, {}, DType::f16};
  three_d.table = {{8, 32}, {}, DType::f32};
  three_d.positions = TensorDesc{{1, 5}, {}, DType::i32};
  CHECK(plan_error(three_d).find("positions has shape [1,5]; it must be [seq] = [5]") != std::string::npos);
}

TEST_CASE("the planner picks 16-byte chunks where the shape allows and narrower ones where it does not") {
  plan::RopePlanData p = plan::plan_rope_data(valid_desc());
  CHECK(p.spec.chunk == 8);         // 8 bf16 = 16 bytes
  CHECK(p.spec.access == 8);
  CHECK(p.spec.table_access == 4);  // 4 f32 = 16 bytes
  CHECK_FALSE(p.spec.wide_index);
  CHECK(p.spec.positions_batched);

  RopeDesc odd_pairs = valid_desc();  // D = 18: NeoX halves of 9 elements, GPT-J pairs of 2
  odd_pairs.x.shape[3] = odd_pairs.k->shape[3] = 18;
  odd_pairs.table.shape = {16, 9};
  CHECK(plan::plan_rope_data(odd_pairs).spec.chunk == 1);
  odd_pairs.style = RopeStyle::gptj;
  CHECK(plan::plan_rope_data(odd_pairs).spec.chunk == 2);

  RopeDesc neox20b = valid_desc();  // (D, R) = (96, 24): halves of 12 elements
  neox20b.x.shape[3] = neox20b.k->shape[3] = 96;
  neox20b.rotary_dim = 24;
  CHECK(plan::plan_rope_data(neox20b).spec.chunk == 4);

  RopeDesc padded = valid_desc();  // head stride 65: rows start on odd elements
  padded.x.strides = {5 * 4 * 65, 4 * 65, 65, 1};
  const plan::RopePlanData pp = plan::plan_rope_data(padded);
  CHECK(pp.spec.chunk == 8);
  CHECK(pp.spec.access == 1);

  RopeDesc f64 = valid_desc();
  f64.x.dtype = f64.k->dtype = DType::f64;
  f64.table.dtype = DType::f64;
  CHECK(plan::plan_rope_data(f64).spec.chunk == 2);
  CHECK(plan::plan_rope_data(f64).spec.table_access == 2);
}

TEST_CASE("64-bit offsets only when some offset needs them") {
  RopeDesc d = valid_desc();
  d.x.strides = {std::int64_t{1} << 31, 256, 64, 1};
  CHECK(plan::plan_rope_data(d).spec.wide_index);
  d.x.strides = {(std::int64_t{1} << 31) - 1 - (4 * 256 + 3 * 64 + 63), 256, 64, 1};  // reaches 2^31 - 1 exactly
  CHECK_FALSE(plan::plan_rope_data(d).spec.wide_index);
  d.x.strides[0] += 1;
  CHECK(plan::plan_rope_data(d).spec.wide_index);
  RopeDesc big_table = valid_desc();
  big_table.table = {{1 << 26, 32}, {64, 1}, DType::f32};
  CHECK(plan::plan_rope_data(big_table).spec.wide_index);
  RopeDesc unit_batch = valid_desc();  // a huge stride on an extent-1 dimension moves nothing
  unit_batch.x = {{1, 5, 4, 64}, {std::int64_t{1} << 40, 256, 64, 1}, DType::bf16};
  unit_batch.k->shape[0] = 1;
  unit_batch.positions->shape = {1, 5};
  CHECK_FALSE(plan::plan_rope_data(unit_batch).spec.wide_index);
}

TEST_CASE("launch shapes: blocks sized from dhead and heads, tokens on grid.x, grid.y within 65535") {
  for (auto [tokens, heads, chunks] : {std::tuple{16384, 64, 8}, {64, 40, 8}, {1, 40, 8}, {1, 70000, 4},
                                       {70000, 2, 4}, {100, 1, 1024}, {3, 7, 9}, {5000, 1, 3}}) {
    const plan::RopeLaunchShape s = plan::choose_rope_launch(tokens, heads, chunks);
    INFO(tokens << " tokens, " << heads << " heads, " << chunks << " chunks");
    const unsigned threads = s.block[0] * s.block[1] * s.block[2];
    CHECK(threads <= 256);
    CHECK(static_cast<int>(s.block[0]) == std::min(chunks, 256));
    CHECK(s.grid[1] <= 65535);
    CHECK(s.block[2] <= 64);  // the driver's limit on blockDim.z
    CHECK(static_cast<std::int64_t>(s.grid[0]) * s.block[2] >= tokens);                    // every token
    CHECK(static_cast<std::int64_t>(s.grid[1]) * s.block[1] * s.heads_per_thread >= std::min(heads, 65535 * 64));
  }
  // A 64-wide bf16 NeoX row is 4 chunks: 4 threads along dhead, not a 1024-thread block.
  const plan::RopeLaunchShape narrow = plan::choose_rope_launch(4096, 32, 4);
  CHECK(narrow.block[0] == 4);
  // Decode: one head per thread; prefill: several, reusing sin/cos.
  CHECK(plan::choose_rope_launch(64, 40, 8).heads_per_thread == 1);
  CHECK(plan::choose_rope_launch(2048, 40, 8).heads_per_thread == 2);
  CHECK(plan::choose_rope_launch(4096, 40, 8).heads_per_thread == 4);
  CHECK(plan::choose_rope_launch(16384, 64, 8).heads_per_thread == 8);
}

TEST_CASE("a decode loop's plans share one kernel: sequence length is a run-time argument") {
  RopeDesc d = valid_desc();
  std::string first_key;
  for (std::int64_t seq : {1, 2, 17, 1000, 4096}) {
    d.x.shape[1] = d.k->shape[1] = seq;
    d.positions->shape[1] = seq;
    d.table.shape[0] = 4096;
    const auto plan = detail::make_rope_plan(d, {});
    const std::string key = jit::kernel_key(plan->kernel->program(), "sm_90").hex();
    if (first_key.empty()) first_key = key;
    CHECK(key == first_key);
    CHECK(plan->data.args.seq == seq);
  }
}

TEST_CASE("manifest lines: the contiguous line of a plan, and overrides for what strides changed") {
  const plan::RopePlanData contiguous = plan::plan_rope_data(valid_desc());
  CHECK(plan::rope_manifest_line(contiguous) == "rope --algo neox --dtype bf16 --shape 2,5,4,64 --k-heads 2");

  RopeDesc d = valid_desc();
  d.style = RopeStyle::gptj;
  d.x.strides = {5 * 4 * 66, 4 * 66, 66, 1};  // 2-element accesses
  d.table = {{16, 40}, {40, 1}, DType::bf16};
  d.positions = TensorDesc{{5}, {}, DType::u8};
  d.rotary_dim = 32;
  d.inverse = true;
  d.inplace = true;
  const plan::RopePlanData strided = plan::plan_rope_data(d);
  const std::string line = plan::rope_manifest_line(strided);
  CHECK(line ==
        "rope --algo gptj --dtype bf16 --table-dtype bf16 --pos-dtype u8 --pos-layout seq --shape 2,5,4,64 "
        "--k-heads 2 --rotary-dim 32 --inplace --inverse --access 2");

  // The line's own descriptor, with its overrides, plans the same specialization.
  plan::RopeManifest m;
  m.style = RopeStyle::gptj;
  m.table_dtype = DType::bf16;
  m.position_dtype = DType::u8;
  m.positions_shared = true;
  m.shape = {2, 5, 4, 64};
  m.k_heads = 2;
  m.rotary_dim = 32;
  m.inplace = m.inverse = true;
  m.overrides.max_access = 2;
  CHECK(plan::plan_rope_data(plan::manifest_desc(m), m.overrides).spec == strided.spec);
}

TEST_CASE("manifest lines: a fused Hadamard transform's group, scale and order reach the descriptor and the line") {
  plan::RopeManifest m;
  m.shape = {2, 8, 8, 64};
  m.k_heads = 4;
  m.hadamard_group = 4;
  m.hadamard_scale = 0.125;
  m.hadamard_order = HadamardOrder::hadamard_then_rope;
  const RopeDesc desc = plan::manifest_desc(m);
  CHECK(desc.hadamard_group == 4);
  CHECK(desc.hadamard_scale == 0.125);
  CHECK(desc.hadamard_order == HadamardOrder::hadamard_then_rope);

  // Needs the fused planner. The scale is written only when it is not 1/sqrt(n), in full.
  RopeDesc fused = valid_desc();
  fused.x.shape = {2, 8, 8, 64};
  fused.k = TensorDesc{{2, 8, 4, 64}, {}, DType::bf16};
  fused.positions = TensorDesc{{2, 8}, {}, DType::i32};
  fused.hadamard_group = 4;
  const std::string prefix = "rope --algo neox --dtype bf16 --pos-dtype i32 --shape 2,8,8,64 --k-heads 4 --hadamard-group 4";
  CHECK(plan::rope_manifest_line(plan::plan_rope_data(fused)) == prefix);
  fused.hadamard_scale = 1.0 / 16.0;  // 1/sqrt(4 * 64), the default
  CHECK(plan::rope_manifest_line(plan::plan_rope_data(fused)) == prefix);
  fused.hadamard_scale = 0.1;
  fused.hadamard_order = HadamardOrder::hadamard_then_rope;
  CHECK(plan::rope_manifest_line(plan::plan_rope_data(fused)) ==
        prefix + " --hadamard-scale 0.1 --hadamard-order hadamard-then-rope");
}

TEST_CASE("multi-axis positions: the rules' sections, positions shapes and limits, and what they cannot do") {
  RopeDesc d = valid_desc();  // [2,5,4,64]: R/2 = 32
  d.axis_rule = RopeAxisRule::sections;
  d.axis_sections = {8, 12, 12};
  d.positions = TensorDesc{{3, 2, 5}, {}, DType::i32};
  const plan::RopePlanData sections = plan::plan_rope_data(d);
  CHECK(sections.spec.position_axes == 3);
  CHECK(sections.spec.positions_batched);
  CHECK(sections.spec.axis_limit1 == 8);   // pairs [8, 20) take axis 1
  CHECK(sections.spec.axis_limit2 == 20);  // pairs [20, 32) take axis 2
  CHECK(sections.spec.axis_limit3 == 32);  // no fourth axis
  CHECK(sections.spec.table_access > 1);  // sections start at whole chunks: one row per chunk
  CHECK(sections.args.position_axis_stride == 10);
  CHECK(sections.args.position_stride[0] == 5);
  CHECK(plan::rope_manifest_line(sections) ==
        "rope --algo neox --dtype bf16 --pos-dtype i32 --axis-rule sections --axis-sections 8,12,12 --shape 2,5,4,64 "
        "--k-heads 2");
  // The line plans the same kernels.
  plan::RopeManifest m;
  m.dtype = DType::bf16;
  m.position_dtype = DType::i32;
  m.axis_rule = RopeAxisRule::sections;
  m.axis_sections = {8, 12, 12};
  m.shape = {2, 5, 4, 64};
  m.k_heads = 2;
  CHECK(plan::plan_rope_data(plan::manifest_desc(m)).spec == sections.spec);

  d.axis_rule = RopeAxisRule::interleaved;
  d.positions = TensorDesc{{3, 5}, {}, DType::i64};  // shared by the batch
  const plan::RopePlanData interleaved = plan::plan_rope_data(d);
  CHECK_FALSE(interleaved.spec.positions_batched);
  CHECK(interleaved.spec.axis_limit1 == 36);  // 3 s_1
  CHECK(interleaved.spec.axis_limit2 == 36);  // 3 s_2
  CHECK(plan::plan_rope_data(d).spec != sections.spec);

  CHECK(plan_error([&] {
          RopeDesc e = d;
          e.axis_sections = {8, 12, 10};
          return e;
        }()).find("sum to 30; they must sum to R/2 = 32") != std::string::npos);
  CHECK(plan_error([&] {
          RopeDesc e = d;
          e.axis_sections = {16, 16};
          e.positions = TensorDesc{{2, 5}, {}, DType::i64};
          return e;
        }()).find("axis_rule interleaved takes 3") != std::string::npos);
  CHECK(plan_error([&] {
          RopeDesc e = d;
          e.positions = TensorDesc{{5}, {}, DType::i64};
          return e;
        }()).find("it must be [axes, seq] = [3,5] or [axes, batch, seq] = [3,2,5]") != std::string::npos);
  CHECK(plan_error([&] {
          RopeDesc e = d;
          e.positions = std::nullopt;
          return e;
        }()).find("no positions are given") != std::string::npos);
  CHECK(plan_error([&] {
          RopeDesc e = valid_desc();
          e.axis_sections = {32};
          return e;
        }()).find("axis_rule is none") != std::string::npos);
  CHECK(plan_error([&] {
          RopeDesc e = d;
          e.axis_rule = RopeAxisRule::sections;
          e.axis_sections = {8, 8, 8, 4, 4};
          e.positions = TensorDesc{{5, 5}, {}, DType::i64};
          return e;
        }()).find("axis_rule sections takes 1 to 4") != std::string::npos);
  // One axis: positions [1, seq] or [1, batch, seq], every pair on axis 0 (1-D rope).
  for (const RopeAxisRule rule : {RopeAxisRule::sections, RopeAxisRule::blocks}) {
    RopeDesc one = d;
    one.axis_rule = rule;
    one.axis_sections = {32};
    one.positions = TensorDesc{{1, 2, 5}, {2 * 5 * 4, 5 * 4, 4}, DType::u16};
    const plan::RopePlanData planned = plan::plan_rope_data(one);
    CHECK(planned.spec.position_axes == 1);
    CHECK(planned.spec.positions_batched);
    CHECK(planned.spec.axis_limit1 == 32);
    CHECK(planned.args.position_stride[0] == 20);
    CHECK(planned.args.position_stride[1] == 4);
    CHECK(plan::plan_rope_data(plan::manifest_desc([&] {
            plan::RopeManifest line = m;
            line.axis_rule = rule;
            line.axis_sections = {32};
            line.position_dtype = DType::u16;
            return line;
          }())).spec == planned.spec);
  }
  RopeDesc fused = d;
  fused.hadamard_group = 2;
  try {
    plan::plan_rope_data(fused);
    FAIL("multi-axis positions with a fused transform must be refused");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::unsupported);
  }
}

TEST_CASE("fused plans find rotation partners by the row layout and reserve shared memory only to use it") {
  RopeDesc d = valid_desc();
  d.x.shape = {2, 8, 8, 128};
  d.k = TensorDesc{{2, 8, 8, 128}, {}, DType::bf16};
  d.table = {{16, 64}, {}, DType::f32};
  d.positions = TensorDesc{{2, 8}, {}, DType::i64};
  d.hadamard_group = 8;  // n = 1024: one warp per row, 8-value vectors
  plan::RopePlanData one_warp = plan::plan_rope_data(d);
  CHECK(one_warp.spec.hadamard_threads == 32);
  CHECK(one_warp.spec.hadamard_partner == plan::RopePartner::lane);  // i ^ 64 on a lane bit
  CHECK(one_warp.launch.shared_bytes == 0);
  // The scalar variant keeps the threads per row; its partner lies on a chunk bit, still no sharing.
  const plan::RopeSpec scalar = plan::scalar_variant(one_warp.spec);
  CHECK(scalar.hadamard_partner == plan::RopePartner::chunk);
  CHECK(plan::fused_shared_bytes(scalar) == 0);

  d.style = RopeStyle::gptj;
  CHECK(plan::plan_rope_data(d).spec.hadamard_partner == plan::RopePartner::vector);

  d.style = RopeStyle::neox;
  d.rotary_dim = 96;  // P = 48: no bit of the row index; rotating last, the row goes through shared memory
  d.table = {{16, 48}, {}, DType::f32};
  d.hadamard_order = HadamardOrder::hadamard_then_rope;
  const plan::RopePlanData shared = plan::plan_rope_data(d);
  CHECK(shared.spec.hadamard_partner == plan::RopePartner::shared);
  CHECK(shared.launch.shared_bytes == (1024 + 32) * 4 * shared.spec.hadamard_rows_per_block);
  d.hadamard_order = HadamardOrder::rope_then_hadamard;  // rotating first: a second read of the input
  CHECK(plan::plan_rope_data(d).spec.hadamard_partner == plan::RopePartner::memory);
  CHECK(plan::plan_rope_data(d).launch.shared_bytes == 0);

  d.rotary_dim = 0;
  d.table = {{16, 64}, {}, DType::f32};
  d.x.shape = {2, 8, 32, 128};
  d.k = TensorDesc{{2, 8, 32, 128}, {}, DType::bf16};
  d.hadamard_group = 32;  // n = 4096: rows across warps
  const plan::RopePlanData warps = plan::plan_rope_data(d);
  CHECK(warps.spec.hadamard_threads > 32);
  CHECK(warps.launch.shared_bytes == (4096 + 128) * 4);
}

TEST_CASE("manifest lines: quantized outputs get contiguous code descriptors and round-trip through the line") {
  plan::RopeManifest m;
  m.shape = {2, 8, 8, 64};
  m.k_heads = 4;
  m.hadamard_group = 4;
  RopeDesc desc = plan::manifest_desc(m);
  CHECK_FALSE(desc.y.has_value());  // unquantized: the planner's contiguous outputs in the data dtype
  CHECK_FALSE(desc.k_out.has_value());
  m.q_quantize = RopeQuantize::int8;
  m.k_quantize = RopeQuantize::fp8_e4m3;
  desc = plan::manifest_desc(m);
  CHECK(desc.q_quantize == RopeQuantize::int8);
  CHECK(desc.k_quantize == RopeQuantize::fp8_e4m3);
  REQUIRE(desc.y.has_value());
  CHECK(desc.y->shape == std::vector<std::int64_t>{2, 8, 8, 64});
  CHECK(desc.y->strides.empty());
  CHECK(desc.y->dtype == DType::i8);
  REQUIRE(desc.k_out.has_value());
  CHECK(desc.k_out->shape == std::vector<std::int64_t>{2, 8, 4, 64});
  CHECK(desc.k_out->strides.empty());
  CHECK(desc.k_out->dtype == DType::u8);
  CHECK_FALSE(desc.q_scale.has_value());  // the planner makes the scales contiguous
  CHECK_FALSE(desc.k_scale.has_value());
  m.q_quantize = RopeQuantize::fp8_e4m3;
  m.k_quantize = RopeQuantize::int8;
  desc = plan::manifest_desc(m);
  CHECK(desc.y->dtype == DType::u8);
  CHECK(desc.k_out->dtype == DType::i8);
  m.inplace = true;  // no consistent output: left for the planner to name the conflict
  desc = plan::manifest_desc(m);
  CHECK_FALSE(desc.y.has_value());
  CHECK_FALSE(desc.k_out.has_value());
  CHECK(plan_error(desc).find("cannot be in place") != std::string::npos);
  m.inplace = false;
  m.k_heads.reset();  // no k: nothing to describe, the planner names k_quantize
  desc = plan::manifest_desc(m);
  CHECK_FALSE(desc.k_out.has_value());
  CHECK(plan_error(desc).find("k_quantize is set but there is no k") != std::string::npos);

  // Needs the quantizing planner: the option is written only when not none, and the line's own
  // descriptor plans the same specialization.
  RopeDesc fused = valid_desc();
  fused.x.shape = {2, 8, 8, 64};
  fused.k = TensorDesc{{2, 8, 4, 64}, {}, DType::bf16};
  fused.positions = TensorDesc{{2, 8}, {}, DType::i32};
  fused.table = {{16, 32}, {}, DType::f32};
  fused.hadamard_group = 4;
  const std::string prefix = "rope --algo neox --dtype bf16 --pos-dtype i32 --shape 2,8,8,64 --k-heads 4 --hadamard-group 4";
  fused.k_quantize = RopeQuantize::int8;
  const plan::RopePlanData k_only = plan::plan_rope_data(fused);
  CHECK(k_only.desc.k_out->dtype == DType::i8);
  CHECK(plan::rope_manifest_line(k_only) == prefix + " --k-quantize int8");
  fused.q_quantize = RopeQuantize::fp8_e4m3;
  fused.hadamard_order = HadamardOrder::hadamard_then_rope;
  const plan::RopePlanData both = plan::plan_rope_data(fused);
  CHECK(plan::rope_manifest_line(both) ==
        prefix + " --hadamard-order hadamard-then-rope --q-quantize fp8-e4m3 --k-quantize int8");
  m = {};
  m.position_dtype = DType::i32;
  m.shape = {2, 8, 8, 64};
  m.k_heads = 4;
  m.hadamard_group = 4;
  m.hadamard_order = HadamardOrder::hadamard_then_rope;
  m.q_quantize = RopeQuantize::fp8_e4m3;
  m.k_quantize = RopeQuantize::int8;
  CHECK(plan::plan_rope_data(plan::manifest_desc(m)).spec == both.spec);

  // Given (strided) outputs and scales change nothing in the line but what the planner chose.
  fused.y = TensorDesc{{2, 8, 8, 64}, {8192, 1024, 128, 1}, DType::u8};
  fused.q_scale = TensorDesc{{2, 8, 2}, {64, 4, 1}, DType::f32};
  const plan::RopePlanData strided = plan::plan_rope_data(fused);
  const std::string line = plan::rope_manifest_line(strided);
  CHECK(line.find(" --q-quantize fp8-e4m3 --k-quantize int8") != std::string::npos);
}

TEST_CASE("describe and json name the shapes, the specialization, the launch and every kernel") {
  const RopePlan plan = plan_rope(valid_desc());
  const std::string text = plan.describe();
  CHECK(text.find("x:          bf16 [2,5,4,64]") != std::string::npos);
  CHECK(text.find("chunk 8 elements, 8-element accesses") != std::string::npos);
  CHECK(text.find("rope_neox_bf16_tabf32_posi64b_d64_r64_4d_k_c8_a8_ta4") != std::string::npos);
  CHECK(text.find("_a1_ta1") != std::string::npos);  // the scalar variant
  CHECK(text.find("manifest:   rope --algo neox") != std::string::npos);
  const std::string json = plan.json();
  CHECK(json.find(R"("op": "rope")") != std::string::npos);
  CHECK(json.find(R"("heads_k": 2)") != std::string::npos);
  CHECK(plan.impl().programs().size() == 2);
}

TEST_CASE("launch checks pointers before touching the device") {
  const RopePlan plan = plan_rope(valid_desc());
  auto launch_error = [&](const RopePointers& p) {
    try {
      plan.launch(p);
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::invalid_argument);
      return std::string(e.what());
    }
    return std::string();
  };
  alignas(16) static char memory[4][64];
  RopePointers p{memory[0], memory[1], memory[2], memory[3], memory[0], memory[1], nullptr, 0};
  CHECK(launch_error(p).find("pointers.positions is NULL") != std::string::npos);
  p.positions = memory[2];
  p.x = nullptr;
  CHECK(launch_error(p).find("pointers.x is NULL") != std::string::npos);
  p.x = memory[0] + 1;
  CHECK(launch_error(p).find("pointers.x is not aligned to its 2-byte elements") != std::string::npos);
  p.x = memory[0];
  p.k = nullptr;
  CHECK(launch_error(p).find("pointers.k is NULL") != std::string::npos);

  RopeDesc inplace = valid_desc();
  inplace.inplace = true;
  const RopePlan in_place = plan_rope(inplace);
  try {
    in_place.launch({memory[0], memory[1], memory[2], memory[2], memory[0], memory[1], memory[3], 0});
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("pointers.y differs from pointers.x but the plan is in place") != std::string::npos);
  }
  CHECK_THROWS_AS(RopePlan().launch(p), Error);
}

TEST_CASE("the C API plans, reports errors through sj_last_error and never throws") {
  const int64_t x_shape[] = {2, 5, 4, 64};
  const int64_t table_shape[] = {16, 32};
  sj_rope_desc desc = {};
  desc.style = SJ_ROPE_NEOX;
  desc.x = {4, x_shape, nullptr, SJ_BF16, 0};
  desc.table = {2, table_shape, nullptr, SJ_F32, 0};
  sj_rope_plan plan = nullptr;
  REQUIRE(sj_rope_plan_create(&plan, &desc) == SJ_OK);
  REQUIRE(plan != nullptr);
  sj_rope_pointers pointers = {};
  CHECK(sj_rope_plan_launch(plan, &pointers, nullptr) == SJ_INVALID_ARGUMENT);
  CHECK(std::string(sj_last_error()).find("pointers.x is NULL") != std::string::npos);
  CHECK(sj_rope_plan_launch(plan, nullptr, nullptr) == SJ_INVALID_ARGUMENT);
  CHECK(sj_rope_plan_destroy(plan) == SJ_OK);

  desc.rotary_dim = 65;
  sj_rope_plan bad = nullptr;
  CHECK(sj_rope_plan_create(&bad, &desc) == SJ_INVALID_ARGUMENT);
  CHECK(bad == nullptr);
  CHECK(std::string(sj_last_error()).find("rotary_dim is 65") != std::string::npos);
  desc.rotary_dim = 0;
  desc.style = static_cast<sj_rope_style>(7);
  CHECK(sj_rope_plan_create(&bad, &desc) == SJ_INVALID_ARGUMENT);
  CHECK(std::string(sj_last_error()).find("desc.style is 7") != std::string::npos);
  CHECK(sj_rope(nullptr, &pointers, nullptr) == SJ_INVALID_ARGUMENT);
  CHECK(sj_rope_plan_create(nullptr, &desc) == SJ_INVALID_ARGUMENT);
}

TEST_CASE("the C API passes the fused Hadamard transform's group, scale and order to the planner") {
  const int64_t x_shape[] = {2, 8, 8, 64};
  const int64_t table_shape[] = {16, 32};
  sj_rope_desc desc = {};
  desc.style = SJ_ROPE_NEOX;
  desc.x = {4, x_shape, nullptr, SJ_BF16, 0};
  desc.table = {2, table_shape, nullptr, SJ_F32, 0};
  desc.hadamard_order = static_cast<sj_hadamard_order>(2);
  sj_rope_plan plan = nullptr;
  CHECK(sj_rope_plan_create(&plan, &desc) == SJ_INVALID_ARGUMENT);
  CHECK(std::string(sj_last_error()).find("desc.hadamard_order is 2") != std::string::npos);

  // Needs the fused planner: a group that does not divide the heads, and a non-finite scale, are
  // rejected only if they reach it.
  desc.hadamard_order = SJ_HADAMARD_THEN_ROPE;
  desc.hadamard_group = 4;
  REQUIRE(sj_rope_plan_create(&plan, &desc) == SJ_OK);
  CHECK(sj_rope_plan_destroy(plan) == SJ_OK);
  desc.hadamard_group = 3;
  CHECK(sj_rope_plan_create(&plan, &desc) == SJ_INVALID_ARGUMENT);
  CHECK(std::string(sj_last_error()).find("hadamard_group") != std::string::npos);
  desc.hadamard_group = 4;
  desc.hadamard_scale = std::numeric_limits<double>::infinity();
  CHECK(sj_rope_plan_create(&plan, &desc) == SJ_OK);  // ignored without has_hadamard_scale
  CHECK(sj_rope_plan_destroy(plan) == SJ_OK);
  desc.has_hadamard_scale = 1;
  CHECK(sj_rope_plan_create(&plan, &desc) == SJ_INVALID_ARGUMENT);
}

TEST_CASE("the C API passes multi-axis positions and their sections to the planner") {
  const int64_t x_shape[] = {2, 8, 4, 64};
  const int64_t table_shape[] = {16, 32};
  const int64_t positions_shape[] = {3, 2, 8};
  const int64_t sections[] = {8, 12, 12};
  sj_rope_desc desc = {};
  desc.style = SJ_ROPE_NEOX;
  desc.x = {4, x_shape, nullptr, SJ_BF16, 0};
  desc.table = {2, table_shape, nullptr, SJ_F32, 0};
  desc.positions = {3, positions_shape, nullptr, SJ_I32, 0};
  sj_rope_plan plan = nullptr;
  CHECK(sj_rope_plan_create(&plan, &desc) == SJ_INVALID_ARGUMENT);  // [3, 2, 8] positions need an axis rule
  CHECK(std::string(sj_last_error()).find("positions has shape [3,2,8]") != std::string::npos);
  desc.axis_rule = SJ_AXES_SECTIONS;
  desc.axis_count = 3;
  CHECK(sj_rope_plan_create(&plan, &desc) == SJ_INVALID_ARGUMENT);
  CHECK(std::string(sj_last_error()).find("desc.axis_sections is NULL") != std::string::npos);
  desc.axis_sections = sections;
  REQUIRE(sj_rope_plan_create(&plan, &desc) == SJ_OK);
  CHECK(sj_rope_plan_destroy(plan) == SJ_OK);
  desc.axis_rule = static_cast<sj_rope_axis_rule>(7);
  CHECK(sj_rope_plan_create(&plan, &desc) == SJ_INVALID_ARGUMENT);
  CHECK(std::string(sj_last_error()).find("desc.axis_rule is 7") != std::string::npos);
  desc.axis_rule = SJ_AXES_INTERLEAVED;
  desc.axis_count = 2;
  const int64_t two_axes[] = {2, 2, 8};
  desc.positions.shape = two_axes;
  CHECK(sj_rope_plan_create(&plan, &desc) == SJ_INVALID_ARGUMENT);
  CHECK(std::string(sj_last_error()).find("axis_rule interleaved takes 3") != std::string::npos);
}

TEST_CASE("the C API passes quantized outputs, their scale descriptors and pointers to the planner") {
  const int64_t x_shape[] = {2, 8, 8, 64};
  const int64_t k_shape[] = {2, 8, 4, 64};
  const int64_t table_shape[] = {16, 32};
  const int64_t positions_shape[] = {2, 8};
  sj_rope_desc desc = {};
  desc.style = SJ_ROPE_NEOX;
  desc.x = {4, x_shape, nullptr, SJ_BF16, 0};
  desc.k = {4, k_shape, nullptr, SJ_BF16, 0};
  desc.table = {2, table_shape, nullptr, SJ_F32, 0};
  desc.positions = {2, positions_shape, nullptr, SJ_I32, 0};
  desc.hadamard_group = 4;
  sj_rope_plan plan = nullptr;
  desc.q_quantize = static_cast<sj_rope_quantize>(3);
  CHECK(sj_rope_plan_create(&plan, &desc) == SJ_INVALID_ARGUMENT);
  CHECK(plan == nullptr);
  CHECK(std::string(sj_last_error()).find("desc.q_quantize is 3; use SJ_QUANTIZE_NONE") != std::string::npos);
  desc.q_quantize = SJ_QUANTIZE_NONE;
  desc.k_quantize = static_cast<sj_rope_quantize>(-1);
  CHECK(sj_rope_plan_create(&plan, &desc) == SJ_INVALID_ARGUMENT);
  CHECK(std::string(sj_last_error()).find("desc.k_quantize is -1") != std::string::npos);

  // Needs the quantizing planner.
  desc.k_quantize = SJ_QUANTIZE_INT8;
  REQUIRE(sj_rope_plan_create(&plan, &desc) == SJ_OK);
  CHECK(sj_rope_plan_destroy(plan) == SJ_OK);
  desc.q_quantize = SJ_QUANTIZE_FP8_E4M3;
  desc.k_quantize = SJ_QUANTIZE_FP8_E4M3;
  const int64_t q_scale_shape[] = {2, 8, 2};
  const int64_t q_scale_strides[] = {32, 2, 1};
  const int64_t k_scale_shape[] = {2, 8, 1};
  desc.q_scale = {3, q_scale_shape, q_scale_strides, SJ_F32, 0};
  desc.k_scale = {3, k_scale_shape, nullptr, SJ_F32, 0};
  REQUIRE(sj_rope_plan_create(&plan, &desc) == SJ_OK);
  CHECK(sj_rope_plan_destroy(plan) == SJ_OK);
  // The output and scale descriptors reach the planner, which names each.
  desc.y = {4, x_shape, nullptr, SJ_BF16, 0};
  CHECK(sj_rope_plan_create(&plan, &desc) == SJ_INVALID_ARGUMENT);
  CHECK(std::string(sj_last_error()).find("y.dtype is bf16 but must be u8 (fp8-e4m3 codes)") != std::string::npos);
  desc.y = {};
  desc.q_scale.dtype = SJ_F16;
  CHECK(sj_rope_plan_create(&plan, &desc) == SJ_INVALID_ARGUMENT);
  CHECK(std::string(sj_last_error()).find("q_scale has dtype f16") != std::string::npos);
  desc.q_scale.dtype = SJ_F32;
  desc.k_scale.shape = q_scale_shape;
  CHECK(sj_rope_plan_create(&plan, &desc) == SJ_INVALID_ARGUMENT);
  CHECK(std::string(sj_last_error()).find("k_scale has shape [2,8,2]") != std::string::npos);
  desc.k_scale = {};  // rank 0: contiguous
  desc.k_quantize = SJ_QUANTIZE_NONE;
  desc.k_scale = {3, k_scale_shape, nullptr, SJ_F32, 0};
  CHECK(sj_rope_plan_create(&plan, &desc) == SJ_INVALID_ARGUMENT);
  CHECK(std::string(sj_last_error()).find("k_scale is given but k is not quantized") != std::string::npos);

  // The scale pointers reach the launch: a plan quantizing q needs pointers.q_scale.
  desc.k_scale = {};
  REQUIRE(sj_rope_plan_create(&plan, &desc) == SJ_OK);
  alignas(16) static char memory[6][64];
  sj_rope_pointers pointers = {memory[0], memory[1], memory[2], memory[3], memory[4], memory[5], memory[4], 0, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
  CHECK(sj_rope_plan_launch(plan, &pointers, nullptr) == SJ_INVALID_ARGUMENT);
  CHECK(std::string(sj_last_error()).find("pointers.q_scale is NULL") != std::string::npos);
  pointers.q_scale = memory[5];
  pointers.k_scale = memory[5];
  CHECK(sj_rope_plan_launch(plan, &pointers, nullptr) == SJ_INVALID_ARGUMENT);
  CHECK(std::string(sj_last_error()).find("pointers.k_scale is set but that output is not quantized") !=
        std::string::npos);
  CHECK(sj_rope_plan_destroy(plan) == SJ_OK);
}

namespace {

/// valid_desc() appending k and v to nhd bf16 caches of 4 blocks of 16 slots, i32 slots [batch * seq].
RopeDesc cache_desc() {
  RopeDesc d = valid_desc();
  d.cache_layout = KvCacheLayout::nhd;
  d.v = d.k;
  d.k_cache = d.v_cache = TensorDesc{{4, 16, 2, 64}, {}, DType::bf16};
  d.slots = TensorDesc{{10}, {}, DType::i32};
  return d;
}

void check_cache_rejected(const std::function<void(RopeDesc&)>& change, const std::string& expected) {
  RopeDesc desc = cache_desc();
  change(desc);
  const std::string message = plan_error(desc);
  INFO("message: " << message);
  CHECK(message.find(expected) != std::string::npos);
}

}  // namespace

TEST_CASE("KV-cache append: layouts map to block, row and head strides; k_out only when asked; what it rejects") {
  const plan::RopePlanData nhd = plan::plan_rope_data(cache_desc());
  CHECK(nhd.spec.cache == DType::bf16);
  CHECK(nhd.spec.k_out_skipped);
  CHECK(!nhd.desc.k_out);
  CHECK(nhd.args.heads_total == 4 + 2 + 2);
  CHECK(nhd.args.cache_slots == 64);
  CHECK(nhd.args.block_size == 16);
  CHECK(std::vector<std::int64_t>(nhd.args.k_cache_stride, nhd.args.k_cache_stride + 3) == std::vector<std::int64_t>{2048, 128, 64});
  CHECK(std::vector<std::int64_t>(nhd.args.slot_stride, nhd.args.slot_stride + 2) == std::vector<std::int64_t>{5, 1});
  CHECK(nhd.spec.cache_access == 8);

  RopeDesc d = cache_desc();
  d.cache_layout = KvCacheLayout::hnd;
  d.k_cache = TensorDesc{{4, 2, 16, 64}, {}, DType::u8};
  d.v_cache = TensorDesc{{4, 2, 16, 64}, {2 * 16 * 72, 16 * 72, 72, 1}, DType::u8};
  d.cache_quantize = RopeQuantize::fp8_e4m3;
  d.slots = TensorDesc{{2, 5}, {1, 2}, DType::i64};
  d.k_out = d.k;
  const plan::RopePlanData hnd = plan::plan_rope_data(d);
  CHECK(!hnd.spec.k_out_skipped);
  CHECK(hnd.args.block_size == 16);
  CHECK(hnd.args.cache_slots == 64);
  CHECK(std::vector<std::int64_t>(hnd.args.k_cache_stride, hnd.args.k_cache_stride + 3) == std::vector<std::int64_t>{2048, 64, 1024});
  CHECK(std::vector<std::int64_t>(hnd.args.v_cache_stride, hnd.args.v_cache_stride + 3) == std::vector<std::int64_t>{2304, 72, 1152});
  CHECK(std::vector<std::int64_t>(hnd.args.slot_stride, hnd.args.slot_stride + 2) == std::vector<std::int64_t>{1, 2});
  CHECK(hnd.spec.cache_access == 8);  // 8 data elements per access, 8 code bytes
  const RopePlan plan = plan_rope(d);
  CHECK(plan.describe().find("k_cache:    u8 [4,2,16,64]") != std::string::npos);
  CHECK(plan.describe().find("fp8-e4m3 codes of value / scale") != std::string::npos);
  CHECK(plan.json().find(R"("cache": {"layout": "hnd")") != std::string::npos);

  check_cache_rejected([](RopeDesc& c) { c.cache_layout = KvCacheLayout::none; }, "but cache_layout is none");
  check_cache_rejected([](RopeDesc& c) { c.v.reset(); }, "cache_layout is nhd but v is not given");
  check_cache_rejected([](RopeDesc& c) { c.slots.reset(); }, "slots is not given");
  check_cache_rejected([](RopeDesc& c) { c.k.reset(), c.v.reset(); }, "there is no k");
  check_cache_rejected([](RopeDesc& c) { c.v->dtype = DType::f16; }, "v must have k's shape and dtype");
  check_cache_rejected([](RopeDesc& c) { c.k_cache->shape = {4, 16, 3, 64}, c.v_cache->shape = {4, 16, 3, 64}; },
                       "with layout nhd it must be [blocks, block_size, heads, dhead] with k's 2 heads and dhead 64");
  check_cache_rejected([](RopeDesc& c) { c.v_cache->shape = {5, 16, 2, 64}; }, "the caches must have one shape and dtype");
  check_cache_rejected([](RopeDesc& c) { c.k_cache->dtype = c.v_cache->dtype = DType::i8; }, "a cache holds f16, bf16");
  check_cache_rejected([](RopeDesc& c) { c.cache_quantize = RopeQuantize::int8; }, "int8 codes are i8");
  check_cache_rejected([](RopeDesc& c) { c.k_cache->strides = {2048, 128, 0, 1}; }, "k_cache");
  check_cache_rejected([](RopeDesc& c) { c.k_cache->strides = {2048, 128, 64, 2}; }, "k_cache.strides[3] is 2");
  check_cache_rejected([](RopeDesc& c) { c.slots->shape = {9}; }, "slots has shape [9]; it must be [batch * seq] = [10] or [batch, seq] = [2,5]");
  check_cache_rejected([](RopeDesc& c) { c.slots->dtype = DType::u32; }, "slots must be i32 or i64");
  check_cache_rejected([](RopeDesc& c) { c.slots->strides = {0}; }, "slots.strides[0] is 0; tokens would share one slot");
  check_cache_rejected([](RopeDesc& c) { c.k_cache->shape = {4, 16, 128}; }, "k_cache has shape [4,16,128] (rank 3); it must have rank 4 (a paged cache)");
  RopeDesc fused = cache_desc();
  fused.hadamard_group = 2;
  CHECK_THROWS_WITH_AS(plan::plan_rope_data(fused), doctest::Contains("with a fused Hadamard transform is not supported"), Error);
  RopeDesc huge = cache_desc();
  huge.k_cache = huge.v_cache = TensorDesc{{std::int64_t{1} << 27, 16, 2, 64}, {}, DType::bf16};
  CHECK_THROWS_WITH_AS(plan::plan_rope_data(huge), doctest::Contains("a cache append supports at most"), Error);
  huge.k_cache = huge.v_cache = TensorDesc{{std::int64_t{1} << 34, std::int64_t{1} << 30, 2, 64}, {}, DType::bf16};
  CHECK_THROWS_WITH_AS(plan::plan_rope_data(huge), doctest::Contains("a cache append supports at most"), Error);

  // Flat slots at a stride; a prefill of 2^27 tokens into a small cache plans (its manifest line too).
  RopeDesc flat = cache_desc();
  flat.slots = TensorDesc{{10}, {2}, DType::i32};
  const plan::RopePlanData strided_slots = plan::plan_rope_data(flat);
  CHECK(std::vector<std::int64_t>(strided_slots.args.slot_stride, strided_slots.args.slot_stride + 2) ==
        std::vector<std::int64_t>{10, 2});
  RopeDesc long_prefill = cache_desc();
  long_prefill.x.shape = {1, std::int64_t{1} << 27, 1, 64};
  long_prefill.k->shape = long_prefill.v->shape = {1, std::int64_t{1} << 27, 2, 64};
  long_prefill.positions = TensorDesc{{1, std::int64_t{1} << 27}, {}, DType::i64};
  long_prefill.slots = TensorDesc{{std::int64_t{1} << 27}, {}, DType::i64};
  CHECK(plan_rope(long_prefill).manifest_line().find("--shape 1,134217728,1,64 --k-heads 2 --kv-cache nhd") !=
        std::string::npos);
}

TEST_CASE("KV-cache append: launch pointers are required with a cache and refused without; manifest lines round-trip") {
  const RopePlan plan = plan_rope(cache_desc());
  alignas(16) static char memory[8][64];
  RopePointers p{memory[0], memory[1], memory[2], nullptr, memory[3], memory[3], memory[4], 0};
  auto launch_error = [&](const RopePlan& which) {
    try {
      which.launch(p);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(launch_error(plan).find("pointers.v is NULL; the plan appends to a KV cache") != std::string::npos);
  p.v = memory[5];
  p.k_cache = memory[6];
  p.v_cache = memory[7];
  p.slots = memory[4];
  p.k_out = memory[2];
  CHECK(launch_error(plan).find("pointers.k_out is set but the plan writes k to the cache only") != std::string::npos);
  p.k_out = nullptr;
  p.v_cache = memory[6];
  CHECK(launch_error(plan).find("pointers.k_cache and pointers.v_cache are the same memory") != std::string::npos);
  p.v_cache = memory[7];
  p.k_cache_scale = reinterpret_cast<const float*>(memory[0]);
  CHECK(launch_error(plan).find("pointers.k_cache_scale is set but the plan writes no 8-bit cache") != std::string::npos);
  RopeDesc codes = cache_desc();
  codes.k_cache->dtype = codes.v_cache->dtype = DType::u8;
  codes.cache_quantize = RopeQuantize::fp8_e4m3;
  p.k_cache_scale = nullptr;
  CHECK(launch_error(plan_rope(codes)).find("pointers.k_cache_scale is NULL") != std::string::npos);
  p.v = p.k_cache = p.v_cache = nullptr;
  p.slots = nullptr;
  p.k_out = memory[2];
  CHECK(launch_error(plan_rope(valid_desc())).find("pointers.") == std::string::npos);  // reaches the driver, or runs
  p.v = memory[5];
  CHECK(launch_error(plan_rope(valid_desc())).find("pointers.v is set but the plan has no cache append") != std::string::npos);

  // Manifest lines: the cache's dtype or codes, slot dtype and k_out reach the line and back.
  const std::pair<std::function<void(RopeDesc&)>, std::string> lines[] = {
      {[](RopeDesc&) {}, "rope --algo neox --dtype bf16 --shape 2,5,4,64 --k-heads 2 --kv-cache nhd --slot-dtype i32"},
      {[](RopeDesc& c) { c.inplace = true, c.slots->dtype = DType::i64; },
       "rope --algo neox --dtype bf16 --shape 2,5,4,64 --k-heads 2 --kv-cache nhd --inplace"},
      {[](RopeDesc& c) {
         c.cache_layout = KvCacheLayout::hnd;
         c.k_cache = c.v_cache = TensorDesc{{4, 2, 16, 64}, {}, DType::f32};
         c.k_out = c.k;
       },
       "rope --algo neox --dtype bf16 --shape 2,5,4,64 --k-heads 2 --kv-cache hnd --cache-dtype f32 --slot-dtype i32 --write-k"},
      {[](RopeDesc& c) {
         c.k_cache = c.v_cache = TensorDesc{{4, 16, 2, 64}, {2048, 128, 64, 1}, DType::i8};
         c.k_cache->strides = {2048 * 2, 130, 65, 1};
         c.cache_quantize = RopeQuantize::int8;
       },
       "rope --algo neox --dtype bf16 --shape 2,5,4,64 --k-heads 2 --kv-cache nhd --cache-dtype int8 --slot-dtype i32 "
       "--cache-access 1"},
  };
  for (const auto& [change, expected] : lines) {
    RopeDesc d = cache_desc();
    change(d);
    const auto planned = detail::make_rope_plan(d, {});
    CHECK(planned->manifest == expected);
    const ops::PlannedLine line = ops::plan_manifest_line(expected);  // the same kernels, source for source
    REQUIRE(line.programs.size() == planned->programs().size());
    for (std::size_t i = 0; i < line.programs.size(); ++i) CHECK(line.programs[i].source == planned->programs()[i]->source);
  }
}

TEST_CASE("the C API passes the KV-cache append's layout, tensors, codes and pointers to the planner") {
  const int64_t x_shape[] = {2, 8, 4, 64}, k_shape[] = {2, 8, 2, 64}, table_shape[] = {16, 32};
  const int64_t cache_shape[] = {3, 2, 16, 64}, slots_shape[] = {16};
  sj_rope_desc desc = {};
  desc.style = SJ_ROPE_NEOX;
  desc.x = {4, x_shape, nullptr, SJ_BF16, 0};
  desc.k = {4, k_shape, nullptr, SJ_BF16, 0};
  desc.table = {2, table_shape, nullptr, SJ_F32, 0};
  desc.cache_layout = SJ_KV_CACHE_HND;
  desc.v = {4, k_shape, nullptr, SJ_BF16, 0};
  desc.k_cache = desc.v_cache = {4, cache_shape, nullptr, SJ_U8, 0};
  desc.slots = {1, slots_shape, nullptr, SJ_I32, 0};
  sj_rope_plan plan = nullptr;
  CHECK(sj_rope_plan_create(&plan, &desc) == SJ_INVALID_ARGUMENT);  // u8 caches need fp8 codes
  CHECK(std::string(sj_last_error()).find("k_cache.dtype is u8") != std::string::npos);
  desc.cache_quantize = SJ_QUANTIZE_FP8_E4M3;
  REQUIRE(sj_rope_plan_create(&plan, &desc) == SJ_OK);
  alignas(16) static char memory[8][64];
  sj_rope_pointers pointers = {};
  pointers.x = memory[0];
  pointers.y = memory[1];
  pointers.k = memory[2];
  pointers.cos = pointers.sin = memory[3];
  pointers.v = memory[4];
  pointers.k_cache = memory[5];
  pointers.v_cache = memory[6];
  pointers.slots = memory[7];
  CHECK(sj_rope_plan_launch(plan, &pointers, nullptr) == SJ_INVALID_ARGUMENT);
  CHECK(std::string(sj_last_error()).find("pointers.k_cache_scale is NULL") != std::string::npos);
  CHECK(sj_rope_plan_destroy(plan) == SJ_OK);
  desc.cache_layout = static_cast<sj_kv_cache_layout>(5);
  CHECK(sj_rope_plan_create(&plan, &desc) == SJ_INVALID_ARGUMENT);
  CHECK(std::string(sj_last_error()).find("desc.cache_layout is 5") != std::string::npos);
}

TEST_CASE("multi-axis positions, blocks rule: NeoX chunks stay inside one block's half; the line round-trips") {
  RopeDesc d = valid_desc();
  d.x.shape = {2, 5, 4, 128};
  d.k->shape = {2, 5, 2, 128};
  d.table = {{16, 64}, {}, DType::f32};
  d.positions = TensorDesc{{2, 2, 5}, {}, DType::i64};
  d.axis_rule = RopeAxisRule::blocks;
  d.axis_sections = {32, 32};
  const plan::RopePlanData halves = plan::plan_rope_data(d);
  CHECK(halves.spec.chunk == 8);
  CHECK(halves.spec.axis_limit1 == 32);
  d.axis_sections = {4, 6, 2, 52};
  d.positions->shape = {4, 2, 5};
  CHECK(plan::plan_rope_data(d).spec.chunk == 2);
  d.style = RopeStyle::gptj;  // adjacent pairs: the chunk is free, like the sections rule
  CHECK(plan::plan_rope_data(d).spec.chunk == 8);
  const auto planned = detail::make_rope_plan(d, {});
  CHECK(planned->manifest.find("--axis-rule blocks --axis-sections 4,6,2,52") != std::string::npos);
  const ops::PlannedLine line = ops::plan_manifest_line(planned->manifest);
  REQUIRE(line.programs.size() == planned->programs().size());
  CHECK(line.programs.front().source == planned->programs().front()->source);
}
