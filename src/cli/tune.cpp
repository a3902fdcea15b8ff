// `shapejit tune`: measured planning of every line of some manifests on this machine's GPU, each
// choice written as a tuning record into a directory a deployment ships beside its cubins.
#include <fmt/format.h>

#include <memory>

#include "cli/commands.hpp"
#include "core/errors.hpp"
#include "jit/driver.hpp"
#include "ops/registry.hpp"

namespace shapejit::cli {
namespace {

struct TuneOptions {
  std::vector<std::string> manifests;
  std::string out;
};

void tune(const TuneOptions& options) {
  if (!jit::driver_available())
    fail(ErrorCode::driver_unavailable, "tune measures kernels and needs a GPU: {}", jit::driver_unavailable_reason());
  std::vector<ops::ManifestLine> lines;
  std::size_t failed = 0;
  for (const std::string& file : options.manifests) {
    try {
      const std::vector<ops::ManifestLine> more = ops::read_manifest(file);
      lines.insert(lines.end(), more.begin(), more.end());
    } catch (const std::exception& e) {
      fmt::print(stderr, "{}\n", e.what());
      ++failed;
    }
  }
  std::size_t tuned = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const ops::ManifestLine& line = lines[i];
    try {
      const ops::ParsedLine parsed = ops::parse_manifest_line(line.text);
      if (parsed.op->tune == nullptr) {
        fmt::print(stderr, "[{}/{}] {}: {} has nothing to tune\n", i + 1, lines.size(), line.where, parsed.op->name);
        continue;
      }
      const std::string outcome = parsed.op->tune(parsed.args, options.out);
      fmt::print(stderr, "[{}/{}] {}: {}\n", i + 1, lines.size(), line.where, outcome);
      ++tuned;
    } catch (const std::exception& e) {
      fmt::print(stderr, "[{}/{}] {}: {}\n", i + 1, lines.size(), line.where, e.what());
      ++failed;
    }
  }
  fmt::print("{} of {} manifest lines tuned into {}\n", tuned, lines.size(), options.out);
  if (failed > 0) throw CLI::RuntimeError(1);
}

}  // namespace

void add_tune_command(CLI::App& app) {
  auto options = std::make_shared<TuneOptions>();
  CLI::App* cmd = app.add_subcommand(
      "tune", "Time the candidate kernels of every manifest line on this machine's GPU and write the fastest "
              "choices as tuning records into a directory (ship it with SHAPEJIT_CACHE_PATH, plan with "
              "SHAPEJIT_TUNE=1)");
  cmd->add_option("--manifest", options->manifests, "Manifest file: `shapejit plan` argument lines, # comments (repeatable)")
      ->required()
      ->take_all();
  cmd->add_option("--out", options->out, "Directory to write the tuning records into (created if missing)")->required();
  cmd->callback([options] { tune(*options); });
}

}  // namespace shapejit::cli
