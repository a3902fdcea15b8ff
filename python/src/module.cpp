// shapejit._shapejit: the nanobind extension over the C++ API.
//
// It speaks in plain values: tensor descriptors are tuples (shape, strides or None, dtype code,
// element bytes), pointers and streams are integers. The pure-Python layer (shapejit/_views.py,
// _ops.py) turns tensors into these. Every shapejit::Error becomes the Python error class
// registered for its status (shapejit/_errors.py) with the library's message.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dlpack.hpp"
#include "launch.hpp"
#include "torch_tensors.hpp"
#include "jit/disk_cache.hpp"
#include "jit/driver.hpp"
#include "jit/nvrtc.hpp"
#include "shapejit/shapejit.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using shapejit::DType;
using shapejit::ErrorCode;
using shapejit::TensorDesc;

// ---------------------------------------------------------------------------------------------
// Errors

/// Python error classes by status code, registered by shapejit/_errors.py at import.
std::array<nb::object, 10>& error_classes() {
  static std::array<nb::object, 10> classes;
  return classes;
}

void register_errors(const std::vector<nb::object>& classes) {
  if (classes.size() != error_classes().size()) throw nb::value_error("one error class per status");
  for (std::size_t i = 0; i < classes.size(); ++i) error_classes()[i] = classes[i];
}

/// Raises the registered class for `code` as cls(message, status).
void raise_shapejit_error(ErrorCode code, const char* message) {
  const auto index = static_cast<std::size_t>(code);
  nb::object cls = index < error_classes().size() ? error_classes()[index] : nb::object();
  if (!cls.is_valid()) {
    PyErr_SetString(PyExc_RuntimeError, message);
    return;
  }
  nb::object args = nb::make_tuple(nb::str(message), static_cast<int>(code));
  PyErr_SetObject(cls.ptr(), args.ptr());
}

void translate_error(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const shapejit::Error& e) {
    raise_shapejit_error(e.code(), e.what());
  }
}

// ---------------------------------------------------------------------------------------------
// Descriptors

/// A descriptor as Python passes it: (shape, strides or None, dtype code, element bytes or 0).
using DescTuple = std::tuple<std::vector<std::int64_t>, std::optional<std::vector<std::int64_t>>, int, int>;

DType dtype_from_code(int code) {
  if (code < 0 || code > static_cast<int>(DType::f64))
    throw shapejit::Error(ErrorCode::invalid_argument, "dtype code " + std::to_string(code) + " is not a shapejit dtype");
  return static_cast<DType>(code);
}

TensorDesc to_desc(const DescTuple& t) {
  TensorDesc d;
  d.shape = std::get<0>(t);
  if (std::get<1>(t)) d.strides = *std::get<1>(t);
  d.dtype = dtype_from_code(std::get<2>(t));
  d.elem_bytes = std::get<3>(t);
  return d;
}

std::optional<TensorDesc> to_desc(const std::optional<DescTuple>& t) {
  if (!t) return std::nullopt;
  return to_desc(*t);
}

using shapejit::python::as_ptr;

// ---------------------------------------------------------------------------------------------
// Plans

shapejit::RearrangePlan plan_rearrange(const DescTuple& dst, const DescTuple& src, bool exact,
                                       std::size_t assumed_alignment, bool check_pointers) {
  shapejit::RearrangeOptions options;
  options.exact = exact;
  options.assumed_alignment = assumed_alignment;
  options.check_pointers = check_pointers;
  const TensorDesc d = to_desc(dst), s = to_desc(src);
  nb::gil_scoped_release release;  // planning may compile
  return shapejit::plan_rearrange(d, s, options);
}

shapejit::HadamardPlan plan_hadamard(const DescTuple& x, const std::optional<DescTuple>& y, std::int64_t group,
                                     std::optional<double> scale, bool inplace, bool check_pointers) {
  shapejit::HadamardDesc d;
  d.x = to_desc(x);
  d.y = to_desc(y);
  d.group = group;
  d.scale = scale;
  d.inplace = inplace;
  d.check_pointers = check_pointers;
  nb::gil_scoped_release release;  // planning may compile
  return shapejit::plan_hadamard(d);
}

shapejit::RopeStyle parse_style(const std::string& style) {
  if (style == "neox") return shapejit::RopeStyle::neox;
  if (style == "gptj") return shapejit::RopeStyle::gptj;
  throw shapejit::Error(ErrorCode::invalid_argument,
                        "style '" + style + "' is not a rope style: use 'neox' (half-split) or 'gptj' (interleaved)");
}

