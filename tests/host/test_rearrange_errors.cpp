// Rearrange: every refused input says which argument was wrong, in C++ and through the C API.
#include <doctest/doctest.h>

#include <string>

#include "shapejit/rearrange.h"
#include "shapejit/rearrange.hpp"

using namespace shapejit;

namespace {

// The message of the shapejit::Error that `body` throws; fails the test when it throws nothing.
template <typename Body>
std::string error_of(Body body, ErrorCode expected = ErrorCode::invalid_argument) {
  try {
    body();
  } catch (const Error& e) {
    CHECK(e.code() == expected);
    return e.what();
  }
  FAIL_CHECK("expected a shapejit::Error");
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TensorDesc desc(std::vector<std::int64_t> shape, std::vector<std::int64_t> strides = {}, DType t = DType::f32) {
  return {std::move(shape), std::move(strides), t, 0};
}

}  // namespace

TEST_CASE("shape and element-size mismatches name both sides") {
  const std::string shape = error_of([] { plan_rearrange(desc({2, 3}), desc({3, 2})); });
  CHECK(contains(shape, "dst.shape [2, 3]"));
  CHECK(contains(shape, "src.shape [3, 2]"));
  CHECK(contains(error_of([] { plan_rearrange(desc({2, 3}), desc({2, 3}, {}, DType::f16)); }), "element size"));
  CHECK(contains(error_of([] { plan_rearrange(desc({2}), desc({2, 1})); }), "src.shape"));
  CHECK(contains(error_of([] { plan_rearrange({{2}, {}, DType::u8, 65}, {{2}, {}, DType::u8, 65}); }),
                 "dst.elem_bytes is 65"));
  CHECK(contains(error_of([] { plan_rearrange(desc({2, -1}), desc({2, -1})); }), "dst.shape[1] is -1"));
  CHECK(contains(error_of([] { plan_rearrange(desc({2, 3}), desc({2, 3}, {1})); }), "src.strides has 1 values"));
}

TEST_CASE("a destination whose elements overlap is refused, a broadcasting source is not") {
  CHECK(contains(error_of([] { plan_rearrange(desc({4, 3}, {0, 1}), desc({4, 3})); }), "dst.strides[0] is 0"));
  CHECK(contains(error_of([] { plan_rearrange(desc({4, 3}, {2, 1}), desc({4, 3})); }), "dst.strides [2, 1]"));
  CHECK_NOTHROW(plan_rearrange(desc({4, 3}), desc({4, 3}, {0, 1})));
  CHECK_NOTHROW(plan_rearrange(desc({4, 3}, {-3, -1}), desc({4, 3}, {0, 0})));
  CHECK_NOTHROW(plan_rearrange(desc({4, 1}, {1, 0}), desc({4, 1})));  // a zero stride on an extent-1 dim is harmless
}

TEST_CASE("rank over the limit and spans over 64 bits are refused") {
  const std::vector<std::int64_t> ones(65, 1);
  CHECK(contains(error_of([&] { plan_rearrange(desc(ones), desc(ones)); }, ErrorCode::unsupported), "at most 64"));
  const std::vector<std::int64_t> ones64(64, 1);
  CHECK_NOTHROW(plan_rearrange(desc(ones64), desc(ones64)));
  const std::int64_t big = std::int64_t{1} << 40;
  CHECK(contains(error_of([&] { plan_rearrange(desc({big, big}), desc({big, big}, {1, big})); }), "2^63 bytes"));
}

TEST_CASE("bad options and permutations name the argument") {
  RearrangeOptions options;
  options.assumed_alignment = 3;
  CHECK(contains(error_of([&] { plan_rearrange(desc({2}), desc({2}), options); }), "options.assumed_alignment is 3"));
  CHECK(contains(error_of([] { permuted(desc({2, 3}), {0, 0}); }), "perm[1] is 0"));
  CHECK(contains(error_of([] { permuted(desc({2, 3}), {0}); }), "perm has 1 entries"));
}

TEST_CASE("launch refuses overlapping memory and null pointers before touching the device") {
  const TensorDesc view = permuted(desc({64, 32}), {1, 0});
  const RearrangePlan plan = plan_rearrange(desc(view.shape), view);
  alignas(16) static float buffer[64 * 32 * 2];
  CHECK(contains(error_of([&] { plan.launch(buffer + 100, buffer, nullptr); }), "src and dst memory overlap"));
  CHECK(contains(error_of([&] { plan.launch(nullptr, buffer, nullptr); }), "dst is NULL"));
  CHECK(contains(error_of([&] { plan.launch(buffer, nullptr, nullptr); }), "src is NULL"));
  // The same pointer with the same layout is a no-op; an empty tensor launches nothing.
  const RearrangePlan same = plan_rearrange(desc({64, 32}), desc({64, 32}));
  CHECK_NOTHROW(same.launch(buffer, buffer, nullptr));
  const RearrangePlan empty = plan_rearrange(desc({0, 32}), permuted(desc({32, 0}), {1, 0}));
  CHECK_NOTHROW(empty.launch(nullptr, nullptr, nullptr));
  CHECK(contains(error_of([] { RearrangePlan().launch(nullptr, nullptr, nullptr); }), "plan is empty"));
}

TEST_CASE("the C API returns status codes and a thread-local message, never an exception") {
  const std::int64_t shape[] = {4, 3}, wrong[] = {3, 4}, zero_strides[] = {0, 1};
  sj_tensor_desc dst{2, shape, nullptr, SJ_F32, 0}, src{2, wrong, nullptr, SJ_F32, 0};
  sj_rearrange_plan plan = reinterpret_cast<sj_rearrange_plan>(1);
  CHECK(sj_rearrange_plan_create(&plan, &dst, &src, nullptr) == SJ_INVALID_ARGUMENT);
  CHECK(plan == nullptr);
  CHECK(contains(sj_last_error(), "dst.shape [4, 3]"));
  CHECK(sj_rearrange_plan_create(&plan, nullptr, &src, nullptr) == SJ_INVALID_ARGUMENT);
  CHECK(contains(sj_last_error(), "dst is NULL"));
  CHECK(sj_rearrange_plan_create(nullptr, &dst, &src, nullptr) == SJ_INVALID_ARGUMENT);
  dst.strides = zero_strides;
  src.shape = shape;
  CHECK(sj_rearrange_plan_create(&plan, &dst, &src, nullptr) == SJ_INVALID_ARGUMENT);
  CHECK(contains(sj_last_error(), "dst.strides[0] is 0"));

  dst.strides = nullptr;
  const std::int64_t transposed[] = {1, 4};
  src.strides = transposed;
  sj_rearrange_options options{0, 16, 0, 0};
  REQUIRE(sj_rearrange_plan_create(&plan, &dst, &src, &options) == SJ_OK);
  CHECK(std::string(sj_last_error()).empty());
  CHECK(contains(sj_rearrange_plan_describe(plan), "rearrange"));
  alignas(16) static float buffer[64];
  CHECK(sj_rearrange_plan_launch(plan, buffer + 2, buffer, nullptr) == SJ_INVALID_ARGUMENT);
  CHECK(contains(sj_last_error(), "overlap"));
  CHECK(sj_rearrange_plan_launch(nullptr, buffer, buffer, nullptr) == SJ_INVALID_ARGUMENT);
  CHECK(contains(sj_last_error(), "plan is NULL"));
  CHECK(sj_rearrange(buffer + 2, &dst, buffer, &src, nullptr) == SJ_INVALID_ARGUMENT);
  CHECK(sj_rearrange_plan_destroy(plan) == SJ_OK);
  CHECK(sj_rearrange_plan_destroy(nullptr) == SJ_OK);
  options.assumed_alignment = 5;
  CHECK(sj_rearrange_plan_create(&plan, &dst, &src, &options) == SJ_INVALID_ARGUMENT);
  CHECK(contains(sj_last_error(), "assumed_alignment"));
}
