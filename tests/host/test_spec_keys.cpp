// Specialization keys: every declared field of every operator's spec is part of its key, so two
// specs that differ anywhere never share a registered kernel.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <type_traits>

#include "ops/rearrange/spec.hpp"
#include "ops/rope/plan.hpp"

using namespace shapejit;

namespace {

/// Another value of the same field: booleans flipped, numbers and enums moved by one, optionals toggled.
template <typename T>
void change(T& value) {
  if constexpr (std::is_same_v<T, bool>) {
    value = !value;
  } else if constexpr (std::is_enum_v<T>) {
    value = static_cast<T>(static_cast<int>(value) ^ 1);
  } else {
    value += 1;
  }
}

template <typename T>
void change(std::optional<T>& value) {
  value = value ? std::nullopt : std::optional<T>(T{});
}

/// Changes each field of `base` in turn and checks that the key, the text and the JSON change.
template <typename Spec, typename KeyOf>
void check_every_field_changes_the_key(const Spec& base, KeyOf key_of) {
  int count = 0;
  base.visit_fields([&](std::string_view, const auto&) { ++count; });
  std::set<std::uint64_t> keys = {key_of(base).hash};
  for (int field = 0; field < count; ++field) {
    Spec changed = base;
    std::string name;
    int index = 0;
    changed.visit_fields([&](std::string_view n, auto& value) {
      if (index++ != field) return;
      name = n;
      change(value);
    });
    CAPTURE(name);
    CHECK_FALSE(changed == base);
    CHECK(key_of(changed).hash != key_of(base).hash);
    CHECK(spec_text(changed) != spec_text(base));
    CHECK(spec_json(changed) != spec_json(base));
    keys.insert(key_of(changed).hash);
  }
  CHECK(keys.size() == static_cast<std::size_t>(count) + 1);  // no two single-field changes collide
}

}  // namespace

TEST_CASE("rearrange: changing any spec field changes the specialization key") {
  plan::RearrangeSpec spec;
  spec.family = plan::RearrangeFamily::transpose;
  plan::RearrangeKernelArgs args;
  check_every_field_changes_the_key(spec, [&](const plan::RearrangeSpec& s) { return plan::rearrange_key(s, args); });
}

TEST_CASE("rearrange: exact mode keys the baked shape, the default mode does not") {
  plan::RearrangeSpec spec;
  spec.family = plan::RearrangeFamily::row;
  spec.num_dims = 2;
  plan::RearrangeKernelArgs a, b;
  a.dim[1].src_stride = 100;
  b.dim[1].src_stride = 101;
  CHECK(plan::rearrange_key(spec, a) == plan::rearrange_key(spec, b));
  spec.exact = true;
  CHECK_FALSE(plan::rearrange_key(spec, a) == plan::rearrange_key(spec, b));
}

TEST_CASE("rope: changing any spec field changes the specialization key") {
  plan::RopeSpec spec;
  spec.position = DType::i32;
  check_every_field_changes_the_key(spec, [](const plan::RopeSpec& s) { return plan::rope_key(s); });
}

TEST_CASE("specs print every declared field") {
  plan::RopeSpec spec;
  spec.position = DType::i64;
  const std::string json = spec_json(spec);
  CHECK(json.find("\"style\": \"neox\"") != std::string::npos);
  CHECK(json.find("\"position\": \"i64\"") != std::string::npos);
  CHECK(json.find("\"head_dim\": 0") != std::string::npos);
  CHECK(spec_text(plan::RearrangeSpec{}).find("family=copy unit_bytes=1") == 0);
  CHECK_FALSE(plan::rearrange_key(plan::RearrangeSpec{}, {}) == plan::rope_key(plan::RopeSpec{}));
}