shapejit::RopeAxisRule parse_axis_rule(const std::string& rule) {
  for (auto r : {shapejit::RopeAxisRule::none, shapejit::RopeAxisRule::sections, shapejit::RopeAxisRule::interleaved,
                 shapejit::RopeAxisRule::blocks})
    if (rule == shapejit::rope_axis_rule_name(r)) return r;
  throw shapejit::Error(ErrorCode::invalid_argument,
                        "axis_rule '" + rule + "' is not an axis rule: use 'none', 'sections', 'interleaved' or 'blocks'");
}

/// A cache append's layout name, v, k_cache, v_cache and slots descriptors, and its codes' name.
using CacheTuple = std::tuple<std::string, DescTuple, DescTuple, DescTuple, DescTuple, std::string>;

void set_cache(shapejit::RopeDesc& desc, const CacheTuple& cache) {
  const auto& [layout, v, k_cache, v_cache, slots, quantize] = cache;
  if (layout == "nhd") desc.cache_layout = shapejit::KvCacheLayout::nhd;
  else if (layout == "hnd") desc.cache_layout = shapejit::KvCacheLayout::hnd;
  else
    throw shapejit::Error(ErrorCode::invalid_argument,
                          "cache_layout '" + layout + "' is not a cache layout: use 'nhd' ([blocks, block_size, heads, "
                          "dhead]) or 'hnd' ([blocks, heads, block_size, dhead])");
  if (quantize == "int8") desc.cache_quantize = shapejit::RopeQuantize::int8;
  else if (quantize == "fp8-e4m3") desc.cache_quantize = shapejit::RopeQuantize::fp8_e4m3;
  else if (quantize != "none")
    throw shapejit::Error(ErrorCode::invalid_argument,
                          "cache_quantize '" + quantize + "' is not a cache code: use 'none', 'int8' or 'fp8-e4m3'");
  desc.v = to_desc(v);
  desc.k_cache = to_desc(k_cache);
  desc.v_cache = to_desc(v_cache);
  desc.slots = to_desc(slots);
}

shapejit::RopePlan plan_rope(const std::string& style, const DescTuple& x, const std::optional<DescTuple>& y,
                             const std::optional<DescTuple>& k, const std::optional<DescTuple>& k_out,
                             const DescTuple& table, const std::optional<DescTuple>& positions,
                             std::int64_t rotary_dim, bool inplace, bool inverse, bool checked,
                             bool check_pointers, const std::string& axis_rule,
                             const std::vector<std::int64_t>& axis_sections, const std::optional<CacheTuple>& cache) {
  shapejit::RopeDesc desc;
  desc.axis_rule = parse_axis_rule(axis_rule);
  desc.axis_sections = axis_sections;
  if (cache) set_cache(desc, *cache);
  desc.style = parse_style(style);
  desc.x = to_desc(x);
  desc.y = to_desc(y);
  desc.k = to_desc(k);
  desc.k_out = to_desc(k_out);
  desc.table = to_desc(table);
  desc.positions = to_desc(positions);
  desc.rotary_dim = rotary_dim;
  desc.inplace = inplace;
  desc.inverse = inverse;
  desc.checked = checked;
  desc.check_pointers = check_pointers;
  nb::gil_scoped_release release;
  return shapejit::plan_rope(desc);
}

/// A rope launch on integer pointers (release_gil: the plan is checked, so the launch waits);
/// `cache`: v, k_cache, v_cache, slots, k_cache_scale, v_cache_scale of a cache append.
using CachePointers = std::tuple<std::uintptr_t, std::uintptr_t, std::uintptr_t, std::uintptr_t, std::uintptr_t,
                                 std::uintptr_t>;

void rope_launch(const shapejit::RopePlan& plan, bool release_gil, std::uintptr_t x, std::uintptr_t y,
                 std::uintptr_t k, std::uintptr_t k_out, std::uintptr_t cos, std::uintptr_t sin,
                 std::uintptr_t positions, std::int64_t offset, std::uintptr_t stream,
                 const std::optional<CachePointers>& cache) {
  shapejit::RopePointers p;
  if (cache) {
    const auto& [v, k_cache, v_cache, slots, k_scale, v_scale] = *cache;
    p.v = as_ptr(v);
    p.k_cache = as_ptr(k_cache);
    p.v_cache = as_ptr(v_cache);
    p.slots = as_ptr(slots);
    p.k_cache_scale = static_cast<const float*>(as_ptr(k_scale));
    p.v_cache_scale = static_cast<const float*>(as_ptr(v_scale));
  }
  p.x = as_ptr(x);
  p.y = as_ptr(y);
  p.k = as_ptr(k);
  p.k_out = as_ptr(k_out);
  p.cos = as_ptr(cos);
  p.sin = as_ptr(sin);
  p.positions = as_ptr(positions);
  p.offset = offset;
  shapejit::python::launch_rope(plan, p, as_ptr(stream), release_gil);
}

