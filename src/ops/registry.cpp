#include "ops/registry.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <fstream>

#include "core/errors.hpp"

namespace shapejit::ops {
namespace {

std::int64_t parse_integer(std::string_view text, const std::string& name) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size() || text.empty())
    invalid_argument("--{}: {} is not an integer", name, text);
  return value;
}

std::vector<std::string> split_words(std::string_view line) {
  std::vector<std::string> words;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) words.emplace_back(line.substr(start, i - start));
  }
  return words;
}

const ManifestOption* find_option(const Operator& op, std::string_view name) {
  for (const ManifestOption& o : op.options)
    if (o.name == name) return &o;
  return nullptr;
}

/// Comma-separated integers; an empty item ("4,,4", "4,") is an error.
std::vector<std::int64_t> parse_integers(std::string_view text, const std::string& name) {
  std::vector<std::int64_t> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    out.push_back(parse_integer(text.substr(start, comma - start), name));
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

void check_value(const ManifestOption& option, const std::string& value) {
  if (option.kind == OptionKind::integer) parse_integer(value, option.name);
  if (option.kind == OptionKind::integers) parse_integers(value, option.name);
  if (!option.choices.empty() && std::find(option.choices.begin(), option.choices.end(), value) == option.choices.end())
    invalid_argument("--{}: {} is not one of {}", option.name, value, fmt::join(option.choices, ", "));
}

}  // namespace

std::string ManifestArgs::text(const std::string& name, const std::string& fallback) const {
  auto it = values.find(name);
  return it == values.end() ? fallback : it->second;
}

std::int64_t ManifestArgs::integer(const std::string& name, std::int64_t fallback) const {
  auto it = values.find(name);
  return it == values.end() ? fallback : parse_integer(it->second, name);
}

std::vector<std::int64_t> ManifestArgs::integers(const std::string& name) const {
  auto it = values.find(name);
  return it == values.end() ? std::vector<std::int64_t>{} : parse_integers(it->second, name);
}

int ManifestArgs::small_integer(const std::string& name, int fallback) const {
  const std::int64_t value = integer(name, fallback);
  if (value < INT32_MIN || value > INT32_MAX) invalid_argument("--{}: {} is out of range", name, value);
  return static_cast<int>(value);
}

const std::vector<Operator>& operators() {
  static const std::vector<Operator> all = {
      rearrange_operator(),
      rope_operator(),
      hadamard_operator(),
  };
  return all;
}

const Operator& find_operator(std::string_view name) {
  std::vector<std::string_view> names;
  for (const Operator& op : operators()) {
    if (op.name == name) return op;
    names.push_back(op.name);
  }
  invalid_argument("unknown operation '{}'; a manifest line starts with one of: {}", name, fmt::join(names, ", "));
}

ManifestArgs parse_options(const Operator& op, const std::vector<std::string>& words) {
  ManifestArgs args;
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (word.rfind("--", 0) != 0)
      invalid_argument("{}: '{}' is not an option; options look like --name value", op.name, word);
    const std::size_t equals = word.find('=');
    const std::string name = word.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
    const ManifestOption* option = find_option(op, name);
    if (option == nullptr) {
      std::vector<std::string> known;
      for (const ManifestOption& o : op.options) known.push_back("--" + o.name);
      invalid_argument("{}: unknown option --{}; it takes {}", op.name, name, fmt::join(known, " "));
    }
    const bool list = option->kind == OptionKind::integers;
    if (args.has(name) && !list) invalid_argument("{}: --{} is given twice", op.name, name);
    std::string value;
    if (option->kind == OptionKind::flag) {
      if (equals != std::string::npos) invalid_argument("{}: --{} is a flag and takes no value", op.name, name);
    } else if (equals != std::string::npos) {
      value = word.substr(equals + 1);
    } else {
      if (i + 1 >= words.size()) invalid_argument("{}: --{} needs a value", op.name, name);
      value = words[++i];
    }
    // A list may also be given as several words ("--shape 4 4") or repeated options, as on the CLI.
    while (list && i + 1 < words.size() && words[i + 1].rfind("--", 0) != 0) value += "," + words[++i];
    if (list && args.has(name)) value = args.values[name] + "," + value;
    args.values[name] = value;
  }
  check_args(op, args);
  return args;
}

void check_args(const Operator& op, const ManifestArgs& args) {
  for (const auto& [name, value] : args.values) {
    const ManifestOption* option = find_option(op, name);
    if (option == nullptr) invalid_argument("{}: unknown option --{}", op.name, name);
    if (option->kind != OptionKind::flag) check_value(*option, value);
  }
  for (const ManifestOption& o : op.options)
    if (o.required && !args.has(o.name)) invalid_argument("{}: --{} is required ({})", op.name, o.name, o.help);
}

ParsedLine parse_manifest_line(std::string_view raw) {
  const std::string line = strip_comment(raw);
  if (line.size() > kMaxManifestLineBytes)
    invalid_argument("the line is {} characters long; manifest lines are at most {}", line.size(), kMaxManifestLineBytes);
  std::vector<std::string> words = split_words(line);
  if (words.empty()) invalid_argument("the manifest line is empty; it starts with an operation name");
  const Operator& op = find_operator(words.front());
  words.erase(words.begin());
  return {&op, parse_options(op, words)};
}

PlannedLine plan_manifest_line(std::string_view line) {
  const ParsedLine parsed = parse_manifest_line(line);
  return parsed.op->plan(parsed.args);
}

std::vector<ManifestLine> read_manifest(const std::string& file) {
  std::ifstream in(file);
  std::error_code ec;
  if (!in || std::filesystem::is_directory(file, ec))
    invalid_argument("{}: cannot be read (a manifest is a file of `shapejit plan` lines)", file);
  std::vector<ManifestLine> lines;
  std::string raw;
  for (int number = 1; std::getline(in, raw); ++number)
    if (std::string line = strip_comment(raw); !line.empty())
      lines.push_back({std::move(line), fmt::format("{}:{}", file, number)});
  return lines;
}

std::vector<jit::DeployJob> deploy_jobs(std::string_view line, const std::string& where,
                                        const std::vector<std::string>& archs) {
  std::vector<jit::DeployJob> jobs;
  for (const jit::Program& program : plan_manifest_line(line).programs)
    for (const std::string& arch : archs)
      jobs.push_back({program, arch, jit::kernel_key(program, arch),
                      program.manifest_line.empty() ? std::string(line) : program.manifest_line, where});
  return jobs;
}

std::string strip_comment(std::string_view line) {
  const std::string_view code = line.substr(0, line.find('#'));
  const auto first = code.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return "";
  return std::string(code.substr(first, code.find_last_not_of(" \t\r") - first + 1));
}

}  // namespace shapejit::ops

namespace shapejit {

std::string describe_manifest_line(std::string_view line, bool json) {
  ops::PlannedLine planned = ops::plan_manifest_line(line);
  return json ? planned.json : planned.text;
}

}  // namespace shapejit
