// Tuning records: round trip, every corruption rejected, foreign versions and keys ignored, lookup
// order (deployment caches before the user cache), concurrent writers, and planning with `tune` on
// a machine without a GPU (the planned variant is kept and the plan says why).
#include <doctest/doctest.h>

#include <fstream>

#include "jit/driver.hpp"
#include "jit/tune_record.hpp"
#include "ops/registry.hpp"
#include "shapejit/core.hpp"
#include "shapejit/rearrange.hpp"
#include "test_support.hpp"

using namespace shapejit;
using namespace shapejit::jit;
using test::TempDir;

namespace {

TuneRecord sample_record(int i) {
  return {"rearrange", "rearrange --elem-bytes 1 --shape 13894," + std::to_string(1000 + i) + " --tune",
          "NVIDIA Test GPU", std::string(version()), "words.u1.t256.d2.i32.b.a124.b64.p33.mb3.sl.ss tiles/block 1",
          10.5 + i, 12.25, 4};
}

bool usable(const DecodedTuneRecord& d) { return d.status == EntryStatus::ok && d.problem.empty(); }

// Sets an environment variable for one scope.
struct ScopedEnv {
  std::string name;
  ScopedEnv(const char* n, const std::string& value) : name(n) { ::setenv(n, value.c_str(), 1); }
  ~ScopedEnv() { ::unsetenv(name.c_str()); }
};

void write_bytes(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                              static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

TEST_CASE("a tuning record round-trips with its key") {
  const TuneRecord r = sample_record(1);
  const auto bytes = encode_tune_record(r);
  const CacheKey key = tune_record_key(r.op, r.shape_class, r.device);
  const DecodedTuneRecord d = decode_tune_record(bytes, &key);
  REQUIRE(usable(d));
  CHECK(d.record == r);
  const CacheKey other = tune_record_key(r.op, r.shape_class, "another GPU");
  CHECK(decode_tune_record(bytes, &other).status == EntryStatus::key_mismatch);
}

TEST_CASE("every truncation, single bit flip and extra byte of a tuning record is rejected") {
  const auto bytes = encode_tune_record(sample_record(2));
  for (std::size_t n = 0; n < bytes.size(); ++n) REQUIRE_FALSE(usable(decode_tune_record(std::span(bytes.data(), n))));
  for (std::size_t i = 0; i < bytes.size(); ++i)
    for (int bit = 0; bit < 8; bit += 3) {
      auto flipped = bytes;
      flipped[i] ^= static_cast<std::uint8_t>(1 << bit);
      REQUIRE_FALSE(usable(decode_tune_record(flipped)));
    }
  auto longer = bytes;
  longer.push_back('\n');
  CHECK(decode_tune_record(longer).status == EntryStatus::oversized);
}

TEST_CASE("a record of another format or library version, or whose fields do not match its key, is not used") {
  auto bytes = encode_tune_record(sample_record(3));
  bytes[8] = 2;  // format version field
  CHECK(decode_tune_record(bytes).status == EntryStatus::foreign_format);

  TuneRecord old = sample_record(3);
  old.version = "0.0.1";
  const DecodedTuneRecord d = decode_tune_record(encode_tune_record(old));
  CHECK(d.status == EntryStatus::ok);
  CHECK(d.problem.find("measured by shapejit 0.0.1") != std::string::npos);

  // A valid record copied under another record's name: its key echo says so.
  const TuneRecord r = sample_record(4);
  const CacheKey elsewhere = tune_record_key(r.op, r.shape_class + " --exact", r.device);
  CHECK(decode_tune_record(encode_tune_record(r), &elsewhere).status == EntryStatus::key_mismatch);
  CHECK(decode_tune_record(std::vector<std::uint8_t>{'S', 'J', 'C', 'U', 'B', 'I', 'N', 0, 1, 0, 0, 0, 80, 0, 0, 0})
            .status == EntryStatus::bad_magic);
}

TEST_CASE("records are found in deployment caches first; damaged ones are skipped with a warning") {
  TempDir deploy, user;
  const ScopedEnv path("SHAPEJIT_CACHE_PATH", deploy.path.string());
  const ScopedEnv dir("SHAPEJIT_CACHE_DIR", user.path.string());
  TuneRecord r = sample_record(5);
  CHECK_FALSE(find_tune_record(r.op, r.shape_class, r.device).has_value());

  CHECK(store_tune_record(user.path, r).empty());
  auto found = find_tune_record(r.op, r.shape_class, r.device);
  REQUIRE(found.has_value());
  CHECK(*found == r);

  TuneRecord shipped = r;
  shipped.choice = "transpose.u1.t256.d2.i32.b.a1x64v2.b1x64v1.p66.mb3 tiles/block 2";
  CHECK(store_tune_record(deploy.path, shipped).empty());
  found = find_tune_record(r.op, r.shape_class, r.device);
  REQUIRE(found.has_value());
  CHECK(found->choice == shipped.choice);

  // A bit flipped in the shipped record: it is ignored and the user cache's record is used.
  const auto shipped_path = tune_record_path(deploy.path, tune_record_key(r.op, r.shape_class, r.device));
  auto bytes = encode_tune_record(shipped);
  bytes[bytes.size() - 3] ^= 1;
  write_bytes(shipped_path, bytes);
  found = find_tune_record(r.op, r.shape_class, r.device);
  REQUIRE(found.has_value());
  CHECK(found->choice == r.choice);

  // Truncated in both places: no record.
  write_bytes(shipped_path, std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + 20));
  write_bytes(tune_record_path(user.path, tune_record_key(r.op, r.shape_class, r.device)),
              std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + 50));
  CHECK_FALSE(find_tune_record(r.op, r.shape_class, r.device).has_value());
}

