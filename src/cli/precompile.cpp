// `shapejit precompile`: compiles every kernel that the lines of some manifests may launch, for
// some architectures, into a relocatable deployment directory (cache entries plus index.txt and
// index.json). Needs NVRTC; needs no GPU and no driver.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.hpp"
#include "core/errors.hpp"
#include "jit/disk_cache.hpp"
#include "jit/kernel_cache.hpp"
#include "shapejit/core.hpp"

namespace fs = std::filesystem;

namespace shapejit::cli {
namespace {

/// Longer manifest lines are rejected: no real plan needs them, and a runaway line is a broken file.
constexpr std::size_t kMaxManifestLineBytes = 4096;

struct PrecompileOptions {
  std::vector<std::string> manifests;
  std::vector<std::string> archs;
  std::string out;
  unsigned jobs = std::max(1u, std::thread::hardware_concurrency());
};

/// Where a manifest line came from, for error messages ("llm.manifest:12").
struct SourceLine {
  std::string file;
  int number = 0;
  std::string where() const { return fmt::format("{}:{}", file, number); }
};

/// One kernel to build: a program for one architecture.
struct Job {
  jit::Program program;
  std::string arch;
  jit::CacheKey key;
  std::string manifest_line;  ///< the line that needs it (the program's own line when it has one)
  SourceLine source;
};

/// A built (or already present) entry, as the index lists it.
struct IndexEntry {
  std::string key;
  std::string arch;
  std::string label;
  std::string nvrtc_version;
  std::uint64_t bytes = 0;
  std::string manifest_line;
};

/// `line` without its `#` comment and surrounding blanks ("" for blank and comment-only lines).
std::string strip_comment(const std::string& line) {
  const std::string code = line.substr(0, line.find('#'));
  const auto first = code.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return code.substr(first, code.find_last_not_of(" \t\r") - first + 1);
}

/// NVRTC architecture names: sm_ followed by digits and at most one letter (sm_80, sm_90a, sm_100f).
bool is_arch_name(const std::string& arch) {
  if (arch.size() < 5 || arch.compare(0, 3, "sm_") != 0) return false;
  std::size_t i = 3;
  while (i < arch.size() && std::isdigit(static_cast<unsigned char>(arch[i]))) ++i;
  const std::size_t digits = i - 3;
  if (i < arch.size() && std::islower(static_cast<unsigned char>(arch[i]))) ++i;
  return digits >= 2 && i == arch.size();
}

/// Names of the operations a manifest line may start with ("rearrange", "rope").
std::vector<std::string> operation_names() {
  CLI::App app;
  PlanBuilder unused;
  add_plan_rearrange(app, unused);
  add_plan_rope(app, unused);
  std::vector<std::string> names;
  for (const CLI::App* op : app.get_subcommands({})) names.push_back(op->get_name());
  return names;
}

/// Appends the jobs of one manifest line (each program for each arch, skipping keys already
/// queued). Throws shapejit::Error when the line does not parse or does not plan.
void add_line_jobs(const std::string& line, const SourceLine& source, const std::vector<std::string>& archs,
                   std::set<std::string>& queued, std::vector<Job>& jobs) {
  if (line.size() > kMaxManifestLineBytes)
    fail(ErrorCode::invalid_argument, "the line is {} characters long; manifest lines are at most {}", line.size(),
         kMaxManifestLineBytes);
  static const std::vector<std::string> operations = operation_names();
  const std::string first_word = line.substr(0, line.find_first_of(" \t"));
  if (std::find(operations.begin(), operations.end(), first_word) == operations.end())
    fail(ErrorCode::invalid_argument, "unknown operation '{}'; a manifest line starts with one of: {}", first_word,
         fmt::join(operations, ", "));
  const PlanResult result = parse_plan_line(line)();
  for (const jit::Program& program : result.programs) {
    for (const std::string& arch : archs) {
      Job job{program, arch, jit::kernel_key(program, arch), program.manifest_line.empty() ? line : program.manifest_line,
              source};
      if (queued.insert(job.key.hex()).second) jobs.push_back(std::move(job));
    }
  }
}

/// Reads every manifest and plans every line. Lines that fail are reported on stderr with their
/// file and line number and counted; the others still produce their jobs.
std::vector<Job> collect_jobs(const PrecompileOptions& options, std::size_t& lines, std::size_t& failed_lines) {
  std::vector<Job> jobs;
  std::set<std::string> queued;
  for (const std::string& file : options.manifests) {
    std::ifstream in(file);
    std::error_code ec;
    if (!in || fs::is_directory(file, ec)) {
      fmt::print(stderr, "{}: cannot be read (--manifest takes a file of `shapejit plan` lines)\n", file);
      ++failed_lines;
      continue;
    }
    std::string raw;
    for (int number = 1; std::getline(in, raw); ++number) {
      const std::string line = strip_comment(raw);
      if (line.empty()) continue;
      ++lines;
      const SourceLine source{file, number};
      try {
        add_line_jobs(line, source, options.archs, queued, jobs);
      } catch (const std::exception& e) {
        fmt::print(stderr, "{}: {}\n", source.where(), e.what());
        ++failed_lines;
      }
    }
  }
  return jobs;
}

/// Progress of the workers: a bar redrawn in place on a terminal, one plain line per kernel otherwise.
class Progress {
 public:
  explicit Progress(std::size_t total) : total_(total), terminal_(::isatty(STDERR_FILENO) != 0) {}

