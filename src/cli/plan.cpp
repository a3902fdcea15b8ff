#include <fmt/format.h>

#include <memory>

#include "cli/commands.hpp"
#include "core/errors.hpp"

namespace shapejit::cli {
namespace {

struct PlanState {
  PlanBuilder builder;
  bool json = false;
  bool source = false;
};

void print_plan(const PlanResult& result, const PlanState& state) {
  if (state.json) {
    nlohmann::json out = result.json;
    if (state.source) {
      out["sources"] = nlohmann::json::array();
      for (const auto& p : result.programs) out["sources"].push_back({{"label", p.label}, {"source", p.source}});
    }
    fmt::print("{}\n", out.dump(2));
    return;
  }
  fmt::print("{}", result.text);
  if (state.source)
    for (const auto& p : result.programs) fmt::print("\n// ===== {} =====\n{}\n", p.label, p.source);
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto state = std::make_shared<PlanState>();
  CLI::App* plan = app.add_subcommand(
      "plan", "Plan an operation and print its canonical form, kernel family, launch shape and key; "
              "the arguments after `plan` are a manifest line");
  plan->require_subcommand(1);
  plan->fallthrough();
  plan->add_flag("--json", state->json, "Print the plan as JSON");
  plan->add_flag("--source", state->source, "Also print the generated CUDA source");
  add_plan_rearrange(*plan, state->builder);
  add_plan_rope(*plan, state->builder);
  plan->callback([state] { print_plan(state->builder(), *state); });
}

PlanBuilder parse_plan_line(const std::string& line) {
  PlanBuilder builder;
  CLI::App app{"manifest line"};
  app.require_subcommand(1);
  add_plan_rearrange(app, builder);
  add_plan_rope(app, builder);
  try {
    app.parse(line, false);
  } catch (const CLI::ParseError& e) {
    fail(ErrorCode::invalid_argument, "{}", e.what());
  }
  if (!builder) fail(ErrorCode::invalid_argument, "no operation in the line");
  return builder;
}

}  // namespace shapejit::cli