TEST_CASE("processes writing the same tuning records at once leave only whole records") {
  TempDir tmp;
  test::run_in_processes(3, [&](int p) {
    for (int round = 0; round < 30; ++round)
      for (int i = 0; i < 10; ++i) {
        TuneRecord r = sample_record(i);
        r.choice_us = p + round;  // every writer writes different bytes under one key
        if (!store_tune_record(tmp.path, r).empty()) return 4;
        const auto path = tune_record_path(tmp.path, tune_record_key(r.op, r.shape_class, r.device));
        std::ifstream in(path, std::ios::binary);
        const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (!usable(decode_tune_record(bytes))) return 5;
      }
    return 0;
  });
  int files = 0;
  for (const auto& f : std::filesystem::recursive_directory_iterator(tmp.path)) {
    if (!f.is_regular_file()) continue;
    ++files;
    CHECK(f.path().extension() == ".sjt");  // no temp files left
  }
  CHECK(files == 10);
}

TEST_CASE("tune with nothing to measure on keeps the planned variant and says why; the line carries --tune") {
  // Without a GPU the driver is missing; with one, offline mode and an empty cache forbid measuring.
  TempDir user;
  const ScopedEnv dir("SHAPEJIT_CACHE_DIR", user.path.string());
  set_offline(true);
  const TensorDesc src = permuted({{300, 500}, {}, DType::u8}, {1, 0});
  const TensorDesc dst{src.shape, {}, DType::u8};
  RearrangeOptions options;
  options.tune = true;
  const RearrangePlan tuned = plan_rearrange(dst, src, options);
  set_offline(false);
  const RearrangePlan plain = plan_rearrange(dst, src);
  CHECK(tuned.describe().find("tuning: not measured") != std::string::npos);
  CHECK(tuned.manifest_line() == plain.manifest_line() + " --tune");
  CHECK(tuned.json().find("\"tuning\": \"not measured") != std::string::npos);
  // The same variant as without tune: describe differs only by the tuning line.
  const std::string text = tuned.describe();
  const std::size_t line = text.find("tuning: ");
  CHECK(text.substr(0, line) + text.substr(text.find('\n', line) + 1) == plain.describe());
}

TEST_CASE("shapejit plan --tune lists the candidates a tuned line may launch") {
  const test::CommandResult r = test::run_command(test::built_path("../src/cli/shapejit") +
                                                  " plan rearrange --dtype u8 --shape 1029,1021 --perm 1,0 --tune");
  CHECK(r.status == 0);
  CHECK(r.output.find("tuning candidates (") != std::string::npos);
  CHECK(r.output.find("tiles/block 1") != std::string::npos);
}

TEST_CASE("shapejit tune without a GPU says it needs one" * doctest::skip(jit::driver_available())) {
  TempDir tmp;
  const std::string manifest = (tmp.path / "m.manifest").string();
  std::ofstream(manifest) << "rearrange --dtype u8 --shape 1029,1021 --perm 1,0 --tune\n";
  const test::CommandResult r = test::run_command(test::built_path("../src/cli/shapejit") + " tune --manifest " +
                                                  manifest + " --out " + (tmp.path / "out").string());
  CHECK(r.status == 1);
  CHECK(r.output.find("needs a GPU") != std::string::npos);
}

TEST_CASE("a tuned manifest line carries every candidate's program, so precompile builds them all") {
  const ops::PlannedLine plain = ops::plan_manifest_line("rearrange --dtype u8 --shape 1029,1021 --perm 1,0");
  const ops::PlannedLine tuned = ops::plan_manifest_line("rearrange --dtype u8 --shape 1029,1021 --perm 1,0 --tune");
  REQUIRE(plain.programs.size() == 1);
  CHECK(tuned.programs.size() >= 3);
  bool has_planned = false;
  for (const jit::Program& p : tuned.programs) {
    has_planned = has_planned || p.source == plain.programs[0].source;
    CHECK(p.manifest_line.find(" --tune") != std::string::npos);
  }
  CHECK(has_planned);
}