  void kernel_done(const Job& job, const char* what) {
    std::lock_guard lock(mutex_);
    ++done_;
    if (!terminal_) {
      fmt::print(stderr, "[{}/{}] {} {} for {}\n", done_, total_, what, job.program.label, job.arch);
      return;
    }
    constexpr std::size_t kWidth = 30;
    const std::size_t filled = total_ == 0 ? kWidth : done_ * kWidth / total_;
    fmt::print(stderr, "\r[{}{}] {}/{} {:<40.40}", std::string(filled, '#'), std::string(kWidth - filled, '.'), done_,
               total_, fmt::format("{} {}", job.program.label, job.arch));
    if (done_ == total_) fmt::print(stderr, "\n");
  }

  /// Prints a message without breaking the bar.
  void report(const std::string& message) {
    std::lock_guard lock(mutex_);
    fmt::print(stderr, "{}{}\n", terminal_ ? "\r\033[K" : "", message);
  }

 private:
  std::mutex mutex_;
  std::size_t total_;
  std::size_t done_ = 0;
  bool terminal_;
};

struct BuildOutcome {
  std::vector<IndexEntry> entries;
  std::size_t compiled = 0;
  std::size_t already_present = 0;
  std::size_t failed = 0;
};

/// Builds one job into `out` unless a valid entry is already there; returns its index entry.
IndexEntry build_one(const Job& job, const jit::CacheDir& out, bool& compiled) {
  IndexEntry entry{job.key.hex(), job.arch, job.program.label, "", 0, job.manifest_line};
  const jit::CacheDir::Lookup present = out.read(job.key);
  if (present.status == jit::EntryStatus::ok) {
    entry.nvrtc_version = present.entry.info.nvrtc_version;
    entry.bytes = present.bytes.size();
    compiled = false;
    return entry;
  }
  const std::vector<std::uint8_t> bytes = jit::compile_entry(job.program, job.arch);
  if (std::string why = out.write(job.key, bytes); !why.empty()) fail(ErrorCode::io_error, "{}", why);
  entry.nvrtc_version = jit::decode_entry(bytes).info.nvrtc_version;
  entry.bytes = bytes.size();
  compiled = true;
  return entry;
}

/// Runs the jobs on `workers` threads, each taking the next job until none is left.
BuildOutcome build_all(const std::vector<Job>& jobs, const jit::CacheDir& out, unsigned workers) {
  BuildOutcome outcome;
  std::vector<std::optional<IndexEntry>> entries(jobs.size());
  std::atomic<std::size_t> next{0}, compiled{0}, present{0}, failed{0};
  Progress progress(jobs.size());
  auto work = [&] {
    for (std::size_t i; (i = next++) < jobs.size();) {
      const Job& job = jobs[i];
      try {
        bool was_compiled = false;
        entries[i] = build_one(job, out, was_compiled);
        ++(was_compiled ? compiled : present);
        progress.kernel_done(job, was_compiled ? "compiled" : "already present:");
      } catch (const std::exception& e) {
        ++failed;
        progress.report(fmt::format("{}: {} for {}: {}", job.source.where(), job.program.label, job.arch, e.what()));
        progress.kernel_done(job, "FAILED");
      }
    }
  };
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < std::min<std::size_t>(workers, jobs.size()); ++t) threads.emplace_back(work);
  for (std::thread& t : threads) t.join();
  for (auto& e : entries)
    if (e) outcome.entries.push_back(std::move(*e));
  outcome.compiled = compiled;
  outcome.already_present = present;
  outcome.failed = failed;
  return outcome;
}

nlohmann::json to_json(const IndexEntry& e) {
  return {{"key", e.key}, {"arch", e.arch},   {"label", e.label},
          {"nvrtc_version", e.nvrtc_version}, {"bytes", e.bytes}, {"manifest_line", e.manifest_line}};
}

/// Entries of an index.json written earlier into the same directory by this library version and
/// key schema, whose entry files are still there; anything else in it is dropped.
std::vector<IndexEntry> previous_entries(const jit::CacheDir& out) {
  std::vector<IndexEntry> entries;
  std::ifstream in(out.root() / "index.json");
  const nlohmann::json index = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!index.is_object() || index.value("library_version", "") != version() ||
      index.value("key_schema", -1) != jit::kKeySchema || !index.contains("entries") || !index["entries"].is_array())
    return entries;
  for (const nlohmann::json& e : index["entries"]) {
    if (!e.is_object()) continue;
    IndexEntry entry{e.value("key", ""), e.value("arch", ""), e.value("label", ""), e.value("nvrtc_version", ""),
                     e.value("bytes", std::uint64_t{0}), e.value("manifest_line", "")};
    const std::string expected_name = entry.key + ".sjc";
    const fs::path file = out.root() / fmt::format("v{}", jit::kEntryFormat) / entry.key.substr(0, 2) / expected_name;
    std::error_code ec;
    if (entry.key.size() == 32 && fs::is_regular_file(file, ec)) entries.push_back(std::move(entry));
  }
  return entries;
}

