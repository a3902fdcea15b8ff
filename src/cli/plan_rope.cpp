#include "cli/commands.hpp"

namespace shapejit::cli {

// Filled in with the rope operation.
void add_plan_rope(CLI::App&, PlanBuilder&) {}

}  // namespace shapejit::cli
