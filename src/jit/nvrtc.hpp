// NVRTC, opened with dlopen at first use: SHAPEJIT_NVRTC if set (and only that), else
// libnvrtc.so.13 and libnvrtc.so.12 through the loader, else the toolkit's lib64
// ($CUDA_HOME, $CUDA_PATH, /usr/local/cuda). Nothing links against libnvrtc.
#pragma once

#include <nvrtc.h>

#include <optional>
#include <string>
#include <vector>

namespace shapejit::jit {

struct Nvrtc {
  decltype(&::nvrtcVersion) nvrtcVersion = nullptr;
  decltype(&::nvrtcGetErrorString) nvrtcGetErrorString = nullptr;
  decltype(&::nvrtcCreateProgram) nvrtcCreateProgram = nullptr;
  decltype(&::nvrtcDestroyProgram) nvrtcDestroyProgram = nullptr;
  decltype(&::nvrtcCompileProgram) nvrtcCompileProgram = nullptr;
  decltype(&::nvrtcGetProgramLogSize) nvrtcGetProgramLogSize = nullptr;
  decltype(&::nvrtcGetProgramLog) nvrtcGetProgramLog = nullptr;
  decltype(&::nvrtcGetCUBINSize) nvrtcGetCUBINSize = nullptr;
  decltype(&::nvrtcGetCUBIN) nvrtcGetCUBIN = nullptr;
  std::string path;     ///< what was opened
  std::string version;  ///< "major.minor"
};

/// Loads NVRTC once. Throws ErrorCode::nvrtc_unavailable, listing every place tried, when it
/// cannot be loaded. Callers check offline() first: offline processes never load it.
const Nvrtc& nvrtc();

/// Whether NVRTC has been loaded in this process (it is never loaded just to ask).
bool nvrtc_loaded() noexcept;

/// Compiles self-contained CUDA source to a cubin for `arch` (e.g. "sm_90").
/// Throws ErrorCode::compile_failed with the NVRTC log; the failing source is written to a file
/// whose path the message names, with the options. With `spill_store_bytes`, ptxas reports its
/// resource use and the bytes of register spill stores it wrote are stored there (the machine code
/// is the same either way; the cubin records the ptxas options). Where NVRTC answers from its cache
/// with no report, the program is compiled again with --no-cache; spills with no report read as 0,
/// with a warning.
std::vector<unsigned char> compile_to_cubin(const std::string& source, const std::string& arch,
                                            const std::vector<std::string>& options,
                                            const std::string& label, int* spill_store_bytes = nullptr);

/// The bytes of register spill stores that ptxas reports in an NVRTC log, summed over its
/// functions; nullopt when the log holds no ptxas report.
std::optional<int> spill_store_bytes_in_log(const std::string& log);

}  // namespace shapejit::jit
