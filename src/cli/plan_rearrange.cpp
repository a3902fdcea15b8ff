#include "cli/commands.hpp"

namespace shapejit::cli {

// Filled in with the rearrange operation.
void add_plan_rearrange(CLI::App&, PlanBuilder&) {}

}  // namespace shapejit::cli
