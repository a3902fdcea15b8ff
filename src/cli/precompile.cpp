// `shapejit precompile`: compiles every kernel that the lines of some manifests may launch, for
// some architectures, into a relocatable deployment directory (cache entries plus index.txt and
// index.json) through the library's deployment builder. Needs NVRTC; needs no GPU and no driver.
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.hpp"
#include "core/errors.hpp"
#include "jit/deploy.hpp"
#include "ops/registry.hpp"

namespace fs = std::filesystem;

namespace shapejit::cli {
namespace {

struct PrecompileOptions {
  std::vector<std::string> manifests;
  std::vector<std::string> archs;
  std::string out;
  unsigned jobs = std::max(1u, std::thread::hardware_concurrency());
};

/// Reads every manifest and plans every line. Lines that fail are reported on stderr with their
/// file and line number and counted; the others still produce their jobs (each key once).
std::vector<jit::DeployJob> collect_jobs(const PrecompileOptions& options, std::size_t& lines, std::size_t& failed_lines) {
  std::vector<jit::DeployJob> jobs;
  std::set<std::string> queued;
  for (const std::string& file : options.manifests) {
    std::vector<ops::ManifestLine> manifest;
    try {
      manifest = ops::read_manifest(file);
    } catch (const std::exception& e) {
      fmt::print(stderr, "{}\n", e.what());
      ++failed_lines;
      continue;
    }
    for (const ops::ManifestLine& line : manifest) {
      ++lines;
      try {
        for (jit::DeployJob& job : ops::deploy_jobs(line.text, line.where, options.archs))
          if (queued.insert(job.key.hex()).second) jobs.push_back(std::move(job));
      } catch (const std::exception& e) {
        fmt::print(stderr, "{}: {}\n", line.where, e.what());
        ++failed_lines;
      }
    }
  }
  return jobs;
}

/// Progress of the workers: a bar redrawn in place on a terminal, one plain line per kernel otherwise.
class Progress : public jit::DeployProgress {
 public:
  explicit Progress(std::size_t total) : total_(total), terminal_(::isatty(STDERR_FILENO) != 0) {}

  void kernel_done(const jit::DeployJob& job, const char* what) override {
    std::lock_guard lock(mutex_);
    ++done_;
    if (!terminal_) {
      fmt::print(stderr, "[{}/{}] {} {} for {}\n", done_, total_, what, job.program.label, job.arch);
      return;
    }
    constexpr std::size_t kWidth = 30;
    const std::size_t filled = total_ == 0 ? kWidth : done_ * kWidth / total_;
    fmt::print(stderr, "\r[{}{}] {}/{} {:<40.40}", std::string(filled, '#'), std::string(kWidth - filled, '.'), done_,
               total_, fmt::format("{} {}", job.program.label, job.arch));
    if (done_ == total_) fmt::print(stderr, "\n");
  }

  /// Prints a message without breaking the bar.
  void report(const std::string& message) override {
    std::lock_guard lock(mutex_);
    fmt::print(stderr, "{}{}\n", terminal_ ? "\r\033[K" : "", message);
  }

 private:
  std::mutex mutex_;
  std::size_t total_;
  std::size_t done_ = 0;
  bool terminal_;
};

void precompile(const PrecompileOptions& options) {
  for (const std::string& arch : options.archs)
    if (!jit::is_arch_name(arch))
      fail(ErrorCode::invalid_argument, "--arch: '{}' is not an architecture name; use names like sm_80, sm_90, sm_90a",
           arch);
  if (options.jobs == 0) fail(ErrorCode::invalid_argument, "--jobs is 0; it must be at least 1");
  const auto start = std::chrono::steady_clock::now();
  std::size_t lines = 0, failed_lines = 0;
  const std::vector<jit::DeployJob> jobs = collect_jobs(options, lines, failed_lines);
  Progress progress(jobs.size());
  const jit::DeployOutcome outcome = jit::build_deployment(jobs, options.out, options.jobs, progress);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("{} kernels for {} from {} manifest lines into {}: {} compiled, {} already present, {} failed "
             "({:.1f} s, {:.1f} kernels/s with {} workers)\n",
             jobs.size(), fmt::join(options.archs, ","), lines, options.out, outcome.compiled, outcome.already_present,
             outcome.failed, seconds, seconds > 0 ? static_cast<double>(outcome.compiled) / seconds : 0.0,
             std::min<std::size_t>(options.jobs, jobs.size()));
  if (failed_lines > 0)
    fmt::print(stderr, "{} manifest line(s) or file(s) failed (see above); every other line was compiled\n",
               failed_lines);
  if (failed_lines > 0 || outcome.failed > 0) throw CLI::RuntimeError(1);
}

}  // namespace

void add_precompile_command(CLI::App& app) {
  auto options = std::make_shared<PrecompileOptions>();
  CLI::App* cmd = app.add_subcommand(
      "precompile", "Compile every kernel of manifest files for some GPU architectures into a deployment directory "
                    "(needs NVRTC, not a GPU)");
  cmd->add_option("--manifest", options->manifests, "Manifest file: `shapejit plan` argument lines, # comments (repeatable)")
      ->required()
      ->take_all();
  cmd->add_option("--arch", options->archs, "Architectures, comma-separated (sm_80,sm_90)")->required()->delimiter(',');
  cmd->add_option("--out", options->out, "Deployment directory to write (created if missing)")->required();
  cmd->add_option("--jobs", options->jobs, "Parallel NVRTC workers (default: hardware threads)");
  cmd->callback([options] { precompile(*options); });
}

}  // namespace shapejit::cli