// ---------------------------------------------------------------------------------------------
// Tables

shapejit::RopeScaling parse_scaling(const std::string& name) {
  if (name == "default" || name == "none") return shapejit::RopeScaling::none;
  if (name == "linear") return shapejit::RopeScaling::linear;
  if (name == "llama3") return shapejit::RopeScaling::llama3;
  if (name == "yarn") return shapejit::RopeScaling::yarn;
  throw shapejit::Error(ErrorCode::unsupported,
                        "rope type '" + name + "' is not supported: use default, linear, llama3 or yarn");
}

std::string scaling_name(shapejit::RopeScaling s) {
  switch (s) {
    case shapejit::RopeScaling::linear: return "linear";
    case shapejit::RopeScaling::llama3: return "llama3";
    case shapejit::RopeScaling::yarn: return "yarn";
    default: return "default";
  }
}

std::pair<std::vector<double>, double> rope_frequencies(std::int64_t rotary_dim,
                                                        const shapejit::RopeTableOptions& options) {
  shapejit::RopeFrequencies f = shapejit::rope_frequencies(rotary_dim, options);
  return {std::move(f.inv_freq), f.attention_factor};
}

/// (cos bytes, sin bytes) of axial tables, each row-major [rows, sum(axes_dims) / 2] in `dtype`.
std::pair<nb::bytes, nb::bytes> rope_axes_tables(std::int64_t rows, const std::vector<std::int64_t>& axes_dims,
                                                 int dtype, double theta) {
  const shapejit::RopeTables t = shapejit::rope_axes_tables(rows, axes_dims, dtype_from_code(dtype), theta);
  return {nb::bytes(t.cos.data(), t.cos.size()), nb::bytes(t.sin.data(), t.sin.size())};
}

/// (cos bytes, sin bytes), each row-major [rows, rotary_dim / 2] in `dtype`.
std::pair<nb::bytes, nb::bytes> rope_tables(std::int64_t rows, std::int64_t rotary_dim, int dtype,
                                            const shapejit::RopeTableOptions& options) {
  const shapejit::RopeTables t = shapejit::rope_tables(rows, rotary_dim, dtype_from_code(dtype), options);
  return {nb::bytes(t.cos.data(), t.cos.size()), nb::bytes(t.sin.data(), t.sin.size())};
}

// ---------------------------------------------------------------------------------------------
// Runtime: doctor, caches, counters

nb::dict counters() {
  const shapejit::Counters c = shapejit::counters();
  nb::dict d;
  d["memory_hits"] = c.memory_hits;
  d["disk_hits"] = c.disk_hits;
  d["compiles"] = c.compiles;
  d["compile_ms"] = c.compile_ms;
  d["load_ms"] = c.load_ms;
  d["bad_entries_replaced"] = c.bad_entries_replaced;
  return d;
}

nb::dict cache_stats(const std::string& root) {
  const shapejit::jit::CacheStats s = shapejit::jit::CacheDir(root).stats();
  nb::dict d;
  d["path"] = root;
  d["entries"] = s.entries;
  d["bytes"] = s.bytes;
  d["temp_files"] = s.temp_files;
  return d;
}

nb::dict cache_verify(const std::string& root, bool repair) {
  const shapejit::jit::VerifyReport r = shapejit::jit::CacheDir(root).verify(repair);
  nb::dict d;
  d["checked"] = r.checked;
  d["bad"] = r.bad;
  d["removed"] = r.removed;
  d["problems"] = r.problems;
  return d;
}

nb::dict cache_prune(const std::string& root, std::uint64_t max_bytes) {
  const shapejit::jit::PruneReport r = shapejit::jit::CacheDir(root).prune(max_bytes);
  nb::dict d;
  d["removed"] = r.removed;
  d["bytes_removed"] = r.bytes_removed;
  d["bytes_left"] = r.bytes_left;
  return d;
}

std::optional<std::string> user_cache_dir() {
  if (auto root = shapejit::jit::user_cache_root()) return root->string();
  return std::nullopt;
}

