// `shapejit precompile` end to end (NVRTC, no GPU): every kernel of every line for every arch,
// an index that lists exactly the entries, lines that fail do not stop the others, and several
// processes precompiling into one directory at once.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "jit/cache_entry.hpp"
#include "jit/disk_cache.hpp"
#include "shapejit/core.hpp"
#include "shapejit/rearrange.hpp"
#include "shapejit/rope.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace shapejit;
using test::CommandResult;
using test::TempDir;
using test::run_command;

namespace {

/// The shapejit tool of this build.
std::string cli() { return test::built_path("../src/cli/shapejit"); }

std::string precompile(const fs::path& manifest, const std::string& archs, const fs::path& out) {
  return cli() + " precompile --manifest " + manifest.string() + " --arch " + archs + " --out " + out.string();
}

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

// Three lines of different kernels (rope in two styles, a relayout); the fourth repeats the first.
const std::string kLines[] = {
    "rope --algo neox --dtype bf16 --pos-dtype i32 --shape 1,16,8,128 --k-heads 2",
    "rope --algo gptj --dtype f16 --shape 2,16,4,256 --rotary-dim 64",
    "rearrange --dtype f16 --shape 2,16,4,64 --perm 0,2,1,3",
    "rope --algo neox --dtype bf16 --pos-dtype i32 --shape 4,99,32,128 --k-heads 8  # same kernels as line 1",
};

/// Keys (file stems) of every entry below a directory, with each entry's architecture.
std::set<std::pair<std::string, std::string>> entries_of(const fs::path& root) {
  std::set<std::pair<std::string, std::string>> out;
  for (const auto& f : fs::recursive_directory_iterator(root)) {
    if (f.path().extension() != ".sjc") continue;
    std::ifstream in(f.path(), std::ios::binary);
    const std::vector<std::uint8_t> bytes{std::istreambuf_iterator<char>(in), {}};
    const jit::DecodedEntry e = jit::decode_entry(bytes);
    REQUIRE(e.status == jit::EntryStatus::ok);
    CHECK(e.info.key.hex() == f.path().stem().string());
    out.insert({f.path().stem().string(), e.info.arch});
  }
  return out;
}

/// The (key, arch) pairs index.json lists, checking its header on the way.
std::set<std::pair<std::string, std::string>> index_of(const fs::path& root) {
  std::ifstream in(root / "index.json");
  const nlohmann::json index = nlohmann::json::parse(in);
  CHECK(index["library_version"] == std::string(version()));
  CHECK(index["key_schema"] == 1);
  CHECK(index["entry_format"] == jit::kEntryFormat);
  std::set<std::pair<std::string, std::string>> out;
  for (const auto& e : index["entries"]) {
    CHECK_FALSE(e["manifest_line"].get<std::string>().empty());
    CHECK_FALSE(e["nvrtc_version"].get<std::string>().empty());
    out.insert({e["key"].get<std::string>(), e["arch"].get<std::string>()});
  }
  return out;
}

}  // namespace

TEST_CASE("precompile builds each line's kernels once per arch, and its index lists exactly the entries") {
  TempDir tmp;
  const fs::path all = tmp.path / "all.manifest";
  write_text(all, "# test lines\n" + kLines[0] + "\n" + kLines[1] + "\n\n" + kLines[2] + "\n" + kLines[3] + "\n");
  const CommandResult r = run_command(precompile(all, "sm_80,sm_90", tmp.path / "all") + " --jobs 2");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto entries = entries_of(tmp.path / "all");
  CHECK(index_of(tmp.path / "all") == entries);
  CHECK(jit::CacheDir(tmp.path / "all").stats().temp_files == 0);
  std::set<std::string> archs;
  for (const auto& [key, arch] : entries) archs.insert(arch);
  CHECK(archs == std::set<std::string>{"sm_80", "sm_90"});

  // Each line alone builds a subset; the three distinct lines together build all of it.
  std::set<std::pair<std::string, std::string>> union_of_lines;
  for (int i = 0; i < 4; ++i) {
    const fs::path one = tmp.path / ("line" + std::to_string(i));
    write_text(one.string() + ".manifest", kLines[i] + "\n");
    REQUIRE(run_command(precompile(one.string() + ".manifest", "sm_80,sm_90", one)).status == 0);
    const auto line_entries = entries_of(one);
    CHECK(line_entries.size() >= 2);
    union_of_lines.insert(line_entries.begin(), line_entries.end());
  }
  CHECK(union_of_lines == entries);
  CHECK(entries_of(tmp.path / "line3") == entries_of(tmp.path / "line0"));

  // A second run finds everything present and compiles nothing.
  const CommandResult again = run_command(precompile(all, "sm_80,sm_90", tmp.path / "all"));
  CHECK(again.status == 0);
  CHECK(again.output.find(" 0 compiled, " + std::to_string(entries.size()) + " already present") != std::string::npos);
}

TEST_CASE("a line that fails makes the exit status 1 but every other line is compiled and indexed") {
  TempDir tmp;
  const fs::path manifest = tmp.path / "mixed.manifest";
  write_text(manifest, kLines[2] + "\nrope --algo neox --dtype bf16 --shape 1,16,8,127\n" + kLines[1] + "\n");
  const CommandResult r = run_command(precompile(manifest, "sm_90", tmp.path / "out"));
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find(manifest.string() + ":2: ") != std::string::npos);
  const auto entries = entries_of(tmp.path / "out");
  CHECK(entries.size() >= 2);
  CHECK(index_of(tmp.path / "out") == entries);
}

