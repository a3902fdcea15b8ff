// shapejit core types: element types, tensor descriptors, errors, JIT counters and global options.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace shapejit {

/// Element types. Rearrange also accepts opaque elements of any size (TensorDesc::elem_bytes).
enum class DType : std::uint8_t { u8, i8, u16, i16, u32, i32, u64, i64, f16, bf16, f32, f64 };

/// Size of one element of `t` in bytes.
std::size_t dtype_size(DType t) noexcept;
/// Canonical name of `t` ("f16", "bf16", "u8", ...).
std::string_view dtype_name(DType t) noexcept;
/// Parses a canonical dtype name; std::nullopt for anything else.
std::optional<DType> parse_dtype(std::string_view name) noexcept;
/// True for f16, bf16, f32, f64.
bool dtype_is_float(DType t) noexcept;

/// A strided view of device memory: logical shape and signed strides counted in elements.
struct TensorDesc {
  std::vector<std::int64_t> shape;
  /// Strides in elements, one per dimension; empty means row-major contiguous.
  std::vector<std::int64_t> strides;
  DType dtype = DType::f32;
  /// Opaque element size in bytes (1..64) for rearrange; 0 means dtype_size(dtype).
  int elem_bytes = 0;

  /// Bytes per element: elem_bytes when set, else the dtype's size.
  std::size_t element_size() const noexcept;
  /// Strides as given, or the row-major contiguous strides of `shape` when none were given.
  std::vector<std::int64_t> effective_strides() const;
  /// Number of logical elements (1 for a 0-d scalar, 0 when any extent is 0).
  std::int64_t numel() const noexcept;
};

/// Row-major contiguous strides (in elements) of `shape`.
std::vector<std::int64_t> contiguous_strides(const std::vector<std::int64_t>& shape);

/// Error categories, shared with the C API (same numeric values as sj_status).
enum class ErrorCode : int {
  ok = 0,
  invalid_argument = 1,  ///< a shape, stride, dtype, alignment or overlap the operation cannot accept
  unsupported = 2,       ///< valid but not supported by this build (e.g. rank over the limit)
  compile_failed = 3,    ///< NVRTC rejected generated source; the message carries the log
  nvrtc_unavailable = 4, ///< NVRTC could not be loaded
  driver_unavailable = 5,///< the CUDA driver could not be loaded or has no device
  driver_error = 6,      ///< a CUDA driver call failed (launch, load, context)
  offline_miss = 7,      ///< offline mode and the kernel is in no cache; the message names the manifest line
  io_error = 8,          ///< a file could not be read or written
  internal = 9,
};

/// The exception every shapejit C++ function throws. The message names the offending argument
/// and says what would be accepted.
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

/// Process-wide JIT counters (monotonic since process start).
struct Counters {
  std::uint64_t memory_hits = 0;        ///< kernel found already loaded in this process
  std::uint64_t disk_hits = 0;          ///< cubin loaded from a deployment or user cache entry
  std::uint64_t compiles = 0;           ///< NVRTC compilations (low-register and past-NVRTC-cache recompiles too)
  double compile_ms = 0;                ///< total time spent in NVRTC
  double load_ms = 0;                   ///< total time spent reading entries and loading cubins
  std::uint64_t bad_entries_replaced = 0;  ///< corrupt, foreign or refused entries treated as misses
};

/// A snapshot of the counters.
Counters counters() noexcept;

/// Forbid (or allow again) NVRTC for the whole process: a cache miss becomes an ErrorCode::offline_miss.
/// SHAPEJIT_OFFLINE=1 in the environment sets it at start.
void set_offline(bool offline) noexcept;
/// Whether NVRTC is forbidden.
bool offline() noexcept;

/// Starts record mode for the whole process: every plan that needs kernels not yet recorded
/// appends its manifest line to the file at `path` (what SHAPEJIT_RECORD=path does at start). An
/// empty path stops recording.
void set_record_file(std::string_view path);
/// The file record mode appends to; "" when record mode is off.
std::string record_file();

/// Plans a manifest line (the arguments of `shapejit plan`, e.g. "rearrange --dtype f16 --shape
/// 8,4 --perm 1,0": what precompile reads and record mode writes) and returns the plan's
/// description, as text or as a JSON document. Throws shapejit::Error (invalid_argument) naming
/// what is wrong with the line: an unknown operation or option, a bad value, a plan that fails.
std::string describe_manifest_line(std::string_view line, bool json = false);

/// The library version string.
std::string_view version() noexcept;

}  // namespace shapejit
