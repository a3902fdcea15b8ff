// Specializations with fields declared once. An operator lists its spec's fields in one macro:
//
//   #define MY_SPEC_FIELDS(X) X(int, unit_bytes, 1) X(bool, exact, false)
//   struct MySpec { SHAPEJIT_SPEC_FIELDS(MY_SPEC_FIELDS) bool operator==(const MySpec&) const = default; };
//   SHAPEJIT_CHECK_SPEC_FIELDS(MySpec, MY_SPEC_FIELDS)
//
// which declares the members and a visitor over (name, member) in declaration order. The key,
// describe text and JSON are derived from the visitor, so a new field cannot be left out of them.
// Field types: bool, integers, enums with a `field_text` overload, std::optional of those.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "shapejit/core.hpp"

#define SHAPEJIT_DECLARE_SPEC_FIELD(type, name, initial) type name = initial;
#define SHAPEJIT_VISIT_SPEC_FIELD(type, name, initial) visit(#name, name);
#define SHAPEJIT_SPEC_FIELDS(LIST)                                  \
  LIST(SHAPEJIT_DECLARE_SPEC_FIELD)                                 \
  template <typename Visit>                                         \
  void visit_fields(Visit&& visit) const {                          \
    LIST(SHAPEJIT_VISIT_SPEC_FIELD)                                 \
  }                                                                 \
  template <typename Visit>                                         \
  void visit_fields(Visit&& visit) {                                \
    LIST(SHAPEJIT_VISIT_SPEC_FIELD)                                 \
  }

#define SHAPEJIT_COUNT_SPEC_FIELD(type, name, initial) +1
/// Fails to compile when `Spec` holds a member outside its field list (it would miss the key):
/// the aggregate's member count must equal the list's length.
#define SHAPEJIT_CHECK_SPEC_FIELDS(Spec, LIST)                                                  \
  static_assert(::shapejit::spec_detail::member_count<Spec>() == (0 LIST(SHAPEJIT_COUNT_SPEC_FIELD)), \
                #Spec " has a member outside its field list");

namespace shapejit {

/// A 64-bit specialization key (process-wide kernel registries are keyed by it).
struct SpecKey {
  std::uint64_t hash = 0;
  bool operator==(const SpecKey&) const = default;
};

inline std::string_view field_text(DType t) { return dtype_name(t); }

namespace spec_detail {

/// XXH3-64 of `bytes`.
std::uint64_t hash64(std::string_view bytes);

/// Converts to any field type: counts an aggregate's members by how many initializers it takes.
struct AnyField {
  template <typename T>
  operator T() const;
};

template <typename T, typename... Fields>
constexpr std::size_t member_count() {
  if constexpr (requires { T{Fields{}..., AnyField{}}; }) {
    return member_count<T, Fields..., AnyField>();
  } else {
    return sizeof...(Fields);
  }
}

/// A field's value as it appears in describe text and JSON (true/false, a number, or a name).
template <typename T>
std::string text_of(const T& value) {
  if constexpr (std::is_same_v<T, bool>) {
    return value ? "true" : "false";
  } else if constexpr (std::is_integral_v<T>) {
    return std::to_string(value);
  } else {
    return std::string(field_text(value));
  }
}

template <typename T>
std::string text_of(const std::optional<T>& value) {
  return value ? text_of(*value) : "none";
}

template <typename T>
constexpr bool quoted_in_json = !std::is_integral_v<T>;
template <typename T>
constexpr bool quoted_in_json<std::optional<T>> = true;

/// The bytes a field contributes to a key: its value as a 64-bit integer (enums by value).
template <typename T>
std::uint64_t key_word(const T& value) {
  return static_cast<std::uint64_t>(value);
}

template <typename T>
std::uint64_t key_word(const std::optional<T>& value) {
  return value ? (key_word(*value) << 1 | 1) : 0;
}

}  // namespace spec_detail

/// Hash of every declared field of `spec` (names and values) under `op`, plus `extra` words
/// (e.g. baked shapes); two specs that differ in any field get different keys.
template <typename Spec>
SpecKey spec_key(std::string_view op, const Spec& spec, const std::uint64_t* extra = nullptr, std::size_t extra_count = 0) {
  std::string material(op);
  auto add = [&material](const void* bytes, std::size_t size) {
    material.append(static_cast<const char*>(bytes), size);
  };
  spec.visit_fields([&](std::string_view name, const auto& value) {
    const std::uint64_t word = spec_detail::key_word(value);
    add(name.data(), name.size());
    add(&word, sizeof word);
  });
  if (extra_count > 0) add(extra, extra_count * sizeof(std::uint64_t));
  return {spec_detail::hash64(material)};
}

/// "name=value name=value ..." over every declared field.
template <typename Spec>
std::string spec_text(const Spec& spec) {
  std::string out;
  spec.visit_fields([&](std::string_view name, const auto& value) {
    out += fmt::format("{}{}={}", out.empty() ? "" : " ", name, spec_detail::text_of(value));
  });
  return out;
}

/// The members of spec_json without its braces ("\"name\": value, ..."), to merge into a larger object.
template <typename Spec>
std::string spec_json_members(const Spec& spec) {
  std::string out;
  spec.visit_fields([&](std::string_view name, const auto& value) {
    using T = std::decay_t<decltype(value)>;
    const std::string text = spec_detail::text_of(value);
    out += fmt::format("{}\"{}\": {}", out.empty() ? "" : ", ", name,
                       spec_detail::quoted_in_json<T> ? fmt::format("\"{}\"", text) : text);
  });
  return out;
}

/// A JSON object of every declared field.
template <typename Spec>
std::string spec_json(const Spec& spec) {
  return "{" + spec_json_members(spec) + "}";
}

}  // namespace shapejit
