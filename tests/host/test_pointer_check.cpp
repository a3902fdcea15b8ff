// check_pointers without a GPU: what the driver says of a pointer's memory, judged against the
// launch's device and the bytes the view reaches.
#include <doctest/doctest.h>

#include <string>

#include "jit/pointer_check.hpp"
#include "shapejit/rearrange.hpp"
#include "shapejit/rope.hpp"

using namespace shapejit;

namespace {

const void* at(std::uintptr_t address) { return reinterpret_cast<const void*>(address); }

/// A 4096-byte allocation of device 1 at 0x10000.
jit::AllocationInfo device1_allocation() {
  jit::AllocationInfo info;
  info.known = true;
  info.device = 1;
  info.start = 0x10000;
  info.size = 4096;
  return info;
}

std::string error_of(const jit::PointerUse& use, const jit::AllocationInfo& info, int device) {
  try {
    jit::check_allocation(use, info, device);
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("check_pointers: a view inside an allocation of the launch's device passes, to the last byte") {
  const jit::AllocationInfo info = device1_allocation();
  CHECK(error_of({"src", at(0x10000), {0, 4096}}, info, 1).empty());
  CHECK(error_of({"src", at(0x10800), {-2048, 2048}}, info, 1).empty());  // negative strides reach below the base
  CHECK(error_of({"src", at(0x10ffe), {0, 2}}, info, 1).empty());
}

TEST_CASE("check_pointers: memory the driver does not know, host memory and another device's memory are refused") {
  const std::string unknown = error_of({"pointers.x", at(0x1234), {0, 8}}, jit::AllocationInfo{}, 0);
  CHECK(contains(unknown, "pointers.x"));
  CHECK(contains(unknown, "not device memory"));
  CHECK(contains(unknown, "device 0"));

  jit::AllocationInfo host = device1_allocation();
  host.host = true;
  CHECK(contains(error_of({"dst", at(0x10000), {0, 8}}, host, 1), "dst (0x10000) is host memory"));

  const std::string foreign = error_of({"src", at(0x10000), {0, 8}}, device1_allocation(), 0);
  CHECK(contains(foreign, "src (0x10000) is memory of device 1 but the launch runs on device 0"));
}

TEST_CASE("check_pointers: managed memory passes on any device, within its allocation") {
  jit::AllocationInfo managed = device1_allocation();
  managed.managed = true;
  managed.host = true;
  CHECK(error_of({"src", at(0x10000), {0, 4096}}, managed, 0).empty());
  CHECK(contains(error_of({"src", at(0x10000), {0, 4097}}, managed, 0), "1 bytes past it"));
}

TEST_CASE("check_pointers: a view one element past or before its allocation names both ranges") {
  const jit::AllocationInfo info = device1_allocation();
  const std::string past = error_of({"dst", at(0x10000), {0, 4098}}, info, 1);
  CHECK(contains(past, "dst: the view reaches bytes [0x10000, 0x11002) but its allocation is [0x10000, 0x11000)"));
  CHECK(contains(past, "2 bytes past it"));
  const std::string before = error_of({"src", at(0x10000), {-4, 4}}, info, 1);
  CHECK(contains(before, "[0xfffc, 0x10004)"));
  CHECK(contains(before, "4 bytes before it"));
}

TEST_CASE("check_pointers is off by default and shows in the plan's description") {
  TensorDesc src{{64, 48}, {}, DType::f32};
  TensorDesc view = permuted(src, {1, 0});
  TensorDesc dst{view.shape, {}, DType::f32};
  CHECK_FALSE(RearrangeOptions{}.check_pointers);
  CHECK_FALSE(contains(plan_rearrange(dst, view).describe(), "pointers checked"));
  RearrangeOptions options;
  options.check_pointers = true;
  const RearrangePlan plan = plan_rearrange(dst, view, options);
  CHECK(contains(plan.describe(), "pointers checked at each launch"));
  CHECK(contains(plan.json(), "\"check_pointers\": true"));

  RopeDesc rope;
  rope.x = TensorDesc{{16, 4, 64}, {}, DType::f16};
  rope.table = TensorDesc{{16, 32}, {}, DType::f32};
  CHECK_FALSE(rope.check_pointers);
  rope.check_pointers = true;
  CHECK(contains(plan_rope(rope).describe(), "pointers:   checked at each launch"));
}
