// Deployment without a GPU: manifest errors from `shapejit precompile`, damaged entries in
// deployment directories (skipped, never written to) and user caches (replaced), read-only and
// uncreatable user caches, and offline mode never loading NVRTC.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "jit/cache_entry.hpp"
#include "jit/disk_cache.hpp"
#include "jit/kernel_cache.hpp"
#include "jit/nvrtc.hpp"
#include "shapejit/core.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace shapejit;
using test::CommandResult;
using test::TempDir;
using test::run_command;
using namespace shapejit::jit;

namespace {

void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

void write_bytes(const fs::path& path, const std::vector<std::uint8_t>& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

/// Every file below `root` with its contents, to prove a directory was left untouched.
std::map<std::string, std::string> snapshot(const fs::path& root) {
  std::map<std::string, std::string> files;
  for (const auto& f : fs::recursive_directory_iterator(root)) {
    std::ifstream in(f.path(), std::ios::binary);
    files[f.path().string()] = f.is_regular_file() ? std::string(std::istreambuf_iterator<char>(in), {}) : "<dir>";
  }
  return files;
}

Program probe_program(const std::string& name) {
  return {"probe", "extern \"C\" __global__ void sj_kernel() {} // " + name, {}, "rearrange --dtype f32 --shape 8 --perm 0"};
}

/// The ways an entry on disk can be damaged.
enum class Damage { truncated, bit_flipped, zero_length, other_format, directory };
constexpr Damage kAllDamage[] = {Damage::truncated, Damage::bit_flipped, Damage::zero_length, Damage::other_format,
                                 Damage::directory};

const char* damage_name(Damage d) {
  switch (d) {
    case Damage::truncated: return "truncated";
    case Damage::bit_flipped: return "bit-flipped";
    case Damage::zero_length: return "zero-length";
    case Damage::other_format: return "another entry format version";
    case Damage::directory: return "a directory";
  }
  return "?";
}

/// Puts a damaged version of a valid entry for `key` where the entry belongs in `dir`.
void plant_damaged_entry(const CacheDir& dir, const CacheKey& key, Damage damage) {
  std::vector<std::uint8_t> bytes = encode_entry({key, "sm_90", "13.0"}, std::vector<std::uint8_t>(256, 0x5a));
  const fs::path path = dir.entry_path(key);
  switch (damage) {
    case Damage::truncated: bytes.resize(bytes.size() / 2); break;
    case Damage::bit_flipped: bytes[kEntryHeaderBytes + 17] ^= 0x04; break;
    case Damage::zero_length: bytes.clear(); break;
    case Damage::other_format: bytes[8] = static_cast<std::uint8_t>(kEntryFormat + 1); break;
    case Damage::directory: fs::create_directories(path / "not-an-entry"); return;
  }
  write_bytes(path, bytes);
}

/// obtain_kernel in offline mode, expecting the miss error; returns its message.
std::string expect_offline_miss(const Program& program) {
  set_offline(true);
  std::string message;
  try {
    obtain_kernel(program, "sm_90");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::offline_miss);
    message = e.what();
  }
  set_offline(false);
  return message;
}

/// Points the caches at directories for the life of the object.
struct CacheEnvironment {
  CacheEnvironment(const fs::path& user, const fs::path& deployment) {
    ::setenv("SHAPEJIT_CACHE_DIR", user.c_str(), 1);
    if (!deployment.empty()) ::setenv("SHAPEJIT_CACHE_PATH", deployment.c_str(), 1);
  }
  ~CacheEnvironment() {
    ::unsetenv("SHAPEJIT_CACHE_DIR");
    ::unsetenv("SHAPEJIT_CACHE_PATH");
  }
};

}  // namespace

TEST_CASE("precompile reports each bad manifest line with its file and line number") {
  TempDir tmp;
  const fs::path manifest = tmp.path / "bad.manifest";
  write_text(manifest, "# a comment, then five bad lines\n"
                       "transpose --dtype f16 --shape 4,4\n"
                       "rearrange --dtype f17 --shape 4,4 --perm 1,0\n"
                       "\n"
                       "rope --algo neox --dtype bf16 --shape 1,-4,32,128\n"
                       "rearrange --dtype f16 --shape " + std::string(5000, '7') + " --perm 0\n"
                       "rope --algo sideways --dtype bf16 --shape 1,4,32,128   # trailing comment\n");
  // Nothing here needs compiling, so NVRTC is not needed either.
  const CommandResult r = run_command("SHAPEJIT_NVRTC=/nonexistent/libnvrtc.so " + test::built_path("../src/cli/shapejit") +
                                      " precompile --manifest " + manifest.string() + " --arch sm_90 --out " +
                                      (tmp.path / "out").string());
  INFO(r.output);
  CHECK(r.status == 1);
  const std::string where = manifest.string() + ":";
  CHECK(r.output.find(where + "2: unknown operation 'transpose'") != std::string::npos);
  CHECK(r.output.find(where + "3: --dtype f17 is not a dtype") != std::string::npos);
  CHECK(r.output.find(where + "5: x.shape[1] is -4") != std::string::npos);
  CHECK(r.output.find(where + "6: the line is 5039 characters long; manifest lines are at most 4096") != std::string::npos);
  CHECK(r.output.find(where + "7: --algo: sideways") != std::string::npos);
  CHECK(r.output.find(where + "1:") == std::string::npos);
  CHECK(r.output.find(where + "4:") == std::string::npos);
  CHECK(r.output.find("5 manifest line(s) or file(s) failed") != std::string::npos);
}

