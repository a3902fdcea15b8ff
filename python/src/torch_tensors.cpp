#include "torch_tensors.hpp"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "launch.hpp"
#include "shapejit/shapejit.hpp"

namespace shapejit::python {
namespace {

namespace nb = nanobind;
using namespace nb::literals;

/// A layout as the fast path compares and keys it: [dtype code, opaque element bytes, rank,
/// shape..., strides...]. Empty: no tensor.
using Layout = std::vector<std::int64_t>;

/// libtorch's stable C functions (AOTInductor's shim, exported by libtorch_cpu and libtorch_cuda)
/// that read a tensor. Their handle is a pointer to an at::Tensor, which is one TensorImpl pointer:
/// the address of a variable holding the `_cdata` value of a Python tensor. Registration checks
/// this reading against what Python reads of probe tensors, and keeps the fast path off if they
/// disagree.
struct TorchAbi {
  using Handle = void* const*;
  std::int32_t (*data_ptr)(Handle, void**) = nullptr;
  std::int32_t (*dim)(Handle, std::int64_t*) = nullptr;
  std::int32_t (*sizes)(Handle, std::int64_t**) = nullptr;
  std::int32_t (*strides)(Handle, std::int64_t**) = nullptr;
  std::int32_t (*dtype)(Handle, std::int32_t*) = nullptr;
  std::int32_t (*device_type)(Handle, std::int32_t*) = nullptr;
  std::int32_t (*device_index)(Handle, std::int32_t*) = nullptr;
  std::int32_t (*layout)(Handle, std::int32_t*) = nullptr;
  std::int32_t (*current_stream)(std::int32_t, void**) = nullptr;
  std::int32_t cuda = -1;     ///< aoti_torch_device_type_cuda()
  std::int32_t strided = -1;  ///< aoti_torch_layout_strided()

