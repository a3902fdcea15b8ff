#include "jit/tune_record.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstring>
#include <map>

#include "core/env.hpp"
#include "jit/byte_order.hpp"
#include "jit/disk_cache.hpp"
#include "shapejit/core.hpp"

namespace shapejit::jit {
namespace {

constexpr char kMagic[8] = {'S', 'J', 'T', 'U', 'N', 'E', '\0', '\0'};
constexpr std::size_t kChecksumOffset = 32;

std::uint64_t checksum(std::span<const std::uint8_t> header, std::span<const std::uint8_t> payload) {
  return header_payload_checksum(header.first(kChecksumOffset), payload);
}

std::string payload_text(const TuneRecord& r) {
  return fmt::format("op={}\nclass={}\ndevice={}\nversion={}\nchoice={}\nchoice_us={}\ndefault_us={}\ncandidates={}\n",
                     r.op, r.shape_class, r.device, r.version, r.choice, r.choice_us, r.default_us, r.candidates);
}

// "name=value" lines into a map; "" when every line parses, else why not.
std::string parse_lines(std::string_view text, std::map<std::string, std::string>& fields) {
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    if (end == std::string_view::npos) return "the last line is unterminated";
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(end + 1);
    const std::size_t eq = line.find('=');
    if (eq == std::string_view::npos) return fmt::format("line '{}' is not name=value", line);
    fields[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
  }
  return "";
}

bool parse_number(const std::string& text, double& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size() && out >= 0;
}

// The record's fields from its payload; "" when they all parse, else why not.
std::string parse_record(std::string_view text, TuneRecord& r) {
  std::map<std::string, std::string> fields;
  if (std::string problem = parse_lines(text, fields); !problem.empty()) return problem;
  for (const char* name : {"op", "class", "device", "version", "choice", "choice_us", "default_us", "candidates"})
    if (!fields.count(name)) return fmt::format("no '{}' field", name);
  r.op = fields["op"];
  r.shape_class = fields["class"];
  r.device = fields["device"];
  r.version = fields["version"];
  r.choice = fields["choice"];
  double candidates = 0;
  if (!parse_number(fields["choice_us"], r.choice_us) || !parse_number(fields["default_us"], r.default_us) ||
      !parse_number(fields["candidates"], candidates))
    return "a time or count is not a number";
  r.candidates = static_cast<int>(candidates);
  return "";
}

std::filesystem::path tune_dir(const std::filesystem::path& root) {
  return root / fmt::format("tune-v{}", kTuneFormat);
}

}  // namespace

CacheKey tune_record_key(const std::string& op, const std::string& shape_class, const std::string& device) {
  return hash_fields({"shapejit-tune-record", version(), op, shape_class, device});
}

std::vector<std::uint8_t> encode_tune_record(const TuneRecord& record) {
  const std::string payload = payload_text(record);
  std::vector<std::uint8_t> out(kTuneHeaderBytes + payload.size());
  std::uint8_t* h = out.data();
  std::memcpy(h, kMagic, sizeof kMagic);
  put_u32(h + 8, kTuneFormat);
  put_u32(h + 12, static_cast<std::uint32_t>(payload.size()));
  const CacheKey key = tune_record_key(record.op, record.shape_class, record.device);
  std::memcpy(h + 16, key.bytes.data(), key.bytes.size());
  std::memcpy(out.data() + kTuneHeaderBytes, payload.data(), payload.size());
  put_u64(h + kChecksumOffset, checksum(out, std::span(out).subspan(kTuneHeaderBytes)));
  return out;
}

DecodedTuneRecord decode_tune_record(std::span<const std::uint8_t> bytes, const CacheKey* expected) {
  DecodedTuneRecord d;
  if (bytes.size() >= sizeof kMagic && std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    d.status = EntryStatus::bad_magic;
    return d;
  }
  if (bytes.size() < 16) return d;  // truncated
  const std::uint8_t* h = bytes.data();
  if (get_u32(h + 8) != kTuneFormat) {
    d.status = EntryStatus::foreign_format;
    return d;
  }
  if (bytes.size() < kTuneHeaderBytes) return d;
  const std::uint64_t payload_size = get_u32(h + 12);
  const std::uint64_t available = bytes.size() - kTuneHeaderBytes;
  if (payload_size > available) return d;
  if (payload_size < available || payload_size > kMaxTunePayload) {
    d.status = EntryStatus::oversized;
    return d;
  }
  const auto payload = bytes.subspan(kTuneHeaderBytes);
  if (checksum(bytes, payload) != get_u64(h + kChecksumOffset)) {
    d.status = EntryStatus::checksum_mismatch;
    return d;
  }
  CacheKey key;
  std::memcpy(key.bytes.data(), h + 16, key.bytes.size());
  if (expected != nullptr && !(*expected == key)) {
    d.status = EntryStatus::key_mismatch;
    return d;
  }
  d.status = EntryStatus::ok;
  d.problem = parse_record({reinterpret_cast<const char*>(payload.data()), payload.size()}, d.record);
  if (d.problem.empty() && d.record.version != version())
    d.problem = fmt::format("measured by shapejit {}, not {}", d.record.version, version());
  if (d.problem.empty() && !(tune_record_key(d.record.op, d.record.shape_class, d.record.device) == key))
    d.problem = "its fields do not match its key";
  return d;
}

std::filesystem::path tune_record_path(const std::filesystem::path& root, const CacheKey& key) {
  return tune_dir(root) / (key.hex() + ".sjt");
}

std::optional<TuneRecord> find_tune_record(const std::string& op, const std::string& shape_class,
                                           const std::string& device) {
  const CacheKey key = tune_record_key(op, shape_class, device);
  std::vector<std::filesystem::path> roots = deployment_cache_roots();
  if (auto user = user_cache_root()) roots.push_back(*user);
  for (const std::filesystem::path& root : roots) {
    const std::filesystem::path path = tune_record_path(root, key);
    std::error_code ec;
    if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec))) continue;
    std::vector<std::uint8_t> bytes;
    std::string problem;
    if (read_whole_file(path, bytes, problem)) {
      const DecodedTuneRecord d = decode_tune_record(bytes, &key);
      problem = d.status != EntryStatus::ok ? entry_status_text(d.status) : d.problem;
      if (problem.empty()) return d.record;
    }
    log(LogLevel::warn, "shapejit: ignoring tuning record {}: {}", path.string(), problem);
  }
  return std::nullopt;
}

std::string store_tune_record(const std::filesystem::path& root, const TuneRecord& record) {
  const std::vector<std::uint8_t> bytes = encode_tune_record(record);
  return write_file_atomically(tune_record_path(root, tune_record_key(record.op, record.shape_class, record.device)),
                               bytes);
}

}  // namespace shapejit::jit