/// Writes `text` to `path` through a temp file and a rename, so readers never see half an index.
void write_atomically(const fs::path& path, const std::string& text) {
  const fs::path temp = path.string() + fmt::format(".tmp.{}", ::getpid());
  {
    std::ofstream file(temp, std::ios::binary | std::ios::trunc);
    file << text;
    if (!file.flush()) fail(ErrorCode::io_error, "--out: cannot write {}", temp.string());
  }
  std::error_code ec;
  fs::rename(temp, path, ec);
  if (ec) {
    fs::remove(temp, ec);
    fail(ErrorCode::io_error, "--out: cannot rename {} into place", path.string());
  }
}

/// Renders the plain-text index: a header of `key value` lines, then one line per entry.
std::string index_text(const nlohmann::json& index) {
  std::string text = "# shapejit deployment cache index; the entries are looked up by key, this file is for people\n";
  for (const char* field : {"library_version", "key_schema", "entry_format", "nvrtc_version"})
    text += fmt::format("{} {}\n", field, index[field].is_string() ? index[field].get<std::string>() : index[field].dump());
  std::string archs;
  for (const auto& a : index["archs"]) archs += (archs.empty() ? "" : ",") + a.get<std::string>();
  text += fmt::format("archs {}\n# key arch label manifest-line\n", archs);
  for (const auto& e : index["entries"])
    text += fmt::format("{} {} {} {}\n", e["key"].get<std::string>(), e["arch"].get<std::string>(),
                        e["label"].get<std::string>(), e["manifest_line"].get<std::string>());
  return text;
}

