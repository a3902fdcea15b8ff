#include "jit/nvrtc.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>

#include "core/env.hpp"
#include "core/errors.hpp"
#include "jit/counters.hpp"

namespace shapejit::jit {
namespace {

std::atomic<bool> g_loaded{false};

std::vector<std::string> candidate_paths() {
  if (auto explicit_path = env_string("SHAPEJIT_NVRTC")) return {*explicit_path};
  std::vector<std::string> paths = {"libnvrtc.so.13", "libnvrtc.so.12"};
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (auto home = env_string(var)) paths.push_back(*home + "/lib64/libnvrtc.so");
  paths.push_back("/usr/local/cuda/lib64/libnvrtc.so");
  return paths;
}

struct NvrtcState {
  Nvrtc api;
  std::string error;
};

NvrtcState load_nvrtc() {
  NvrtcState state;
  std::string tried;
  void* handle = nullptr;
  for (const std::string& path : candidate_paths()) {
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      state.api.path = path;
      break;
    }
    tried += fmt::format("\n  {}: {}", path, dlerror());
  }
  if (handle == nullptr) {
    state.error = fmt::format("NVRTC could not be loaded (set SHAPEJIT_NVRTC to libnvrtc.so); tried:{}", tried);
    return state;
  }
  Nvrtc& n = state.api;
#define SHAPEJIT_LOAD(name)                                                        \
  n.name = reinterpret_cast<decltype(n.name)>(dlsym(handle, #name));               \
  if (n.name == nullptr) {                                                         \
    state.error = fmt::format("{} lacks " #name ": not a usable NVRTC", n.path);   \
    return state;                                                                  \
  }
  SHAPEJIT_LOAD(nvrtcVersion)
  SHAPEJIT_LOAD(nvrtcGetErrorString)
  SHAPEJIT_LOAD(nvrtcCreateProgram)
  SHAPEJIT_LOAD(nvrtcDestroyProgram)
  SHAPEJIT_LOAD(nvrtcCompileProgram)
  SHAPEJIT_LOAD(nvrtcGetProgramLogSize)
  SHAPEJIT_LOAD(nvrtcGetProgramLog)
  SHAPEJIT_LOAD(nvrtcGetCUBINSize)
  SHAPEJIT_LOAD(nvrtcGetCUBIN)
#undef SHAPEJIT_LOAD
  int major = 0, minor = 0;
  n.nvrtcVersion(&major, &minor);
  n.version = fmt::format("{}.{}", major, minor);
  g_loaded = true;
  return state;
}

std::string program_log(const Nvrtc& n, nvrtcProgram program) {
  std::size_t size = 0;
  n.nvrtcGetProgramLogSize(program, &size);
  std::string log(size, '\0');
  if (size > 0) n.nvrtcGetProgramLog(program, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

std::string save_failing_source(const std::string& source, const std::string& label) {
  std::error_code ec;
  const auto dir = std::filesystem::temp_directory_path(ec);
  if (ec) return "(could not be saved: no temporary directory)";
  static std::atomic<int> serial{0};
  const auto path = dir / fmt::format("shapejit-failed-{}-{}-{}.cu", label, ::getpid(), serial++);
  std::ofstream out(path);
  out << source;
  return out ? path.string() : "(could not be saved)";
}

}  // namespace

const Nvrtc& nvrtc() {
  static const NvrtcState state = load_nvrtc();
  if (!state.error.empty()) throw Error(ErrorCode::nvrtc_unavailable, state.error);
  return state.api;
}

bool nvrtc_loaded() noexcept { return g_loaded.load(); }

namespace {

struct Compiled {
  std::vector<unsigned char> cubin;
  std::string log;
};

Compiled compile_once(const Nvrtc& n, const std::string& source, const std::string& arch,
                      const std::vector<std::string>& options, const std::string& label) {
  const auto start = std::chrono::steady_clock::now();
  nvrtcProgram program = nullptr;
  if (nvrtcResult r = n.nvrtcCreateProgram(&program, source.c_str(), (label + ".cu").c_str(), 0,
                                           nullptr, nullptr);
      r != NVRTC_SUCCESS)
    fail(ErrorCode::compile_failed, "nvrtcCreateProgram({}): {}", label, n.nvrtcGetErrorString(r));
  std::vector<std::string> all_options = {"--gpu-architecture=" + arch, "--std=c++17"};
  all_options.insert(all_options.end(), options.begin(), options.end());
  std::vector<const char*> argv;
  for (const std::string& o : all_options) argv.push_back(o.c_str());
  const nvrtcResult result = n.nvrtcCompileProgram(program, static_cast<int>(argv.size()), argv.data());
  Compiled compiled{{}, program_log(n, program)};
  if (result != NVRTC_SUCCESS) {
    n.nvrtcDestroyProgram(&program);
    fail(ErrorCode::compile_failed, "NVRTC could not compile {} for {} (options: {}): {}\nsource saved to {}\n{}",
         label, arch, fmt::join(all_options, " "), n.nvrtcGetErrorString(result), save_failing_source(source, label),
         compiled.log);
  }
  std::size_t size = 0;
  n.nvrtcGetCUBINSize(program, &size);
  compiled.cubin.resize(size);
  n.nvrtcGetCUBIN(program, reinterpret_cast<char*>(compiled.cubin.data()));
  n.nvrtcDestroyProgram(&program);
  record_compile(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  return compiled;
}

}  // namespace

std::vector<unsigned char> compile_to_cubin(const std::string& source, const std::string& arch,
                                            const std::vector<std::string>& options,
                                            const std::string& label, int* spill_store_bytes) {
  const Nvrtc& n = nvrtc();
  if (!spill_store_bytes) return compile_once(n, source, arch, options, label).cubin;
  std::vector<std::string> reporting = options;
  reporting.push_back("--ptxas-options=--verbose");
  Compiled compiled = compile_once(n, source, arch, reporting, label);
  std::optional<int> spilled = spill_store_bytes_in_log(compiled.log);
  if (!spilled) {
    // NVRTC 12.9+ serves a program it compiled before from the driver's compute cache without
    // running ptxas, so the log has no report; compile past that cache (same machine code).
    reporting.push_back("--no-cache");
    try {
      compiled = compile_once(n, source, arch, reporting, label);
      spilled = spill_store_bytes_in_log(compiled.log);
    } catch (const Error& e) {
      log(LogLevel::warn, "{} for {}: compiling past NVRTC's cache failed: {}", label, arch, e.what());
    }
    if (!spilled) log(LogLevel::warn, "{} for {}: no ptxas report of register spills; read as none", label, arch);
  }
  *spill_store_bytes = spilled.value_or(0);
  return compiled.cubin;
}

std::optional<int> spill_store_bytes_in_log(const std::string& log) {
  // ptxas writes "<N> bytes spill stores, <M> bytes spill loads" per function.
  static constexpr std::string_view kMarker = " bytes spill stores";
  std::optional<int> total;
  for (std::size_t at = log.find(kMarker); at != std::string::npos; at = log.find(kMarker, at + 1)) {
    std::size_t begin = at;
    while (begin > 0 && log[begin - 1] >= '0' && log[begin - 1] <= '9') --begin;
    if (begin < at) total = total.value_or(0) + std::stoi(log.substr(begin, at - begin));
  }
  return total;
}

}  // namespace shapejit::jit
