// `shapejit plan <op> ...`: one subcommand per registered operator, its options taken from the
// registry; the arguments after `plan` are a manifest line.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>
#include <map>
#include <memory>

#include "cli/commands.hpp"
#include "ops/registry.hpp"

namespace shapejit::cli {
namespace {

struct PlanState {
  std::function<ops::PlannedLine()> planned;
  bool json = false;
  bool source = false;
};

void print_plan(const ops::PlannedLine& result, const PlanState& state) {
  if (state.json) {
    nlohmann::json out = nlohmann::json::parse(result.json);
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

/// Values CLI11 parsed for one operator's options.
struct ParsedOptions {
  std::map<std::string, std::string> text;
  std::map<std::string, std::int64_t> integer;
  std::map<std::string, std::vector<std::int64_t>> integers;
  std::map<std::string, bool> flag;
};

/// The manifest arguments of what the user gave.
ops::ManifestArgs to_args(const ParsedOptions& parsed, const CLI::App& cmd) {
  ops::ManifestArgs args;
  auto given = [&cmd](const std::string& name) { return cmd.count("--" + name) > 0; };
  for (const auto& [name, value] : parsed.text)
    if (given(name)) args.values[name] = value;
  for (const auto& [name, value] : parsed.integer)
    if (given(name)) args.values[name] = std::to_string(value);
  for (const auto& [name, values] : parsed.integers)
    if (given(name)) args.values[name] = fmt::format("{}", fmt::join(values, ","));
  for (const auto& [name, value] : parsed.flag)
    if (value) args.values[name] = "";
  return args;
}

void add_operator(CLI::App& plan, const ops::Operator& op, PlanState& state) {
  CLI::App* cmd = plan.add_subcommand(std::string(op.name), std::string(op.summary));
  auto parsed = std::make_shared<ParsedOptions>();
  for (const ops::ManifestOption& o : op.options) {
    const std::string flag = "--" + o.name;
    CLI::Option* added = nullptr;
    switch (o.kind) {
      case ops::OptionKind::flag: added = cmd->add_flag(flag, parsed->flag[o.name], o.help); break;
      case ops::OptionKind::integer: added = cmd->add_option(flag, parsed->integer[o.name], o.help); break;
      case ops::OptionKind::integers:
        added = cmd->add_option(flag, parsed->integers[o.name], o.help)->delimiter(',');
        break;
      case ops::OptionKind::text: added = cmd->add_option(flag, parsed->text[o.name], o.help); break;
    }
    if (o.required) added->required();
    if (!o.choices.empty() && o.kind == ops::OptionKind::text) added->check(CLI::IsMember(o.choices));
  }
  cmd->callback([&op, &state, parsed, cmd] {
    state.planned = [&op, args = to_args(*parsed, *cmd)] {
      ops::check_args(op, args);
      return op.plan(args);
    };
  });
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
  for (const ops::Operator& op : ops::operators()) add_operator(*plan, op, *state);
  plan->callback([state] { print_plan(state->planned(), *state); });
}

}  // namespace shapejit::cli
