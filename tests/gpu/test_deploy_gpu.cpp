// Deployment on a GPU: a complete deployment directory serves every line of the shipped manifests
// (cache/llm.manifest, cache/serving.manifest) with NVRTC pointing at nothing; offline with an
// incomplete one is an error, not a crash; a user cache that cannot be written leaves the process
// running on its memory cache. Each case runs deploy_child, a fresh process, and checks its output.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "gpu.hpp"
#include "jit/cache_entry.hpp"
#include "jit/disk_cache.hpp"
#include "jit/driver.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace shapejit;
using test::CommandResult;
using test::TempDir;
using test::run_command;

namespace {

/// A shipped manifest ("llm.manifest"): from the repository root, or relative to build/tests/.
std::string shipped_manifest(const std::string& name) {
  if (fs::exists("cache/" + name)) return fs::absolute("cache/" + name).string();
  return test::built_path("../../cache/" + name);
}
std::string llm_manifest() { return shipped_manifest("llm.manifest"); }

/// "lines=N rope=N rearrange=N", as deploy_child reports a manifest it ran.
std::string line_counts(const std::string& manifest) {
  std::ifstream in(manifest);
  int lines = 0, rope = 0, rearrange = 0;
  for (std::string raw; std::getline(in, raw);) {
    const std::string op = raw.substr(0, raw.find_first_of(" #"));
    if (op.empty()) continue;
    ++lines;
    rope += op == "rope";
    rearrange += op == "rearrange";
  }
  return "lines=" + std::to_string(lines) + " rope=" + std::to_string(rope) + " rearrange=" + std::to_string(rearrange);
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string child(const std::string& environment, const std::string& arguments) {
  return environment + " " + test::built_path("deploy_child") + " " + arguments;
}

/// Rewrites every entry's producing-NVRTC field, as if another NVRTC had built the directory.
void relabel_nvrtc(const fs::path& root, const std::string& nvrtc_version) {
  const jit::CacheDir dir(root);
  for (const auto& f : fs::recursive_directory_iterator(root)) {
    if (f.path().extension() != ".sjc") continue;
    std::ifstream in(f.path(), std::ios::binary);
    const std::vector<std::uint8_t> bytes{std::istreambuf_iterator<char>(in), {}};
    const jit::DecodedEntry e = jit::decode_entry(bytes);
    REQUIRE(e.status == jit::EntryStatus::ok);
    REQUIRE(dir.write(e.info.key, jit::encode_entry({e.info.key, e.info.arch, nvrtc_version}, e.payload)) == "");
  }
}

/// cache/llm.manifest and cache/serving.manifest precompiled for device 0's architecture, once per
/// test process.
const fs::path& complete_deployment() {
  static TempDir tmp;
  static const fs::path root = [] {
    const std::string arch = jit::device_arch(0);
    const fs::path out = tmp.path / "deploy";
    const CommandResult r = run_command(test::built_path("../src/cli/shapejit") +
                                        " precompile --manifest " + llm_manifest() + " --manifest " +
                                        shipped_manifest("serving.manifest") + " --arch " + arch + " --out " +
                                        out.string());
    INFO(r.output);
    REQUIRE(r.status == 0);
    relabel_nvrtc(out, "0.1");
    return out;
  }();
  return root;
}

}  // namespace

TEST_CASE("a complete deployment directory from another NVRTC serves every manifest line correctly, NVRTC never loaded" *
          test::gpu_only()) {
  for (const std::string name : {"llm.manifest", "serving.manifest"}) {
    CAPTURE(name);
    const std::string manifest = shipped_manifest(name);
    TempDir tmp;
    const CommandResult r =
        run_command(child("SHAPEJIT_CACHE_PATH=" + complete_deployment().string() + " SHAPEJIT_CACHE_DIR=" +
                              (tmp.path / "user").string() + " SHAPEJIT_NVRTC=/nonexistent/libnvrtc.so",
                          "run " + manifest));
    MESSAGE(r.output);
    CHECK(r.status == 0);
    CHECK(r.output.find("ok " + line_counts(manifest) + " failed=0 compiles=0") != std::string::npos);
    CHECK(r.output.find("nvrtc_loaded=0") != std::string::npos);
    CHECK(r.output.find("first call of rope: plan to launch") != std::string::npos);
    if (name == "llm.manifest") CHECK(r.output.find("first call of rearrange: plan to launch") != std::string::npos);
    CHECK(r.output.find("warning") == std::string::npos);
    CHECK_FALSE(fs::exists(tmp.path / "user" / "v1"));
  }
}

TEST_CASE("offline with an incomplete deployment directory is an offline_miss naming the line, not a crash" *
          test::gpu_only()) {
  TempDir tmp;
  const fs::path partial = tmp.path / "partial";
  fs::copy(complete_deployment(), partial, fs::copy_options::recursive);
  int kept = 0;
  for (const auto& f : fs::recursive_directory_iterator(partial))
    if (f.path().extension() == ".sjc" && kept++ % 2 == 1) fs::remove(f.path());
  const CommandResult r = run_command(child("SHAPEJIT_OFFLINE=1 SHAPEJIT_CACHE_PATH=" + partial.string() +
                                                " SHAPEJIT_CACHE_DIR=" + (tmp.path / "user").string(),
                                            "run " + llm_manifest()));
  INFO(r.output);
  CHECK(r.status == 3);
  CHECK(r.output.find("offline_miss nvrtc_loaded=0") != std::string::npos);
  CHECK(r.output.find("add this line to your manifest and precompile it:\nr") != std::string::npos);
}

TEST_CASE("a user cache that cannot be created warns once and the process carries on in memory" * test::gpu_only()) {
  TempDir tmp;
  std::ofstream(tmp.path / "a-file") << "not a directory";
  const CommandResult r = run_command(
      child("SHAPEJIT_CACHE_DIR=" + (tmp.path / "a-file" / "cache").string(), "run " + llm_manifest() + " --lines 8 --twice"));
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("ok lines=8") != std::string::npos);
  CHECK(r.output.find("compiles=0") == std::string::npos);
  CHECK(count_of(r.output, "the user cache cannot be written") == 1);
}

TEST_CASE("a file-size limit hit while writing the user cache warns once and the process carries on" *
          test::gpu_only()) {
  TempDir tmp;
  const fs::path user = tmp.path / "user";
  const CommandResult r = run_command(
      child("SHAPEJIT_CACHE_DIR=" + user.string(), "run " + llm_manifest() + " --lines 4 --twice --fsize-limit 100"));
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("ok lines=4") != std::string::npos);
  CHECK(count_of(r.output, "file size limit") == 1);
  CHECK(jit::CacheDir(user).stats().entries == 0);
  CHECK(jit::CacheDir(user).stats().temp_files == 0);
}
