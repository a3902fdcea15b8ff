// The operator registry: every operator's manifest line (its options, and line -> plan ->
// programs, describe text and JSON) in one list that the CLI, precompile and record mode iterate.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "jit/deploy.hpp"
#include "jit/program.hpp"
#include "shapejit/core.hpp"

namespace shapejit::ops {

/// What kind of value an option takes.
enum class OptionKind {
  flag,      ///< no value: present or not
  integer,   ///< one integer
  integers,  ///< comma-separated integers
  text,      ///< one word (a name, or one of `choices`)
};

/// One option of an operator's manifest line, `--name [value]`.
struct ManifestOption {
  ManifestOption(std::string name, OptionKind kind, std::string help, bool required = false,
                 std::vector<std::string> choices = {})
      : name(std::move(name)), kind(kind), help(std::move(help)), required(required), choices(std::move(choices)) {}

  std::string name;  ///< without the leading dashes
  OptionKind kind;
  std::string help;
  bool required;
  std::vector<std::string> choices;  ///< allowed values (empty: any)
};

/// The options given on one line: name -> value as written ("" for a flag).
class ManifestArgs {
 public:
  std::map<std::string, std::string> values;

  bool has(const std::string& name) const { return values.count(name) > 0; }
  /// The option's text, or `fallback` when absent.
  std::string text(const std::string& name, const std::string& fallback = "") const;
  /// The option as an integer, or `fallback` when absent; throws invalid_argument naming it.
  std::int64_t integer(const std::string& name, std::int64_t fallback = 0) const;
  /// The option as an int (per-element sizes, dims, access widths); throws when it does not fit.
  int small_integer(const std::string& name, int fallback = 0) const;
  /// The option as comma-separated integers (empty when absent); throws invalid_argument naming it.
  std::vector<std::int64_t> integers(const std::string& name) const;
};

/// A manifest line, planned: its text and JSON forms and every program a launch may run.
struct PlannedLine {
  std::string text;
  std::string json;
  std::vector<jit::Program> programs;  ///< what a precompile must build (no duplicates)
};

/// One operator's entry.
struct Operator {
  std::string_view name;
  std::string_view summary;
  std::vector<ManifestOption> options;
  PlannedLine (*plan)(const ManifestArgs& args);  ///< throws shapejit::Error for a line that does not plan
  /// Measured planning of a line on the current device, its tuning record written under `out`;
  /// returns what was chosen, as text. nullptr: the operator has nothing to tune.
  std::string (*tune)(const ManifestArgs& args, const std::filesystem::path& out) = nullptr;
};

/// Every registered operator.
const std::vector<Operator>& operators();

/// The operator named `name`; throws invalid_argument listing the known names.
const Operator& find_operator(std::string_view name);

/// Parses the options after an operator's name (`--name value`, `--name=value`, `--flag`),
/// checking names, values, choices and required options. Throws invalid_argument naming the option.
ManifestArgs parse_options(const Operator& op, const std::vector<std::string>& words);

/// Checks given options against `op`: known names, values of the right kind, allowed choices,
/// required options present. Throws invalid_argument naming the option.
void check_args(const Operator& op, const ManifestArgs& args);

/// A manifest line split into its operator and options.
struct ParsedLine {
  const Operator* op;
  ManifestArgs args;
};

/// Parses a whole manifest line (a `#` comment is ignored), at most kMaxManifestLineBytes long.
/// Throws invalid_argument naming what is wrong.
ParsedLine parse_manifest_line(std::string_view line);

/// One manifest line without its comment, and where it is ("llm.manifest:12").
struct ManifestLine {
  std::string text;
  std::string where;
};

/// The non-blank lines of a manifest file; throws invalid_argument when it cannot be read.
std::vector<ManifestLine> read_manifest(const std::string& file);

/// Plans a whole manifest line ("rearrange --dtype f16 --shape ..."; a `#` comment is ignored), at
/// most kMaxManifestLineBytes long.
PlannedLine plan_manifest_line(std::string_view line);

/// Longer manifest lines are rejected: no real plan needs them, and a runaway line is a broken file.
inline constexpr std::size_t kMaxManifestLineBytes = 4096;

/// `line` without its `#` comment and surrounding blanks ("" for blank and comment-only lines).
std::string strip_comment(std::string_view line);

/// The deployment jobs of one manifest line: each of its programs for each of `archs`, tagged
/// with the line and `where` it came from ("llm.manifest:12"). Throws what plan_manifest_line throws.
std::vector<jit::DeployJob> deploy_jobs(std::string_view line, const std::string& where,
                                        const std::vector<std::string>& archs);

// The entries, each defined in its operator's folder.
const Operator& rearrange_operator();
const Operator& rope_operator();
const Operator& hadamard_operator();

}  // namespace shapejit::ops