std::vector<std::string> deployment_cache_dirs() {
  std::vector<std::string> out;
  for (const auto& root : shapejit::jit::deployment_cache_roots()) out.push_back(root.string());
  return out;
}

/// What `shapejit doctor` prints, as data.
nb::dict doctor_info() {
  namespace jit = shapejit::jit;
  nb::dict d;
  d["version"] = std::string(shapejit::version());
  nb::dict driver;
  nb::list devices;
  if (jit::driver_available()) {
    const jit::Driver& drv = jit::driver();
    driver["usable"] = true;
    driver["version"] = jit::driver_version_name(drv);
    try {
      for (const jit::DeviceInfo& dev : jit::list_devices(drv)) {
        nb::dict device;
        device["index"] = dev.index;
        device["name"] = dev.name;
        device["arch"] = dev.arch;
        device["bytes"] = dev.bytes;
        devices.append(device);
      }
    } catch (const shapejit::Error& e) {
      driver["devices_error"] = std::string(e.what());
    }
  } else {
    driver["usable"] = false;
    driver["reason"] = jit::driver_unavailable_reason();
  }
  driver["devices"] = devices;
  d["driver"] = driver;
  nb::dict nvrtc;
  try {
    const jit::Nvrtc& n = jit::nvrtc();
    nvrtc["usable"] = true;
    nvrtc["version"] = n.version;
    nvrtc["path"] = n.path;
  } catch (const shapejit::Error& e) {
    nvrtc["usable"] = false;
    nvrtc["reason"] = std::string(e.what());
  }
  d["nvrtc"] = nvrtc;
  if (auto root = user_cache_dir()) {
    d["user_cache"] = cache_stats(*root);
  } else {
    d["user_cache"] = nb::none();
  }
  d["cache_max_bytes"] = jit::cache_max_bytes();
  nb::list deployment;
  for (const std::string& root : deployment_cache_dirs()) deployment.append(cache_stats(root));
  d["deployment_caches"] = deployment;
  d["offline"] = shapejit::offline();
  d["record_file"] = shapejit::record_file();
  d["counters"] = counters();
  return d;
}

std::vector<std::string> dtype_names() {
  std::vector<std::string> names;
  for (int code = 0; code <= static_cast<int>(DType::f64); ++code)
    names.emplace_back(shapejit::dtype_name(static_cast<DType>(code)));
  return names;
}

}  // namespace