  /// Allocation: a new at::Tensor (the handle owns it) from at::empty_strided, freed with
  /// delete_tensor once THPVariable_Wrap (libtorch_python) has made the Python tensor that keeps
  /// it. Null where not found: outputs are then allocated from Python.
  using Owned = void**;
  std::int32_t (*empty_strided)(std::int64_t, const std::int64_t*, const std::int64_t*, std::int32_t, std::int32_t,
                                std::int32_t, Owned*) = nullptr;
  std::int32_t (*delete_tensor)(Owned) = nullptr;
  PyObject* (*wrap)(Owned) = nullptr;
};

/// What registration sets up; never freed (it holds Python objects that must not be released
/// after the interpreter has gone).
struct Torch {
  TorchAbi abi;
  std::vector<nb::object> types;  ///< torch.Tensor and torch.nn.Parameter: exact types only
  std::unordered_map<std::int32_t, std::pair<int, int>> dtypes;  ///< torch ScalarType -> (code, opaque bytes)
  nb::object cdata = nb::steal(PyUnicode_InternFromString("_cdata"));
  bool can_allocate = false;  ///< abi.empty_strided was found and its probe agreed
  bool allocates = false;     ///< outputs come from abi.empty_strided (can_allocate, not turned off)
};

Torch* torch_state = nullptr;

template <class F>
bool find_symbol(void* lib, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  return out != nullptr;
}

/// Finds the allocation functions; leaves them null when any is missing.
void load_allocation(const std::string& torch_lib_dir, void* cpu, TorchAbi& abi) {
  void* python = dlopen((torch_lib_dir + "/libtorch_python.so").c_str(), RTLD_LAZY | RTLD_NOLOAD);
  // THPVariable_Wrap(const at::TensorBase&), or its by-value / by-rvalue forms of older and newer
  // torch: each takes the address of a tensor (one TensorImpl pointer), as a handle is.
  bool wrap = false;
  for (const char* name : {"_Z16THPVariable_WrapRKN2at10TensorBaseE", "_Z16THPVariable_WrapON2at10TensorBaseE",
                           "_Z16THPVariable_WrapN2at10TensorBaseE"})
    wrap = wrap || (python != nullptr && find_symbol(python, name, abi.wrap));
  if (!wrap || !find_symbol(cpu, "aoti_torch_empty_strided", abi.empty_strided) ||
      !find_symbol(cpu, "aoti_torch_delete_tensor_object", abi.delete_tensor))
    abi.empty_strided = nullptr;
}

bool load_abi(const std::string& torch_lib_dir, TorchAbi& abi) {
  void* cpu = dlopen((torch_lib_dir + "/libtorch_cpu.so").c_str(), RTLD_LAZY | RTLD_NOLOAD);
  void* cuda = dlopen((torch_lib_dir + "/libtorch_cuda.so").c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (cpu == nullptr || cuda == nullptr) return false;
  load_allocation(torch_lib_dir, cpu, abi);
  std::int32_t (*cuda_type)() = nullptr;
  std::int32_t (*strided_layout)() = nullptr;
  return find_symbol(cpu, "aoti_torch_get_data_ptr", abi.data_ptr) && find_symbol(cpu, "aoti_torch_get_dim", abi.dim) &&
         find_symbol(cpu, "aoti_torch_get_sizes", abi.sizes) && find_symbol(cpu, "aoti_torch_get_strides", abi.strides) &&
         find_symbol(cpu, "aoti_torch_get_dtype", abi.dtype) &&
         find_symbol(cpu, "aoti_torch_get_device_type", abi.device_type) &&
         find_symbol(cpu, "aoti_torch_get_device_index", abi.device_index) &&
         find_symbol(cpu, "aoti_torch_get_layout", abi.layout) && find_symbol(cpu, "aoti_torch_device_type_cuda", cuda_type) &&
         find_symbol(cpu, "aoti_torch_layout_strided", strided_layout) &&
         find_symbol(cuda, "aoti_torch_get_current_cuda_stream", abi.current_stream) &&
         (abi.cuda = cuda_type(), abi.strided = strided_layout(), true);
}

/// The TensorImpl pointer of a Python tensor of one of `types`, or null (no Python error set).
void* tensor_impl(const Torch& t, PyObject* obj) {
  bool known = false;
  for (const nb::object& type : t.types) known = known || reinterpret_cast<PyObject*>(Py_TYPE(obj)) == type.ptr();
  if (!known) return nullptr;
  nb::object cdata = nb::steal(PyObject_GetAttr(obj, t.cdata.ptr()));
  void* impl = cdata.is_valid() ? PyLong_AsVoidPtr(cdata.ptr()) : nullptr;
  if (impl == nullptr) PyErr_Clear();
  return impl;
}

struct TensorRead {
  std::uintptr_t data = 0;
  long long device = -1;
  std::int32_t scalar_type = -1;  ///< torch's own dtype (several share one shapejit dtype code)
};

/// Appends a strided tensor's layout to `layout` and reads its data pointer, device and dtype;
/// with `cuda_only`, only a CUDA tensor's (sizes and strides are read last: they throw for
/// sparse tensors).
bool read_impl(const Torch& t, void* impl, Layout& layout, TensorRead& out, bool cuda_only) {
  const TorchAbi& a = t.abi;
  void* const* h = &impl;
  std::int64_t rank = 0;
  std::int64_t *sizes = nullptr, *strides = nullptr;
  std::int32_t dtype = 0, device_type = 0, device_index = 0, tensor_layout = 0;
  void* data = nullptr;
  if (a.device_type(h, &device_type) != 0 || (cuda_only && device_type != a.cuda) ||
      a.layout(h, &tensor_layout) != 0 || tensor_layout != a.strided || a.dtype(h, &dtype) != 0 ||
      a.device_index(h, &device_index) != 0 || a.dim(h, &rank) != 0 || a.sizes(h, &sizes) != 0 ||
      a.strides(h, &strides) != 0 || a.data_ptr(h, &data) != 0)
    return false;
  const auto known = t.dtypes.find(dtype);
  if (known == t.dtypes.end()) return false;
  layout.push_back(known->second.first);
  layout.push_back(known->second.second);
  layout.push_back(rank);
  layout.insert(layout.end(), sizes, sizes + rank);
  layout.insert(layout.end(), strides, strides + rank);
  out.data = reinterpret_cast<std::uintptr_t>(data);
  out.device = device_index;
  out.scalar_type = dtype;
  return true;
}

/// When `obj` is a plain torch tensor on a CUDA device with a dtype shapejit reads, appends its
/// layout to `layout` and returns its data pointer and device. False, with no Python error set,
/// for anything else (the general path explains it).
bool read_tensor(PyObject* obj, Layout& layout, TensorRead& out) {
  const Torch* t = torch_state;
  if (t == nullptr) return false;
  void* impl = tensor_impl(*t, obj);
  return impl != nullptr && read_impl(*t, impl, layout, out, true);
}

/// A new tensor from at::empty_strided, made in C++ (no Python argument parsing): contiguous
/// strides when `strides` is null; `data` gets its data pointer. A null object when allocation is
/// off or fails (the caller then allocates from Python, which raises torch's own error).
nb::object allocate(const Torch& t, std::int64_t rank, const std::int64_t* shape, const std::int64_t* strides,
                    std::int32_t scalar_type, std::int32_t device_type, long long device, std::uintptr_t& data) {
  thread_local std::vector<std::int64_t> contiguous;
  if (strides == nullptr) {
    contiguous.assign(static_cast<std::size_t>(rank), 1);
    for (std::int64_t i = rank - 1; i > 0; --i) contiguous[i - 1] = contiguous[i] * std::max<std::int64_t>(shape[i], 1);
    strides = contiguous.data();
  }
  TorchAbi::Owned owned = nullptr;
  if (t.abi.empty_strided(rank, shape, strides, scalar_type, device_type, static_cast<std::int32_t>(device), &owned) != 0)
    return {};
  void* ptr = nullptr;
  nb::object out;
  if (t.abi.data_ptr(owned, &ptr) == 0) out = nb::steal(t.abi.wrap(owned));
  t.abi.delete_tensor(owned);  // the Python tensor holds its own reference
  if (!out.is_valid()) PyErr_Clear();
  data = reinterpret_cast<std::uintptr_t>(ptr);
  return out;
}

/// A new contiguous CUDA tensor shaped `shape`, of the dtype and device `like` was read with;
/// `data` gets its data pointer.
nb::object new_contiguous(std::int64_t rank, const std::int64_t* shape, const TensorRead& like, std::uintptr_t& data) {
  const Torch* t = torch_state;
  if (t == nullptr || !t->allocates) return {};
  return allocate(*t, rank, shape, nullptr, like.scalar_type, t->abi.cuda, like.device, data);
}

/// Whether allocating in C++ gives what torch would: a CPU tensor made with odd strides must read
/// back as a plain torch.Tensor of that shape, those strides and that dtype.
bool allocation_agrees(const Torch& t, std::int32_t scalar_type, std::int32_t cpu) {
  const std::int64_t shape[] = {2, 3}, strides[] = {1, 2};
  std::uintptr_t data = 0;
  nb::object probe = allocate(t, 2, shape, strides, scalar_type, cpu, 0, data);
  void* impl = probe.is_valid() ? tensor_impl(t, probe.ptr()) : nullptr;
  Layout layout;
  TensorRead read;
  return impl != nullptr && !t.types.empty() && Py_TYPE(probe.ptr()) == reinterpret_cast<PyTypeObject*>(t.types.front().ptr()) &&
         Py_REFCNT(probe.ptr()) == 1 && read_impl(t, impl, layout, read, false) && read.scalar_type == scalar_type &&
         layout.size() == 7 && std::equal(shape, shape + 2, layout.begin() + 3) &&
         std::equal(strides, strides + 2, layout.begin() + 5);
}

using ProbeTruth = std::tuple<std::uintptr_t, std::vector<std::int64_t>, std::vector<std::int64_t>>;

/// Sets up the fast path: finds libtorch's C functions in `torch_lib_dir`, learns the ScalarType
/// of each torch dtype from `dtype_probes` (tensor, shapejit code, opaque bytes), and checks the
/// reading of `probe` against `truth` (data pointer, shape, strides as Python reads them). Returns
/// whether the fast path is on; when off, every call takes the general path.
bool register_torch(const std::string& torch_lib_dir, const std::vector<nb::handle>& types,
                    const std::vector<std::tuple<nb::handle, int, int>>& dtype_probes, nb::handle probe,
                    const ProbeTruth& truth) {
  torch_state = nullptr;  // a replaced state is not freed: a call may still be reading it
  auto t = std::make_unique<Torch>();
  if (!load_abi(torch_lib_dir, t->abi)) return false;
  for (nb::handle type : types) {
    if (!PyType_Check(type.ptr())) throw nb::type_error("types must be types");
    t->types.push_back(nb::borrow(type));
  }
  for (const auto& [tensor, code, opaque] : dtype_probes) {
    void* impl = tensor_impl(*t, tensor.ptr());
    std::int32_t dtype = -1;
    if (impl == nullptr || t->abi.dtype(&impl, &dtype) != 0) return false;
    t->dtypes[dtype] = {code, opaque};
  }
  void* impl = tensor_impl(*t, probe.ptr());
  Layout layout;
  TensorRead read;
  if (impl == nullptr || !read_impl(*t, impl, layout, read, false)) return false;
  const auto& [data, shape, strides] = truth;
  const auto rank = static_cast<std::ptrdiff_t>(shape.size());
  const bool agrees = read.data == data && layout.size() == 3 + 2 * shape.size() && layout[2] == rank &&
                      std::equal(shape.begin(), shape.end(), layout.begin() + 3) &&
                      std::equal(strides.begin(), strides.end(), layout.begin() + 3 + rank);
  if (!agrees) return false;
  std::int32_t (*cpu_type)() = nullptr;
  void* cpu = dlopen((torch_lib_dir + "/libtorch_cpu.so").c_str(), RTLD_LAZY | RTLD_NOLOAD);
  t->can_allocate = t->abi.empty_strided != nullptr && find_symbol(cpu, "aoti_torch_device_type_cpu", cpu_type) &&
                    allocation_agrees(*t, read.scalar_type, cpu_type());
  t->allocates = t->can_allocate;
  torch_state = t.release();
  return true;
}

/// Reads an optional tensor: None appends nothing and reads as a null pointer on `device`.
bool read_optional(PyObject* obj, Layout& layout, TensorRead& out, long long device) {
  if (obj == Py_None) {
    out = TensorRead{0, device};
    return true;
  }
  return read_tensor(obj, layout, out) && out.device == device;
}

/// The stream to launch on: an int handle, or (None) the current torch stream of `device`.
bool stream_of(PyObject* stream, long long device, void*& out) {
  if (stream == Py_None)
    return torch_state != nullptr && torch_state->abi.current_stream(static_cast<std::int32_t>(device), &out) == 0;
  out = reinterpret_cast<void*>(static_cast<std::uintptr_t>(PyLong_AsUnsignedLongLong(stream)));
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  return true;
}

/// Appends the ints of a tuple to `layout`; false (no error set) otherwise.
bool append_ints(PyObject* tuple, Layout& layout) {
  if (!PyTuple_Check(tuple)) return false;
  for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(tuple); i < n; ++i) {
    const long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(tuple, i));
    if (v == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    layout.push_back(v);
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Launches of plan objects

/// The layouts a plan was made for, one slot per tensor argument (empty: the plan has none).
struct Layouts {
  std::vector<Layout> slots;
};

Layouts make_layouts(const std::vector<std::optional<std::tuple<std::vector<std::int64_t>, std::vector<std::int64_t>,
                                                                int, int>>>& descs) {
  Layouts out;
  for (const auto& d : descs) {
    Layout l;
    if (d) {
      const auto& [shape, strides, code, elem_bytes] = *d;
      if (shape.size() != strides.size()) throw nb::value_error("one stride per dimension");
      l = {code, elem_bytes, static_cast<std::int64_t>(shape.size())};
      l.insert(l.end(), shape.begin(), shape.end());
      l.insert(l.end(), strides.begin(), strides.end());
    }
    out.slots.push_back(std::move(l));
  }
  return out;
}

/// Reads `objs[i]` against slot i of `planned` (None where the slot is empty), all on one device.
template <std::size_t N>
bool read_planned(const Layouts& planned, const std::array<PyObject*, N>& objs, std::array<TensorRead, N>& out) {
  if (planned.slots.size() != N) return false;
  thread_local Layout layout;
  long long device = -1;
  for (std::size_t i = 0; i < N; ++i) {
    layout.clear();
    if (planned.slots[i].empty()) {
      if (objs[i] != Py_None) return false;
      out[i] = TensorRead{};
      continue;
    }
    if (!read_tensor(objs[i], layout, out[i]) || layout != planned.slots[i]) return false;
    if (device >= 0 && out[i].device != device) return false;
    device = out[i].device;
  }
  return true;
}

bool copy_launch(const RearrangePlan& plan, const Layouts& planned, nb::handle dst, nb::handle src,
                 nb::handle stream) {
  std::array<TensorRead, 2> t;
  void* s = nullptr;
  if (!read_planned<2>(planned, {dst.ptr(), src.ptr()}, t) || !stream_of(stream.ptr(), t[0].device, s)) return false;
  plan.launch(as_ptr(t[0].data), as_ptr(t[1].data), s);
  return true;
}

/// An int argument; false (no error set) for anything else.
bool int_of(nb::handle obj, std::int64_t& out) {
  if (!PyLong_Check(obj.ptr())) return false;
  out = PyLong_AsLongLong(obj.ptr());
  if (out == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  return true;
}

RopePointers rope_pointers(const std::array<TensorRead, 7>& t, std::int64_t offset) {
  RopePointers p;
  p.x = as_ptr(t[0].data);
  p.y = as_ptr(t[1].data);
  p.k = as_ptr(t[2].data);
  p.k_out = as_ptr(t[3].data);
  p.cos = as_ptr(t[4].data);
  p.sin = as_ptr(t[5].data);
  p.positions = as_ptr(t[6].data);
  p.offset = offset;
  return p;
}

bool rope_launch(const RopePlan& plan, const Layouts& planned, bool checked, nb::handle q, nb::handle y,
                 nb::handle k, nb::handle k_out, nb::handle cos, nb::handle sin, nb::handle positions,
                 nb::handle offset, nb::handle stream) {
  std::array<TensorRead, 7> t;
  void* s = nullptr;
  std::int64_t offset_value = 0;
  if (!int_of(offset, offset_value) || !read_planned<7>(planned, {q.ptr(), y.ptr(), k.ptr(), k_out.ptr(), cos.ptr(), sin.ptr(), positions.ptr()}, t) ||
      !stream_of(stream.ptr(), t[0].device, s))
    return false;
  launch_rope(plan, rope_pointers(t, offset_value), s, checked);
  return true;
}

// ---------------------------------------------------------------------------------------------
// One-shot calls: plans cached by the raw layouts of their tensors

struct KeyHash {
  std::size_t operator()(const Layout& key) const {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (const std::int64_t v : key) h = (h ^ static_cast<std::uint64_t>(v)) * 0x100000001b3ull;
    return static_cast<std::size_t>(h ^ (h >> 29));
  }
};

/// Plans by key, emptied when it holds more than a few thousand (as the Python cache is).
template <class Plan>
struct PlanCache {
  std::unordered_map<Layout, Plan, KeyHash> plans;

  /// The plan under `key`; with `made`, stores it there first.
  const Plan* find(const Layout& key, const Plan* made) {
    if (made != nullptr) {
      if (plans.size() >= 4096) plans.clear();
      return &plans.insert_or_assign(key, *made).first->second;
    }
    auto it = plans.find(key);
    return it == plans.end() ? nullptr : &it->second;
  }
};

PlanCache<RearrangePlan>& copy_plans() {
  static auto* cache = new PlanCache<RearrangePlan>;
  return *cache;
}

PlanCache<RopePlan>& rope_plans() {
  static auto* cache = new PlanCache<RopePlan>;
  return *cache;
}

enum KeyTag : std::int64_t { copy_tag = 1, permute_tag = 2, rope_tag = 3 };

/// dst.copy_(src) (axes None) or a permute of src into dst (axes: output dim i is src dim axes[i]),
/// with the cached plan of these layouts, or `plan` stored for them; False on a miss (nothing
/// launched) or when an argument is not a CUDA torch tensor of one device.
bool copy_cached(nb::handle dst, nb::handle src, nb::handle axes, nb::handle stream, const RearrangePlan* plan) {
  thread_local Layout key;
  key.assign(1, axes.is_none() ? copy_tag : permute_tag);
  if (!axes.is_none() && !append_ints(axes.ptr(), key)) return false;
  TensorRead d, s;
  void* st = nullptr;
  if (!read_tensor(dst.ptr(), key, d) || !read_tensor(src.ptr(), key, s) || s.device != d.device) return false;
  key.push_back(d.scalar_type);  // copy_ refuses to convert between dtypes of one size
  key.push_back(s.scalar_type);
  key.push_back(d.device);
  const RearrangePlan* found = copy_plans().find(key, plan);
  if (found == nullptr || !stream_of(stream.ptr(), d.device, st)) return false;
  found->launch(as_ptr(d.data), as_ptr(s.data), st);
  return true;
}

/// x.permute(axes).contiguous() into a new tensor, through the plan cached for these layouts: the
/// whole one-shot permute in one call. None on a miss (nothing launched) or when x is not a CUDA
/// torch tensor; a failed allocation raises.
nb::object permute_new(nb::handle x, nb::handle axes, nb::handle stream) {
  thread_local Layout layout;
  thread_local std::vector<std::int64_t> shape;
  layout.clear();
  TensorRead read;
  if (!PyTuple_Check(axes.ptr()) || !read_tensor(x.ptr(), layout, read)) return nb::none();
  const std::int64_t rank = layout[2];
  if (PyTuple_GET_SIZE(axes.ptr()) != rank) return nb::none();
  shape.clear();
  for (std::int64_t i = 0; i < rank; ++i) {
    const long long axis = PyLong_AsLongLong(PyTuple_GET_ITEM(axes.ptr(), i));
    if (axis < 0 || axis >= rank) {
      PyErr_Clear();
      return nb::none();
    }
    shape.push_back(layout[3 + axis]);
  }
  std::uintptr_t data = 0;
  nb::object out = new_contiguous(rank, shape.data(), read, data);
  if (!out.is_valid()) {
    static PyObject* new_empty = PyUnicode_InternFromString("new_empty");
    nb::object shape_tuple = nb::steal(PyTuple_New(rank));
    for (std::int64_t i = 0; i < rank; ++i) PyTuple_SET_ITEM(shape_tuple.ptr(), i, PyLong_FromLongLong(shape[i]));
    out = nb::steal(PyObject_CallMethodOneArg(x.ptr(), new_empty, shape_tuple.ptr()));
    if (!out.is_valid()) throw nb::python_error();
  }
  return copy_cached(out, x, axes, stream, nullptr) ? out : nb::none();
}

/// The one-shot rope key: the options, then the layouts of q, y, k, k_out, cos, sin and
/// positions, each after a separator, then q's device. Reads the tensors into `t`, except y and
/// k_out with `new_outputs`: those are keyed as the new contiguous tensors shaped like q and k that
/// rope_new allocates. `at[i]`: where tensor i's layout starts in `key`. False (no error set)
/// when a tensor is not a CUDA torch tensor of q's device.
bool rope_key(const std::array<PyObject*, 7>& objs, const std::string& style, std::int64_t rotary_dim, bool inplace,
              bool inverse, bool checked, bool new_outputs, Layout& key, std::array<TensorRead, 7>& t,
              std::array<std::size_t, 7>& at) {
  key.assign({rope_tag, style == "gptj" ? 1 : style == "neox" ? 0 : -1, rotary_dim, inplace, inverse, checked});
  if (key[1] < 0) return false;
  for (std::size_t i = 0; i < objs.size(); ++i) {
    if (i > 0) key.push_back(-1);  // separates the optional tensors
    at[i] = key.size();
    const bool output = i == 1 || i == 3;
    if (!(new_outputs && output)) {
      if (i == 0 ? !read_tensor(objs[i], key, t[i]) : !read_optional(objs[i], key, t[i], t[0].device)) return false;
      continue;
    }
    if (objs[i - 1] == Py_None) {  // no k, no k_out
      t[i] = TensorRead{0, t[0].device};
      continue;
    }
    const std::size_t like = at[i - 1];
    const std::int64_t rank = key[like + 2];
    for (std::int64_t j = 0; j < 3 + rank; ++j) key.push_back(key[like + static_cast<std::size_t>(j)]);
    key.resize(key.size() + static_cast<std::size_t>(rank));
    std::int64_t stride = 1;
    for (std::int64_t j = rank - 1; j >= 0; --j) {
      key[at[i] + 3 + static_cast<std::size_t>(rank + j)] = stride;
      stride *= std::max<std::int64_t>(key[like + 3 + static_cast<std::size_t>(j)], 1);
    }
    t[i] = t[i - 1];  // its dtype and device; the data pointer comes with the allocation
  }
  key.push_back(t[0].device);
  return true;
}

/// A one-shot rope from the cached plan of these layouts and options, or `plan` stored for them;
/// False on a miss (nothing launched) or when a tensor is not a CUDA torch tensor of q's device.
bool rope_cached(nb::handle q, nb::handle y, nb::handle k, nb::handle k_out, nb::handle cos, nb::handle sin,
                 nb::handle positions, nb::handle offset, const std::string& style, std::int64_t rotary_dim,
                 bool inplace, bool inverse, bool checked, nb::handle stream, const RopePlan* plan) {
  thread_local Layout key;
  std::array<TensorRead, 7> t;
  std::array<std::size_t, 7> at;
  std::int64_t offset_value = 0;
  void* st = nullptr;
  if (!int_of(offset, offset_value) ||
      !rope_key({q.ptr(), y.ptr(), k.ptr(), k_out.ptr(), cos.ptr(), sin.ptr(), positions.ptr()}, style, rotary_dim,
                inplace, inverse, checked, false, key, t, at))
    return false;
  const RopePlan* found = rope_plans().find(key, plan);
  if (found == nullptr || !stream_of(stream.ptr(), t[0].device, st)) return false;
  const RopePlan kept = *found;  // a checked launch lets other threads run, and change the cache
  launch_rope(kept, rope_pointers(t, offset_value), st, checked);
  return true;
}

/// A one-shot rope into new contiguous outputs shaped like q and k, through the plan cached for
/// these layouts: q's output, or (q's, k's). Looks the plan up before it allocates. None on a miss
/// (nothing launched or allocated), when allocation from C++ is off, or for arguments the fast
/// path does not take (rotary_dim: None or an int).
nb::object rope_new(nb::handle q, nb::handle k, nb::handle cos, nb::handle sin, nb::handle positions,
                    nb::handle offset, const std::string& style, nb::handle rotary_dim, bool inverse, bool checked,
                    nb::handle stream) {
  if (torch_state == nullptr || !torch_state->allocates) return nb::none();
  thread_local Layout key;
  std::array<TensorRead, 7> t;
  std::array<std::size_t, 7> at;
  std::int64_t offset_value = 0, rotary = 0;
  void* st = nullptr;
  if (!int_of(offset, offset_value) || !(rotary_dim.is_none() || int_of(rotary_dim, rotary)) ||
      !rope_key({q.ptr(), Py_None, k.ptr(), Py_None, cos.ptr(), sin.ptr(), positions.ptr()}, style, rotary, false,
                inverse, checked, true, key, t, at))
    return nb::none();
  const RopePlan* found = rope_plans().find(key, nullptr);
  if (found == nullptr || !stream_of(stream.ptr(), t[0].device, st)) return nb::none();
  const RopePlan kept = *found;  // allocation and a checked launch may run other Python code
  // Making q's output a Python tensor may run Python code that calls here again and rewrites `key`,
  // so k's shape is copied first (a planned rope's tensors have rank 3 or 4).
  const std::int64_t q_rank = key[at[0] + 2], k_rank = k.is_none() ? 0 : key[at[2] + 2];
  std::array<std::int64_t, 4> k_shape{};
  if (k_rank > 4) return nb::none();
  for (std::size_t i = 0; i < static_cast<std::size_t>(k_rank); ++i) k_shape[i] = key[at[2] + 3 + i];
  nb::object y = new_contiguous(q_rank, key.data() + at[0] + 3, t[0], t[1].data);
  nb::object k_made = k.is_none() ? nb::none() : new_contiguous(k_rank, k_shape.data(), t[2], t[3].data);
  if (!y.is_valid() || !k_made.is_valid()) return nb::none();
  launch_rope(kept, rope_pointers(t, offset_value), st, checked);
  return k.is_none() ? y : nb::make_tuple(y, k_made);
}

}  // namespace

void bind_torch_fast_path(nb::module_& m) {
  m.def("torch_register", &register_torch, "torch_lib_dir"_a, "types"_a, "dtype_probes"_a, "probe"_a, "truth"_a,
        "Sets up the fast path from libtorch's C functions in torch_lib_dir, for tensors of exactly "
        "`types`; dtype_probes are (tensor, dtype code, opaque bytes); the reading of `probe` must "
        "match `truth` (data pointer, shape, strides). Returns whether the fast path is on.");
  m.def("torch_fast_path", [] { return torch_state != nullptr; }, "Whether the torch fast path is on.");
  nb::class_<Layouts>(m, "Layouts", "The tensor layouts a plan was made for (the fast path compares them).")
      .def("__init__", [](Layouts* self, const std::vector<std::optional<std::tuple<std::vector<std::int64_t>,
                                                        std::vector<std::int64_t>, int, int>>>& descs) {
        new (self) Layouts(make_layouts(descs));
      }, "descs"_a, "One (shape, strides, dtype code, element bytes) or None per tensor argument.");
  m.def("copy_launch", &copy_launch, "plan"_a, "layouts"_a, "dst"_a.none(), "src"_a.none(), "stream"_a.none(),
        "Launches plan on torch tensors matching its layouts (stream None: the current torch stream "
        "of their device). False, with nothing launched, otherwise.");
  m.def("rope_launch", &rope_launch, "plan"_a, "layouts"_a, "checked"_a, "q"_a.none(), "y"_a.none(), "k"_a.none(),
        "k_out"_a.none(), "cos"_a.none(), "sin"_a.none(), "positions"_a.none(), "offset"_a.none(), "stream"_a.none(),
        "As copy_launch, for a rope plan's seven tensors (None where the plan has none).");
  m.def("copy_cached", &copy_cached, "dst"_a.none(), "src"_a.none(), "axes"_a.none(), "stream"_a.none(), "plan"_a.none(),
        "A one-shot copy or permute through the plan cached for these torch tensors' layouts (or "
        "`plan`, stored for them). False, with nothing launched, on a miss or other arguments.");
  m.def("permute_new", &permute_new, "x"_a.none(), "axes"_a.none(), "stream"_a.none(),
        "x.permute(axes).contiguous() as a new tensor through the plan cached for its layouts. None, "
        "with nothing launched, on a miss or other arguments.");
  m.def("rope_cached", &rope_cached, "q"_a.none(), "y"_a.none(), "k"_a.none(), "k_out"_a.none(), "cos"_a.none(), "sin"_a.none(),
        "positions"_a.none(), "offset"_a.none(), "style"_a, "rotary_dim"_a, "inplace"_a, "inverse"_a, "checked"_a,
        "stream"_a.none(), "plan"_a.none(), "As copy_cached, for rope.");
  m.def("torch_allocation", [](bool on) {
    if (torch_state != nullptr) torch_state->allocates = on && torch_state->can_allocate;
    return torch_state != nullptr && torch_state->allocates;
  }, "on"_a, "Turns the allocation of one-shot outputs in C++ (at::empty_strided through libtorch's C "
     "functions) on or off; returns whether it is on (off where the fast path is, or its probe disagreed).");
  m.def("rope_new", &rope_new, "q"_a.none(), "k"_a.none(), "cos"_a.none(), "sin"_a.none(), "positions"_a.none(),
        "offset"_a.none(), "style"_a, "rotary_dim"_a.none(), "inverse"_a, "checked"_a, "stream"_a.none(),
        "A one-shot rope into new contiguous outputs (q's, or q's and k's) through the plan cached for "
        "these layouts (rotary_dim None or an int). None, with nothing allocated or launched, on a miss "
        "or other arguments.");
  m.def("clear_torch_plans", [] {
    copy_plans().plans.clear();
    rope_plans().plans.clear();
  }, "Forgets the one-shot plans of the fast path.");
}

}  // namespace shapejit::python
