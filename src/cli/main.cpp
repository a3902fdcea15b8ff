// shapejit: inspect the JIT, manage caches, print plans, precompile manifests.
#include <cstdio>

#include "cli/commands.hpp"
#include "shapejit/core.hpp"

int main(int argc, char** argv) {
  CLI::App app{"shapejit: run-time generated CUDA kernels for memory-movement operators"};
  app.set_version_flag("--version", std::string(shapejit::version()));
  app.require_subcommand(1);
  shapejit::cli::add_doctor_command(app);
  shapejit::cli::add_cache_command(app);
  shapejit::cli::add_plan_command(app);
  shapejit::cli::add_precompile_command(app);
  shapejit::cli::add_tune_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const shapejit::Error& e) {
    std::fprintf(stderr, "shapejit: %s\n", e.what());
    return 1;
  }
  return 0;
}