TEST_CASE("precompiles into one directory one after another add to its index") {
  TempDir tmp;
  write_text(tmp.path / "a.manifest", kLines[0] + "\n");
  write_text(tmp.path / "b.manifest", kLines[2] + "\n");
  REQUIRE(run_command(precompile(tmp.path / "a.manifest", "sm_90", tmp.path / "out")).status == 0);
  REQUIRE(run_command(precompile(tmp.path / "b.manifest", "sm_80", tmp.path / "out")).status == 0);
  const auto entries = entries_of(tmp.path / "out");
  CHECK(index_of(tmp.path / "out") == entries);
  std::ifstream text(tmp.path / "out" / "index.txt");
  const std::string index_txt{std::istreambuf_iterator<char>(text), {}};
  CHECK(index_txt.find("archs sm_80,sm_90\n") != std::string::npos);
  for (const auto& [key, arch] : entries) CHECK(index_txt.find(key + " " + arch + " ") != std::string::npos);
}

TEST_CASE("four precompile processes into one directory at once: every entry verifies, no temp files left") {
  TempDir tmp;
  const fs::path manifest = tmp.path / "all.manifest";
  write_text(manifest, kLines[0] + "\n" + kLines[1] + "\n" + kLines[2] + "\n");
  const fs::path out = tmp.path / "shared";
  std::string script;
  for (int p = 0; p < 4; ++p)
    script += fmt::format("({} --jobs 2 >{} 2>&1; echo $? >{}) & ", precompile(manifest, "sm_80,sm_90", out),
                          (tmp.path / fmt::format("log{}", p)).string(), (tmp.path / fmt::format("status{}", p)).string());
  script += "wait";
  REQUIRE(run_command(script).status == 0);
  for (int p = 0; p < 4; ++p) {
    std::ifstream status(tmp.path / fmt::format("status{}", p));
    std::ifstream log(tmp.path / fmt::format("log{}", p));
    INFO(std::string(std::istreambuf_iterator<char>(log), {}));
    int code = -1;
    status >> code;
    CHECK(code == 0);
  }
  const CommandResult verify = run_command(cli() + " cache verify --cache-dir " + out.string());
  INFO(verify.output);
  CHECK(verify.status == 0);
  CHECK(verify.output.find(" 0 bad") != std::string::npos);
  const auto entries = entries_of(out);
  CHECK(entries.size() >= 6);
  CHECK(index_of(out) == entries);
  for (const auto& f : fs::recursive_directory_iterator(out)) CHECK(f.path().string().find(".tmp.") == std::string::npos);
}

namespace {

/// Plans (without launching) a few rope and rearrange calls, as a workload would.
void plan_workload(std::int64_t batch) {
  for (const DType dtype : {DType::bf16, DType::f16}) {
    RopeDesc rope;
    rope.x = TensorDesc{{batch, 16, 8, 128}, {}, dtype};
    rope.k = TensorDesc{{batch, 16, 2, 128}, {}, dtype};
    rope.table = rope_tables(16, 128, DType::f32).desc();
    rope.positions = TensorDesc{{batch, 16}, {}, DType::i32};
    plan_rope(rope);
    const TensorDesc view = permuted(TensorDesc{{batch, 16, 8, 64}, {}, dtype}, {0, 2, 1, 3});
    plan_rearrange(TensorDesc{view.shape, {}, dtype}, view);
  }
}

}  // namespace

TEST_CASE("record mode from threads writes each plan's line once, and the recorded manifest precompiles") {
  TempDir tmp;
  const fs::path recorded = tmp.path / "recorded.manifest";
  // SHAPEJIT_RECORD is read once per process: record in a child.
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("SHAPEJIT_RECORD", recorded.c_str(), 1);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) threads.emplace_back([] { plan_workload(2), plan_workload(3); });
    for (std::thread& t : threads) t.join();
    std::_Exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  std::ifstream in(recorded);
  std::multiset<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.insert(line);
  INFO(fmt::format("{}", fmt::join(lines, "\n")));
  // 4 threads planned rope and rearrange in two dtypes and two batch sizes; batch sizes share
  // kernels, and so do bf16 and f16 rearranges (2-byte moves): rope twice, rearrange once.
  CHECK(lines.size() == 3);
  for (const std::string& line : lines) CHECK(lines.count(line) == 1);
  const CommandResult r = run_command(precompile(recorded, "sm_90", tmp.path / "out"));
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(entries_of(tmp.path / "out").size() >= 4);
  CHECK(r.output.find("0 failed") != std::string::npos);
}

TEST_CASE("the shipped serving manifest (M-RoPE, 2-D RoPE, rope with a KV-cache append) precompiles for sm_80 and "
          "sm_90, every line") {
  const std::string manifest = test::built_path("../../cache/serving.manifest");
  REQUIRE(fs::exists(manifest));
  std::ifstream in(manifest);
  int lines = 0;
  for (std::string line; std::getline(in, line);) lines += line.rfind("rope ", 0) == 0;
  TempDir tmp;
  const CommandResult r = run_command(precompile(manifest, "sm_80,sm_90", tmp.path / "serving"));
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("from " + std::to_string(lines) + " manifest lines") != std::string::npos);
  CHECK(r.output.find(" 0 failed") != std::string::npos);
  CHECK(index_of(tmp.path / "serving") == entries_of(tmp.path / "serving"));
  CHECK(entries_of(tmp.path / "serving").size() >= static_cast<std::size_t>(2 * lines));
}