/// Merges `built` with what an earlier run indexed and rewrites index.json and index.txt. Several
/// precompiles into one directory take turns through an flock on the directory.
void write_index(const jit::CacheDir& out, const std::vector<IndexEntry>& built, const std::string& nvrtc_version) {
  const int dir_fd = ::open(out.root().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) fail(ErrorCode::io_error, "--out {}: cannot open the directory", out.root().string());
  ::flock(dir_fd, LOCK_EX);
  std::map<std::pair<std::string, std::string>, IndexEntry> merged;  // by (arch, key): sorted, stable output
  for (auto& e : previous_entries(out)) merged[{e.arch, e.key}] = e;
  for (const auto& e : built) merged[{e.arch, e.key}] = e;
  std::set<std::string> archs;
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& [id, e] : merged) {
    archs.insert(e.arch);
    entries.push_back(to_json(e));
  }
  const nlohmann::json index = {{"library_version", version()}, {"key_schema", jit::kKeySchema},
                                {"entry_format", jit::kEntryFormat}, {"nvrtc_version", nvrtc_version},
                                {"archs", archs},                    {"entries", entries}};
  try {
    write_atomically(out.root() / "index.json", index.dump(1) + "\n");
    write_atomically(out.root() / "index.txt", index_text(index));
  } catch (...) {
    ::close(dir_fd);  // also releases the lock
    throw;
  }
  ::close(dir_fd);
}

void precompile(const PrecompileOptions& options) {
  for (const std::string& arch : options.archs)
    if (!is_arch_name(arch))
      fail(ErrorCode::invalid_argument, "--arch: '{}' is not an architecture name; use names like sm_80, sm_90, sm_90a",
           arch);
  if (options.jobs == 0) fail(ErrorCode::invalid_argument, "--jobs is 0; it must be at least 1");
  const auto start = std::chrono::steady_clock::now();
  std::size_t lines = 0, failed_lines = 0;
  const std::vector<Job> jobs = collect_jobs(options, lines, failed_lines);
  std::error_code ec;
  fs::create_directories(options.out, ec);
  if (ec) fail(ErrorCode::io_error, "--out {}: cannot create the directory: {}", options.out, ec.message());
  const jit::CacheDir out(options.out);
  // Load NVRTC before starting workers, so that its absence is one clear error.
  const std::string nvrtc_version = jobs.empty() ? "" : jit::nvrtc_version();
  const BuildOutcome outcome = build_all(jobs, out, options.jobs);
  write_index(out, outcome.entries, nvrtc_version);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("{} kernels for {} from {} manifest lines into {}: {} compiled, {} already present, {} failed "
             "({:.1f} s, {:.1f} kernels/s with {} workers)\n",
             jobs.size(), fmt::join(options.archs, ","), lines, options.out, outcome.compiled, outcome.already_present,
             outcome.failed, seconds, seconds > 0 ? static_cast<double>(outcome.compiled) / seconds : 0.0,
             std::min<std::size_t>(options.jobs, jobs.size()));
  if (failed_lines > 0)
    fmt::print(stderr, "{} manifest line(s) or file(s) failed (see above); every other line was compiled\n",
               failed_lines);
  if (failed_lines > 0 || outcome.failed > 0) throw CLI::RuntimeError(1);
}

}  // namespace

void add_precompile_command(CLI::App& app) {
  auto options = std::make_shared<PrecompileOptions>();
  CLI::App* cmd = app.add_subcommand(
      "precompile", "Compile every kernel of manifest files for some GPU architectures into a deployment directory "
                    "(needs NVRTC, not a GPU)");
  cmd->add_option("--manifest", options->manifests, "Manifest file: `shapejit plan` argument lines, # comments (repeatable)")
      ->required()
      ->take_all();
  cmd->add_option("--arch", options->archs, "Architectures, comma-separated (sm_80,sm_90)")->required()->delimiter(',');
  cmd->add_option("--out", options->out, "Deployment directory to write (created if missing)")->required();
  cmd->add_option("--jobs", options->jobs, "Parallel NVRTC workers (default: hardware threads)");
  cmd->callback([options] { precompile(*options); });
}

}  // namespace shapejit::cli
