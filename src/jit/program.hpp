// What the JIT compiles: complete CUDA source plus the facts that identify it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shapejit::jit {

/// Every generated module exports exactly one kernel under this name.
inline constexpr const char* kKernelName = "sj_kernel";

/// Bump when anything that feeds the key changes meaning (entry layout, option normalization).
inline constexpr int kKeySchema = 1;

struct Program {
  std::string label;                 ///< short human name, e.g. "rearrange_tiled"; not part of the key
  std::string source;                ///< complete self-contained CUDA source
  std::vector<std::string> options;  ///< extra NVRTC options (sorted into the key)
  std::string manifest_line;         ///< `shapejit plan ...` line that reproduces this kernel
  /// Options added where ptxas spills registers with `options` alone: they select a variant of the
  /// source that holds fewer values in registers (part of the key when not empty).
  std::vector<std::string> low_register_options = {};
};

/// XXH3-128 of everything that changes the cubin's bytes, except the NVRTC version.
struct CacheKey {
  std::array<std::uint8_t, 16> bytes{};
  std::string hex() const;
  bool operator==(const CacheKey&) const = default;
};

/// XXH3-128 of `fields`, each length-prefixed (no two lists of fields hash the same bytes).
CacheKey hash_fields(const std::vector<std::string_view>& fields);

/// Key of `program` compiled for `arch`: source, normalized options, arch, library version and
/// key schema. No paths and nothing random, so every machine computes the same key.
CacheKey kernel_key(const Program& program, const std::string& arch);

}  // namespace shapejit::jit
