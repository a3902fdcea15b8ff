// The `shapejit` command-line tool's subcommands.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "jit/program.hpp"

namespace shapejit::cli {

/// What `shapejit plan <op> ...` produced: the printable plan and every kernel it may launch.
struct PlanResult {
  std::string text;                   ///< human-readable plan
  nlohmann::json json;                ///< the same, as JSON
  std::vector<jit::Program> programs; ///< what a precompile must build for this line
};

/// Builds the plan of a parsed `plan <op>` line (validation errors throw shapejit::Error).
using PlanBuilder = std::function<PlanResult()>;

/// Each operation registers its `plan <op>` subcommand; parsing it sets `builder`.
void add_plan_rearrange(CLI::App& plan, PlanBuilder& builder);
void add_plan_rope(CLI::App& plan, PlanBuilder& builder);

/// Parses one manifest line (the arguments of `shapejit plan`, without "shapejit plan").
/// Throws shapejit::Error with CLI11's message when the line does not parse.
PlanBuilder parse_plan_line(const std::string& line);

/// Adds `doctor`, `cache`, `plan` and `precompile` to the tool.
void add_doctor_command(CLI::App& app);
void add_cache_command(CLI::App& app);
void add_plan_command(CLI::App& app);
void add_precompile_command(CLI::App& app);

}  // namespace shapejit::cli
