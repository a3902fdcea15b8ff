// The `shapejit` command-line tool's subcommands.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>


namespace shapejit::cli {

/// Adds `doctor`, `cache`, `plan`, `precompile` and `tune` to the tool.
void add_doctor_command(CLI::App& app);
void add_cache_command(CLI::App& app);
void add_plan_command(CLI::App& app);
void add_precompile_command(CLI::App& app);
void add_tune_command(CLI::App& app);

}  // namespace shapejit::cli
