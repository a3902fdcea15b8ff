// Finding a kernel: memory cache, then deployment caches, then the user cache, then NVRTC.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>
#include <vector>

#include "jit/program.hpp"

namespace shapejit::jit {

/// The loaded kernel of `program` for `arch`. One load per key per process: concurrent callers
/// with the same key wait for the first (single flight); no global lock is held while compiling.
/// Throws offline_miss (naming the manifest line) when offline and no cache holds it.
CUkernel obtain_kernel(const Program& program, const std::string& arch);

/// Compiles `program` for `arch` to a cubin. Where ptxas spills registers and the program has
/// low-register options, it compiles again with them and keeps the cubin that spills less.
std::vector<std::uint8_t> compile_program(const Program& program, const std::string& arch);

/// Compiles `program` for `arch` and returns the encoded cache entry (header and cubin), without
/// any cache or driver: what `shapejit precompile` writes.
std::vector<std::uint8_t> compile_entry(const Program& program, const std::string& arch);

/// The NVRTC version that produces cubins ("major.minor"); loads NVRTC.
std::string nvrtc_version();

}  // namespace shapejit::jit
