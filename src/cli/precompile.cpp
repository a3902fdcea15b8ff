#include "cli/commands.hpp"

namespace shapejit::cli {

// Filled in with deployment support.
void add_precompile_command(CLI::App&) {}

}  // namespace shapejit::cli
