#include "ops/rearrange/tune.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "core/env.hpp"
#include "core/errors.hpp"
#include "jit/disk_cache.hpp"
#include "jit/driver.hpp"
#include "jit/kernel_registry.hpp"
#include "jit/launch.hpp"
#include "jit/measure.hpp"
#include "jit/tune_record.hpp"
#include "ops/rearrange/codegen.hpp"

namespace shapejit::plan {
namespace {

constexpr const char* kOp = "rearrange";
// NVRTC workers of one measured plan. On a 16-core host, 16 of them took each compile from 154 to 514
// ms (while the whole tune still ran 2.4 times faster); hosts with many more threads are capped here
// so that dozens of compilers, each holding hundreds of MB, do not run at once. (8 workers were timed
// once, as fast as 16; not on a larger host.)
constexpr unsigned kMaxCompileWorkers = 8;

// A view's scratch memory: its byte range around a 16-byte aligned base pointer.
class ScratchView {
 public:
  explicit ScratchView(ByteRange range)
      : buffer_(static_cast<std::size_t>(range.hi - range.lo) + 16),
        base_(static_cast<CUdeviceptr>((buffer_.address() - range.lo + 15) / 16 * 16)) {}
  CUdeviceptr base() const { return base_; }

 private:
  jit::DeviceBuffer buffer_;
  CUdeviceptr base_;
};

const jit::KernelHandle& candidate_kernel(const RearrangeVariant& v, const std::string& manifest) {
  return jit::registered_kernel(rearrange_key(v.spec, v.args), [&] { return codegen::rearrange_program(v, manifest); });
}

double time_variant(const RearrangePlanData& p, const RearrangeVariant& v, const jit::KernelHandle& kernel,
                    const ScratchView& dst, const ScratchView& src) {
  void* d = reinterpret_cast<char*>(dst.base()) + p.elements.dst_offset * p.elem_bytes;
  const void* s = reinterpret_cast<const char*>(src.base()) + p.elements.src_offset * p.elem_bytes;
  RearrangeKernelArgs args = v.args;
  void* params[] = {&d, &s, &args};
  const jit::LaunchDims dims = launch_dims(v);
  return jit::median_launch_us([&](CUstream stream) { kernel.launch(dims, stream, params); });
}

// Choices made in this process, by record key: a record that could not be written is not
// measured again.
std::mutex g_memo_mutex;
std::map<std::string, jit::TuneRecord> g_memo;

std::optional<jit::TuneRecord> remembered(const std::string& key) {
  const std::lock_guard lock(g_memo_mutex);
  const auto it = g_memo.find(key);
  if (it == g_memo.end()) return std::nullopt;
  return it->second;
}

void remember(const std::string& key, const jit::TuneRecord& record) {
  const std::lock_guard lock(g_memo_mutex);
  g_memo[key] = record;
}

// The candidate named `choice`, or none.
const RearrangeVariant* find_candidate(const std::vector<RearrangeVariant>& candidates, const std::string& choice) {
  for (const RearrangeVariant& c : candidates)
    if (candidate_name(c) == choice) return &c;
  return nullptr;
}

std::string record_text(const jit::TuneRecord& r) {
  return fmt::format("{} on {}, {:.2f} us per launch ({:.2f} us planned, {} candidates)", r.choice, r.device,
                     r.choice_us, r.default_us, r.candidates);
}

jit::TuneRecord measure(const RearrangePlanData& p, const std::vector<RearrangeVariant>& candidates,
                        const std::string& manifest, const std::string& device) {
  // Candidates that differ only in their grid share a kernel: each is compiled once, all side by side.
  std::vector<const jit::KernelHandle*> kernels, distinct;
  for (const RearrangeVariant& c : candidates) {
    kernels.push_back(&candidate_kernel(c, manifest));
    if (std::find(distinct.begin(), distinct.end(), kernels.back()) == distinct.end()) distinct.push_back(kernels.back());
  }
  jit::prepare_kernels(distinct, std::clamp(std::thread::hardware_concurrency(), 1u, kMaxCompileWorkers));
  const ScratchView dst(p.dst_range), src(p.src_range);
  jit::TuneRecord r{kOp, manifest, device, std::string(version()), "", 0, 0, static_cast<int>(candidates.size())};
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const double us = time_variant(p, candidates[i], *kernels[i], dst, src);
    log(LogLevel::info, "shapejit: tune {}: {} {:.2f} us", manifest, candidate_name(candidates[i]), us);
    if (i == 0) r.default_us = us;
    if (i == 0 || us < r.choice_us) {
      r.choice_us = us;
      r.choice = candidate_name(candidates[i]);
    }
  }
  return r;
}

}  // namespace

void tune_plan(RearrangePlanData& p, const TuneRequest& request) {
  const std::string manifest = manifest_line(p);
  const std::vector<RearrangeVariant> candidates = tuning_candidates(p);
  if (manifest.empty() || candidates.size() < 2) {
    p.tuning = "nothing to choose: one candidate";
    return;
  }
  if (!jit::driver_available()) {
    p.tuning = fmt::format("not measured: {}; the planned variant is kept", jit::driver_unavailable_reason());
    return;
  }
  const std::string device = jit::current_device_name();
  const std::string key = jit::tune_record_key(kOp, manifest, device).hex();
  std::optional<jit::TuneRecord> record;
  if (request.reuse_records) {
    record = remembered(key);
    if (!record) record = jit::find_tune_record(kOp, manifest, device);
  }
  if (record) {
    if (const RearrangeVariant* chosen = find_candidate(candidates, record->choice)) {
      choose_variant(p, *chosen);
      p.tuning = "from a record: " + record_text(*record);
      remember(key, *record);
      return;
    }
    log(LogLevel::warn, "shapejit: ignoring the tuning record of '{}': its choice '{}' is not a candidate of this plan",
        manifest, record->choice);
  }
  if (offline()) {
    p.tuning = "not measured: offline and no tuning record; the planned variant is kept";
    return;
  }
  jit::TuneRecord measured;
  try {
    measured = measure(p, candidates, manifest, device);
  } catch (const Error& e) {
    p.tuning = fmt::format("not measured: {}; the planned variant is kept", e.what());
    log(LogLevel::warn, "shapejit: tuning '{}' failed: {}", manifest, e.what());
    return;
  }
  choose_variant(p, *find_candidate(candidates, measured.choice));
  p.tuning = "measured: " + record_text(measured);
  remember(key, measured);
  const std::optional<std::filesystem::path> root = request.record_root ? request.record_root : jit::user_cache_root();
  if (!root) return;
  if (const std::string problem = jit::store_tune_record(*root, measured); !problem.empty())
    log(LogLevel::warn, "shapejit: the tuning record of '{}' is kept in memory only: {}", manifest, problem);
}

}  // namespace shapejit::plan
