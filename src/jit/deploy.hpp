// Deployment directories: building many kernels in parallel into a relocatable cache directory,
// and its index (index.json for programs, index.txt for people), merged under a directory lock so
// that several precompiles into one directory take turns. Needs NVRTC; needs no GPU.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "jit/program.hpp"

namespace shapejit::jit {

/// One kernel of a deployment: a program for one architecture, and the manifest line that needs it.
struct DeployJob {
  Program program;
  std::string arch;
  CacheKey key;
  std::string manifest_line;
  std::string where;  ///< where the line came from, for messages ("llm.manifest:12")
};

/// How a build went.
struct DeployOutcome {
  std::size_t compiled = 0;
  std::size_t already_present = 0;
  std::size_t failed = 0;
};

/// Receives progress from the worker threads, which call it concurrently: implementations lock.
class DeployProgress {
 public:
  virtual ~DeployProgress() = default;
  /// `job` is done: `what` is "compiled", "already present:" or "FAILED".
  virtual void kernel_done(const DeployJob& job, const char* what) = 0;
  /// A failure message.
  virtual void report(const std::string& message) = 0;
};

/// Builds every job into `out` (created if missing) on `workers` threads, skipping entries already
/// there and valid, then merges them into the directory's index. A failing job is reported and
/// counted; the others still build. Throws io_error when the directory or index cannot be written.
DeployOutcome build_deployment(const std::vector<DeployJob>& jobs, const std::filesystem::path& out, unsigned workers,
                               DeployProgress& progress);

/// Whether `arch` is an NVRTC architecture name: sm_ followed by digits and at most one letter
/// (sm_80, sm_90a, sm_100f).
bool is_arch_name(const std::string& arch);

}  // namespace shapejit::jit
