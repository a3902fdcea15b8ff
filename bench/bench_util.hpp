// Helpers shared by the benchmark programs (not part of the library): case files, host timing,
// summary statistics, and tables printed as text or written as markdown.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace shapejit::bench {

/// One line of a case file: `<op> --key value --flag ...`, e.g.
/// `rearrange --dtype f16 --shape 64,512,32,128 --perm 0,2,1,3`.
struct CaseLine {
  std::string op;                             ///< first word ("rearrange", "rope")
  std::map<std::string, std::string> values;  ///< "--key value" pairs, keys without dashes ("" for a flag)
  std::string text;                           ///< the line as written
  int line_number = 0;                        ///< 1-based, for messages

  bool has(const std::string& key) const { return values.count(key) != 0; }
  /// The value of `--key`; throws std::runtime_error naming the line when it is missing.
  const std::string& get(const std::string& key) const {
    auto it = values.find(key);
    if (it == values.end())
      throw std::runtime_error(fmt::format("case line {} has no --{}: {}", line_number, key, text));
    return it->second;
  }
  /// The value of `--key`, or `fallback` when the line does not have it.
  std::string get_or(const std::string& key, const std::string& fallback) const {
    auto it = values.find(key);
    return it == values.end() ? fallback : it->second;
  }
};

/// Parses one non-comment line into its op and options; a `--key` followed by another `--key`
/// (or by nothing) is a flag with an empty value.
inline CaseLine parse_case_line(const std::string& text, int line_number = 0) {
  CaseLine line;
  line.text = text;
  line.line_number = line_number;
  std::istringstream words(text);
  std::vector<std::string> tokens;
  for (std::string w; words >> w;) tokens.push_back(w);
  if (tokens.empty()) throw std::runtime_error(fmt::format("case line {} is empty", line_number));
  line.op = tokens[0];
  for (std::size_t i = 1; i < tokens.size(); ++i) {
    if (tokens[i].rfind("--", 0) != 0)
      throw std::runtime_error(
          fmt::format("case line {}: expected an option like --shape, got '{}'", line_number, tokens[i]));
    const std::string key = tokens[i].substr(2);
    const bool has_value = i + 1 < tokens.size() && tokens[i + 1].rfind("--", 0) != 0;
    line.values[key] = has_value ? tokens[++i] : "";
  }
  return line;
}

/// Every case line of a file, skipping blank lines and `#` comments. Throws std::runtime_error
/// naming the path when the file cannot be read.
inline std::vector<CaseLine> read_case_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(fmt::format("cannot read case file '{}' (run from the repository root?)", path));
  std::vector<CaseLine> lines;
  int number = 0;
  for (std::string text; std::getline(in, text);) {
    ++number;
    const auto first = text.find_first_not_of(" \t\r");
    if (first == std::string::npos || text[first] == '#') continue;
    lines.push_back(parse_case_line(text.substr(first), number));
  }
  return lines;
}

/// Parses a comma-separated integer list ("64,512,-1"); throws std::runtime_error naming `what`.
inline std::vector<std::int64_t> parse_int_list(const std::string& text, const std::string& what) {
  std::vector<std::int64_t> values;
  std::istringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    std::size_t used = 0;
    std::int64_t v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size())
      throw std::runtime_error(fmt::format("{}: '{}' is not a comma-separated list of integers", what, text));
    values.push_back(v);
  }
  return values;
}

/// Joins integers with commas ("64,512,32").
inline std::string join_ints(const std::vector<std::int64_t>& values) { return fmt::format("{}", fmt::join(values, ",")); }

/// Appends the host times of `runs` calls of `body()` to `times`, in microseconds.
template <typename Body>
void append_host_times_us(Body&& body, int runs, std::vector<double>& times) {
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    body();
    times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
}

/// The median of `values` (the upper one of an even count).
inline double median(std::vector<double> values) {
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

/// Median host time of `body()` in microseconds over `runs` calls, after `warmup` untimed calls.
template <typename Body>
double host_median_us(Body&& body, int runs = 101, int warmup = 5) {
  for (int i = 0; i < warmup; ++i) body();
  std::vector<double> times;
  append_host_times_us(body, runs, times);
  return median(std::move(times));
}

/// Geometric mean of positive values (0 for an empty list).
inline double geometric_mean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  double log_sum = 0;
  for (double v : values) log_sum += std::log(v);
  return std::exp(log_sum / static_cast<double>(values.size()));
}

/// A table of strings, printed aligned for a terminal or written as a markdown table.
struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;

  /// Columns padded to their widest cell.
  std::string text() const {
    std::vector<std::size_t> width(header.size());
    for (std::size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
    for (const auto& row : rows)
      for (std::size_t c = 0; c < row.size() && c < width.size(); ++c) width[c] = std::max(width[c], row[c].size());
    auto line = [&](const std::vector<std::string>& cells) {
      std::string out;
      for (std::size_t c = 0; c < cells.size() && c < width.size(); ++c)
        out += c + 1 < cells.size() ? fmt::format("{:<{}}  ", cells[c], width[c]) : cells[c];
      return out + "\n";
    };
    std::string out = line(header);
    for (const auto& row : rows) out += line(row);
    return out;
  }

  /// A GitHub-flavoured markdown table.
  std::string markdown() const {
    auto line = [](const std::vector<std::string>& cells) { return fmt::format("| {} |\n", fmt::join(cells, " | ")); };
    std::string out = line(header);
    out += line(std::vector<std::string>(header.size(), "---"));
    for (const auto& row : rows) out += line(row);
    return out;
  }
};

/// The directory benchmark results are written to: $OUT when set (the device runner collects it),
/// else "" (print only).
inline std::string output_dir() {
  const char* out = std::getenv("OUT");
  return out && *out ? out : "";
}

/// Writes `text` to `path`; throws std::runtime_error naming the path on failure.
inline void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  if (!out || !(out << text)) throw std::runtime_error(fmt::format("cannot write '{}'", path));
}

}  // namespace shapejit::bench