NB_MODULE(_shapejit, m) {
  m.doc() = "shapejit's extension module: plans and launches over integer pointers and streams";
  nb::register_exception_translator(translate_error);
  m.def("_register_errors", &register_errors, "classes"_a,
        "Registers the Python error class of each status code (0..9), in order.");

  m.def("version", [] { return std::string(shapejit::version()); }, "The library version.");
  m.def("dtype_names", &dtype_names, "Dtype names, indexed by dtype code.");
  m.def("dtype_size", [](int code) { return shapejit::dtype_size(dtype_from_code(code)); }, "code"_a);

  nb::class_<shapejit::RearrangePlan>(m, "RearrangePlan", "A planned rearrange (strided copy).")
      .def("launch",
           [](const shapejit::RearrangePlan& p, std::uintptr_t dst, std::uintptr_t src, std::uintptr_t stream) {
             p.launch(as_ptr(dst), as_ptr(src), as_ptr(stream));
           },
           "dst"_a, "src"_a, "stream"_a = 0, "Copies src into dst on the stream (integer handles).")
      .def("describe", &shapejit::RearrangePlan::describe)
      .def("json", &shapejit::RearrangePlan::json)
      .def("manifest_line", &shapejit::RearrangePlan::manifest_line);
  m.def("plan_rearrange", &plan_rearrange, "dst"_a, "src"_a, "exact"_a = false, "assumed_alignment"_a = 16,
        "check_pointers"_a = false);

  nb::class_<shapejit::RopePlan>(m, "RopePlan", "A planned rope.")
      .def("launch", &rope_launch, "release_gil"_a, "x"_a, "y"_a, "k"_a, "k_out"_a, "cos"_a, "sin"_a,
           "positions"_a, "offset"_a, "stream"_a, "cache"_a = nb::none())
      .def("describe", &shapejit::RopePlan::describe)
      .def("json", &shapejit::RopePlan::json)
      .def("manifest_line", &shapejit::RopePlan::manifest_line);
  m.def("plan_rope", &plan_rope, "style"_a, "x"_a, "y"_a, "k"_a, "k_out"_a, "table"_a, "positions"_a,
        "rotary_dim"_a, "inplace"_a, "inverse"_a, "checked"_a, "check_pointers"_a, "axis_rule"_a = "none",
        "axis_sections"_a = std::vector<std::int64_t>{}, "cache"_a = nb::none());

  nb::class_<shapejit::HadamardPlan>(m, "HadamardPlan", "A planned grouped-head Hadamard transform.")
      .def("launch",
           [](const shapejit::HadamardPlan& p, std::uintptr_t x, std::uintptr_t y, std::uintptr_t stream) {
             p.launch({as_ptr(x), as_ptr(y)}, as_ptr(stream));
           },
           "x"_a, "y"_a, "stream"_a = 0, "Transforms x into y on the stream (integer handles).")
      .def("describe", &shapejit::HadamardPlan::describe)
      .def("json", &shapejit::HadamardPlan::json)
      .def("manifest_line", &shapejit::HadamardPlan::manifest_line);
  m.def("plan_hadamard", &plan_hadamard, "x"_a, "y"_a, "group"_a, "scale"_a, "inplace"_a, "check_pointers"_a);
  m.def("hadamard_size_supported", &shapejit::hadamard_size_supported, "n"_a);
  m.def("hadamard_matrix",
        [](std::int64_t n) {
          const std::vector<std::int8_t> signs = shapejit::hadamard_matrix(n);
          return nb::bytes(reinterpret_cast<const char*>(signs.data()), signs.size());
        },
        "n"_a, "H_n as n * n signed bytes (+1 or -1), row-major.");

  nb::class_<shapejit::RopeTableOptions>(m, "RopeTableOptions", "Parameters of the sin/cos tables.")
      .def(nb::init<>())
      .def_rw("theta", &shapejit::RopeTableOptions::theta)
      .def_prop_rw(
          "scaling", [](const shapejit::RopeTableOptions& o) { return scaling_name(o.scaling); },
          [](shapejit::RopeTableOptions& o, const std::string& name) { o.scaling = parse_scaling(name); })
      .def_rw("factor", &shapejit::RopeTableOptions::factor)
      .def_rw("low_freq_factor", &shapejit::RopeTableOptions::low_freq_factor)
      .def_rw("high_freq_factor", &shapejit::RopeTableOptions::high_freq_factor)
      .def_rw("original_max_positions", &shapejit::RopeTableOptions::original_max_positions)
      .def_rw("beta_fast", &shapejit::RopeTableOptions::beta_fast)
      .def_rw("beta_slow", &shapejit::RopeTableOptions::beta_slow)
      .def_rw("mscale", &shapejit::RopeTableOptions::mscale)
      .def_rw("mscale_all_dim", &shapejit::RopeTableOptions::mscale_all_dim)
      .def_rw("attention_factor", &shapejit::RopeTableOptions::attention_factor)
      .def_rw("truncate", &shapejit::RopeTableOptions::truncate);
  m.def("rope_frequencies", &rope_frequencies, "rotary_dim"_a, "options"_a);
  m.def("rope_tables", &rope_tables, "rows"_a, "rotary_dim"_a, "dtype"_a, "options"_a);
  m.def("rope_axes_tables", &rope_axes_tables, "rows"_a, "axes_dims"_a, "dtype"_a, "theta"_a);

  m.def("describe_manifest_line",
        [](const std::string& line, bool json) { return shapejit::describe_manifest_line(line, json); },
        "line"_a, "json"_a = false);
  m.def("set_offline", &shapejit::set_offline, "offline"_a);
  m.def("offline", &shapejit::offline);
  m.def("set_record_file", [](const std::string& path) { shapejit::set_record_file(path); }, "path"_a);
  m.def("record_file", &shapejit::record_file);
  m.def("counters", &counters);
  m.def("doctor_info", &doctor_info);
  m.def("user_cache_dir", &user_cache_dir);
  m.def("deployment_cache_dirs", &deployment_cache_dirs);
  m.def("cache_stats", &cache_stats, "root"_a);
  m.def("cache_verify", &cache_verify, "root"_a, "repair"_a);
  m.def("cache_prune", &cache_prune, "root"_a, "max_bytes"_a);
  m.def("cache_clear", [](const std::string& root) { return shapejit::jit::CacheDir(root).clear(); }, "root"_a);

  m.def("dlpack_view", &shapejit::python::dlpack_view, "capsule"_a,
        "Reads a DLPack capsule: (data, shape, strides or None, dtype code or -1, element bytes, "
        "device type, device id). The capsule is not consumed.");
  shapejit::python::bind_torch_fast_path(m);
}
