#include "jit/kernel_cache.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>

#include "core/env.hpp"
#include "core/errors.hpp"
#include "jit/counters.hpp"
#include "jit/disk_cache.hpp"
#include "jit/driver.hpp"
#include "jit/nvrtc.hpp"

namespace shapejit::jit {
namespace {

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// Loads a cubin into a context-independent library; nullptr when the driver refuses it.
CUkernel load_cubin(std::span<const std::uint8_t> cubin, std::string& problem) {
  const Driver& d = driver();
  const auto start = std::chrono::steady_clock::now();
  CUlibrary library = nullptr;
  CUkernel kernel = nullptr;
  CUresult r = d.cuLibraryLoadData(&library, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
  if (r == CUDA_SUCCESS) {
    r = d.cuLibraryGetKernel(&kernel, library, kKernelName);
    if (r != CUDA_SUCCESS) d.cuLibraryUnload(library);
  }
  record_load(ms_since(start));
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    d.cuGetErrorName(r, &name);
    problem = fmt::format("the driver refused the cubin ({})", name ? name : "?");
    return nullptr;
  }
  return kernel;  // the library stays loaded for the life of the process
}

void warn_bad_entry(const std::string& what) {
  record_bad_entry();
  log(LogLevel::warn, "cache entry unusable, treated as a miss: {}", what);
}

// Deployment caches are read-only: a bad entry is skipped, never repaired.
CUkernel from_deployment_caches(const CacheKey& key) {
  for (const auto& root : deployment_cache_roots()) {
    const CacheDir dir(root);
    CacheDir::Lookup hit = dir.read(key);
    if (!hit.present) continue;
    if (hit.status != EntryStatus::ok) {
      warn_bad_entry(hit.problem.empty() ? dir.entry_path(key).string() : hit.problem);
      continue;
    }
    std::string problem;
    if (CUkernel k = load_cubin(hit.entry.payload, problem)) return k;
    warn_bad_entry(fmt::format("{}: {}", dir.entry_path(key).string(), problem));
  }
  return nullptr;
}

void warn_unwritable_once(const std::string& why) {
  static std::once_flag once;
  std::call_once(once, [&] {
    log(LogLevel::warn, "the user cache cannot be written ({}); kernels stay in memory only", why);
  });
}

CUkernel from_user_cache(const CacheDir& dir, const CacheKey& key) {
  CacheDir::Lookup hit = dir.read(key);
  if (!hit.present) return nullptr;
  std::string problem = hit.problem;
  if (hit.status == EntryStatus::ok) {
    // Entries from another NVRTC are replaced once this process has an NVRTC to compile with;
    // NVRTC is never loaded just to check (it costs milliseconds).
    if (nvrtc_loaded() && !offline() && hit.entry.info.nvrtc_version != nvrtc().version) return nullptr;
    if (CUkernel k = load_cubin(hit.entry.payload, problem)) {
      dir.touch(key);
      return k;
    }
    problem = fmt::format("{}: {}", dir.entry_path(key).string(), problem);
  }
  warn_bad_entry(problem);
  dir.remove(key);
  return nullptr;
}

CUkernel compile_and_store(const Program& program, const std::string& arch, const CacheKey& key,
                           const std::optional<CacheDir>& user_dir) {
  if (offline())
    fail(ErrorCode::offline_miss,
         "offline mode: kernel {} for {} is in no cache (key {}); add this line to your manifest and "
         "precompile it:\n{}",
         program.label, arch, key.hex(), program.manifest_line);
  const std::vector<std::uint8_t> cubin = compile_program(program, arch);
  std::string problem;
  CUkernel kernel = load_cubin(cubin, problem);
  if (kernel == nullptr) fail(ErrorCode::driver_error, "{} for {}: {}", program.label, arch, problem);
  if (user_dir) {
    const auto entry = encode_entry({key, arch, nvrtc().version}, cubin);
    if (std::string why = user_dir->write(key, entry); !why.empty()) {
      warn_unwritable_once(why);
    } else {
      user_dir->prune(cache_max_bytes());
    }
  }
  return kernel;
}

CUkernel load_or_compile(const Program& program, const std::string& arch, const CacheKey& key) {
  if (CUkernel k = from_deployment_caches(key)) {
    record_disk_hit();
    return k;
  }
  std::optional<CacheDir> user_dir;
  if (auto root = user_cache_root()) user_dir.emplace(*root);
  if (user_dir) {
    if (CUkernel k = from_user_cache(*user_dir, key)) {
      record_disk_hit();
      return k;
    }
  } else {
    warn_unwritable_once("no cache directory: set SHAPEJIT_CACHE_DIR or HOME");
  }
  return compile_and_store(program, arch, key, user_dir);
}

struct KeyLess {
  bool operator()(const CacheKey& a, const CacheKey& b) const { return a.bytes < b.bytes; }
};

}  // namespace

CUkernel obtain_kernel(const Program& program, const std::string& arch) {
  static std::mutex mutex;
  static std::map<CacheKey, std::shared_future<CUkernel>, KeyLess> loaded;
  const CacheKey key = kernel_key(program, arch);
  std::promise<CUkernel> promise;
  std::shared_future<CUkernel> result;
  bool producer = false;
  {
    std::lock_guard lock(mutex);
    auto [it, inserted] = loaded.try_emplace(key);
    if (inserted) {
      it->second = promise.get_future().share();
      producer = true;
    }
    result = it->second;
  }
  if (!producer) {
    record_memory_hit();
    return result.get();  // waits for the producer; rethrows its error
  }
  try {
    promise.set_value(load_or_compile(program, arch, key));
  } catch (...) {
    promise.set_exception(std::current_exception());
    std::lock_guard lock(mutex);
    loaded.erase(key);  // a later call tries again
  }
  return result.get();
}

std::vector<std::uint8_t> compile_entry(const Program& program, const std::string& arch) {
  const std::vector<std::uint8_t> cubin = compile_program(program, arch);
  return encode_entry({kernel_key(program, arch), arch, nvrtc().version}, cubin);
}

std::vector<std::uint8_t> compile_program(const Program& program, const std::string& arch) {
  if (program.low_register_options.empty())
    return compile_to_cubin(program.source, arch, program.options, program.label);
  int spilled = 0;
  std::vector<std::uint8_t> cubin = compile_to_cubin(program.source, arch, program.options, program.label, &spilled);
  if (spilled == 0) return cubin;
  std::vector<std::string> options = program.options;
  options.insert(options.end(), program.low_register_options.begin(), program.low_register_options.end());
  int spilled_low = 0;
  std::vector<std::uint8_t> low;
  try {
    low = compile_to_cubin(program.source, arch, options, program.label, &spilled_low);
  } catch (const Error& e) {
    log(LogLevel::warn, "{} for {}: its low-register variant did not compile, keeping the first cubin: {}",
        program.label, arch, e.what());
    return cubin;
  }
  log(LogLevel::info, "{} for {} ({}): ptxas spilled {} bytes of registers; {} bytes with {}{}", program.label, arch,
      program.manifest_line, spilled, spilled_low, fmt::join(program.low_register_options, " "),
      spilled_low < spilled ? " (kept)" : "");
  return spilled_low < spilled ? low : cubin;
}

std::string nvrtc_version() { return nvrtc().version; }

}  // namespace shapejit::jit