TEST_CASE("precompile refuses a bad --arch, --jobs 0 and a manifest that cannot be read") {
  TempDir tmp;
  const std::string cli = test::built_path("../src/cli/shapejit");
  const std::string out = " --out " + (tmp.path / "out").string();
  write_text(tmp.path / "empty.manifest", "# nothing\n");
  const CommandResult arch = run_command(cli + " precompile --manifest " + (tmp.path / "empty.manifest").string() +
                                         " --arch sm_90,compute90" + out);
  CHECK(arch.status == 1);
  CHECK(arch.output.find("--arch: 'compute90' is not an architecture name") != std::string::npos);
  const CommandResult jobs = run_command(cli + " precompile --manifest " + (tmp.path / "empty.manifest").string() +
                                         " --arch sm_90 --jobs 0" + out);
  CHECK(jobs.status == 1);
  CHECK(jobs.output.find("--jobs is 0") != std::string::npos);
  const CommandResult missing = run_command(cli + " precompile --manifest " + (tmp.path / "missing.manifest").string() +
                                            " --arch sm_90" + out);
  CHECK(missing.status == 1);
  CHECK(missing.output.find("missing.manifest: cannot be read") != std::string::npos);
}

TEST_CASE("a damaged entry in a deployment directory is a miss with one warning, and the directory is never written") {
  for (Damage damage : kAllDamage) {
    INFO(damage_name(damage));
    TempDir tmp;
    const fs::path deployment = tmp.path / "deploy";
    const Program program = probe_program(std::string("deployment ") + damage_name(damage));
    plant_damaged_entry(CacheDir(deployment), kernel_key(program, "sm_90"), damage);
    const auto before = snapshot(deployment);
    const std::uint64_t bad_before = counters().bad_entries_replaced;
    {
      const CacheEnvironment env(tmp.path / "user", deployment);
      CHECK(expect_offline_miss(program).find(program.manifest_line) != std::string::npos);
    }
    CHECK(counters().bad_entries_replaced == bad_before + 1);
    CHECK(snapshot(deployment) == before);
    CHECK_FALSE(fs::exists(tmp.path / "user" / "v1"));
  }
}

TEST_CASE("a damaged entry in the user cache is a miss with one warning and is removed for its replacement") {
  for (Damage damage : kAllDamage) {
    INFO(damage_name(damage));
    TempDir tmp;
    const Program program = probe_program(std::string("user ") + damage_name(damage));
    const CacheDir user(tmp.path);
    plant_damaged_entry(user, kernel_key(program, "sm_90"), damage);
    const std::uint64_t bad_before = counters().bad_entries_replaced;
    {
      const CacheEnvironment env(tmp.path, {});
      CHECK_FALSE(expect_offline_miss(program).empty());
    }
    CHECK(counters().bad_entries_replaced == bad_before + 1);
    CHECK_FALSE(user.read(kernel_key(program, "sm_90")).present);
  }
}

TEST_CASE("a read-only user cache still serves its entries, refuses writes with a reason and never throws") {
  TempDir tmp;
  const fs::path root = tmp.path / "readonly";
  const CacheDir dir(root);
  const CacheKey good = kernel_key(probe_program("read-only good"), "sm_90");
  const Program damaged_program = probe_program("read-only damaged");
  REQUIRE(dir.write(good, encode_entry({good, "sm_90", "13.0"}, std::vector<std::uint8_t>(64, 1))) == "");
  plant_damaged_entry(dir, kernel_key(damaged_program, "sm_90"), Damage::bit_flipped);
  constexpr auto kReadOnly = fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                            fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec;
  for (const auto& f : fs::recursive_directory_iterator(root))
    if (f.is_directory()) fs::permissions(f.path(), kReadOnly);
  fs::permissions(root, kReadOnly);
  fs::permissions(tmp.path, kReadOnly);
  // Root ignores permissions, so the child gives up root first.
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) std::_Exit(10);
    int code = 0;
    try {
      if (dir.read(good).status != EntryStatus::ok) code = 11;
      const CacheKey fresh = kernel_key(probe_program("read-only fresh"), "sm_90");
      if (dir.write(fresh, encode_entry({fresh, "sm_90", "13.0"}, {})).empty()) code = 12;
      ::setenv("SHAPEJIT_CACHE_DIR", root.c_str(), 1);
      set_offline(true);
      try {
        obtain_kernel(damaged_program, "sm_90");
        code = 13;
      } catch (const Error& e) {
        if (e.code() != ErrorCode::offline_miss) code = 14;
      }
    } catch (...) {
      code = 15;
    }
    std::_Exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  fs::permissions(tmp.path, fs::perms::owner_all);
  fs::permissions(root, fs::perms::owner_all);
  CHECK(dir.stats().temp_files == 0);
  CHECK(dir.stats().entries == 2);  // the damaged entry could not be removed, and that is fine
}

TEST_CASE("offline mode from the environment never loads NVRTC; a miss names the manifest line") {
  TempDir tmp;
  const CommandResult r = run_command("SHAPEJIT_OFFLINE=1 SHAPEJIT_NVRTC=/nonexistent/libnvrtc.so SHAPEJIT_CACHE_DIR=" +
                                      tmp.path.string() + " " + test::built_path("deploy_child") + " offline-miss");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("offline_miss nvrtc_loaded=0") != std::string::npos);
  CHECK(r.output.find("add this line to your manifest") != std::string::npos);
  CHECK(r.output.find("nvrtc_unavailable") == std::string::npos);
}
