#include "torch_tensors.hpp"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "shapejit/shapejit.hpp"

namespace shapejit::python {
namespace {

namespace nb = nanobind;
using namespace nb::literals;

/// A layout as the fast path compares and keys it: [dtype code, opaque element bytes, rank,
/// shape..., strides...]. Empty: no tensor.
using Layout = std::vector<std::int64_t>;

/// What shapejit/_torch.py registers at import: torch.Tensor, the torch dtypes shapejit reads
/// (with their dtype code and opaque element bytes), the current-stream function, and the
/// attribute names, interned once.
struct Torch {
  PyTypeObject* tensor_type = nullptr;
  std::vector<std::tuple<nb::object, int, int>> dtypes;
  nb::object raw_stream;
  nb::object shape, stride, dtype, data_ptr, get_device;
};

/// Set once torch has been imported; never freed (it holds Python objects that must not be
/// released after the interpreter has gone).
Torch* torch_state = nullptr;

void register_torch(nb::handle tensor_type, const std::vector<std::tuple<nb::object, int, int>>& dtypes,
                    nb::object raw_stream) {
  if (!PyType_Check(tensor_type.ptr())) throw nb::type_error("tensor_type must be a type");
  auto* t = new Torch;
  t->tensor_type = reinterpret_cast<PyTypeObject*>(tensor_type.ptr());
  Py_INCREF(tensor_type.ptr());
  t->dtypes = dtypes;
  t->raw_stream = std::move(raw_stream);
  const auto intern = [](const char* s) { return nb::steal(PyUnicode_InternFromString(s)); };
  t->shape = intern("shape");
  t->stride = intern("stride");
  t->dtype = intern("dtype");
  t->data_ptr = intern("data_ptr");
  t->get_device = intern("get_device");
  torch_state = t;
}

/// A Python int result of `obj.name()`; false (no error set) when the call fails or is no int.
bool call_int(PyObject* obj, const nb::object& name, long long& out) {
  nb::object r = nb::steal(PyObject_CallMethodNoArgs(obj, name.ptr()));
  if (r.is_valid() && PyLong_Check(r.ptr())) {
    out = PyLong_AsLongLong(r.ptr());
    if (out != -1 || !PyErr_Occurred()) return true;
  }
  PyErr_Clear();
  return false;
}

/// Appends the ints of a tuple (torch.Size is one) to `layout`; false (no error set) otherwise.
bool append_ints(PyObject* tuple, Layout& layout) {
  if (tuple == nullptr || !PyTuple_Check(tuple)) return false;
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

struct TensorRead {
  std::uintptr_t data = 0;
  long long device = -1;
};

/// When `obj` is a torch tensor on a CUDA device with a dtype shapejit reads, appends its layout to
/// `layout` and returns its data pointer and device. False, with no Python error set, for anything
/// else (the general path explains it).
bool read_tensor(PyObject* obj, Layout& layout, TensorRead& out) {
  const Torch* t = torch_state;
  if (t == nullptr || !PyObject_TypeCheck(obj, t->tensor_type)) return false;
  if (!call_int(obj, t->get_device, out.device) || out.device < 0) return false;
  nb::object dtype = nb::steal(PyObject_GetAttr(obj, t->dtype.ptr()));
  if (!dtype.is_valid()) {
    PyErr_Clear();
    return false;
  }
  const std::tuple<nb::object, int, int>* known = nullptr;
  for (const auto& d : t->dtypes)
    if (std::get<0>(d).ptr() == dtype.ptr()) known = &d;
  if (known == nullptr) return false;
  layout.push_back(std::get<1>(*known));
  layout.push_back(std::get<2>(*known));
  const std::size_t rank_at = layout.size();
  layout.push_back(0);
  nb::object shape = nb::steal(PyObject_GetAttr(obj, t->shape.ptr()));
  nb::object strides = nb::steal(PyObject_CallMethodNoArgs(obj, t->stride.ptr()));
  if (!shape.is_valid() || !strides.is_valid()) {
    PyErr_Clear();
    return false;
  }
  if (!append_ints(shape.ptr(), layout)) return false;
  const std::size_t rank = layout.size() - rank_at - 1;
  if (!append_ints(strides.ptr(), layout) || layout.size() - rank_at - 1 != 2 * rank) return false;
  layout[rank_at] = static_cast<std::int64_t>(rank);
  long long data = 0;
  if (!call_int(obj, t->data_ptr, data)) return false;
  out.data = static_cast<std::uintptr_t>(data);
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
  if (stream == Py_None) {
    if (torch_state == nullptr || !torch_state->raw_stream.is_valid() || torch_state->raw_stream.is_none())
      return false;
    nb::object r = nb::steal(PyObject_CallOneArg(torch_state->raw_stream.ptr(), nb::int_(device).ptr()));
    if (!r.is_valid()) {
      PyErr_Clear();
      return false;
    }
    stream = r.ptr();
    out = reinterpret_cast<void*>(static_cast<std::uintptr_t>(PyLong_AsUnsignedLongLong(stream)));
  } else {
    out = reinterpret_cast<void*>(static_cast<std::uintptr_t>(PyLong_AsUnsignedLongLong(stream)));
  }
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  return true;
}

void* as_ptr(std::uintptr_t value) { return reinterpret_cast<void*>(value); }

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

/// Checked plans wait for the stream, so they let other Python threads run meanwhile.
void launch_rope(const RopePlan& plan, const RopePointers& p, void* stream, bool checked) {
  if (checked) {
    nb::gil_scoped_release release;
    plan.launch(p, stream);
  } else {
    plan.launch(p, stream);
  }
}

bool rope_launch(const RopePlan& plan, const Layouts& planned, bool checked, nb::handle q, nb::handle y,
                 nb::handle k, nb::handle k_out, nb::handle cos, nb::handle sin, nb::handle positions,
                 std::int64_t offset, nb::handle stream) {
  std::array<TensorRead, 7> t;
  void* s = nullptr;
  if (!read_planned<7>(planned, {q.ptr(), y.ptr(), k.ptr(), k_out.ptr(), cos.ptr(), sin.ptr(), positions.ptr()}, t) ||
      !stream_of(stream.ptr(), t[0].device, s))
    return false;
  launch_rope(plan, rope_pointers(t, offset), s, checked);
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
  if (!read_tensor(dst.ptr(), key, d) || !read_tensor(src.ptr(), key, s)) return false;
  key.push_back(s.device);
  const RearrangePlan* found = copy_plans().find(key, plan);
  if (found == nullptr || !stream_of(stream.ptr(), d.device, st)) return false;
  found->launch(as_ptr(d.data), as_ptr(s.data), st);
  return true;
}

/// A one-shot rope from the cached plan of these layouts and options, or `plan` stored for them;
/// False on a miss (nothing launched) or when a tensor is not a CUDA torch tensor of q's device.
bool rope_cached(nb::handle q, nb::handle y, nb::handle k, nb::handle k_out, nb::handle cos, nb::handle sin,
                 nb::handle positions, std::int64_t offset, const std::string& style, std::int64_t rotary_dim,
                 bool inplace, bool inverse, bool checked, nb::handle stream, const RopePlan* plan) {
  thread_local Layout key;
  key.assign({rope_tag, style == "gptj" ? 1 : style == "neox" ? 0 : -1, rotary_dim, inplace, inverse, checked});
  if (key[1] < 0) return false;
  const std::array<PyObject*, 7> objs = {q.ptr(), y.ptr(), k.ptr(), k_out.ptr(), cos.ptr(), sin.ptr(), positions.ptr()};
  std::array<TensorRead, 7> t;
  if (!read_tensor(objs[0], key, t[0])) return false;
  for (std::size_t i = 1; i < objs.size(); ++i) {
    key.push_back(-1);  // separates the optional tensors
    if (!read_optional(objs[i], key, t[i], t[0].device)) return false;
  }
  key.push_back(t[0].device);
  void* st = nullptr;
  const RopePlan* found = rope_plans().find(key, plan);
  if (found == nullptr || !stream_of(stream.ptr(), t[0].device, st)) return false;
  launch_rope(*found, rope_pointers(t, offset), st, checked);
  return true;
}

}  // namespace

void bind_torch_fast_path(nb::module_& m) {
  m.def("torch_register", &register_torch, "tensor_type"_a, "dtypes"_a, "raw_stream"_a.none(),
        "Registers torch.Tensor, the torch dtypes as (dtype, code, opaque bytes), and "
        "torch._C._cuda_getCurrentRawStream (or None) for the fast path.");
  nb::class_<Layouts>(m, "Layouts", "The tensor layouts a plan was made for (the fast path compares them).")
      .def("__init__", [](Layouts* self, const std::vector<std::optional<std::tuple<std::vector<std::int64_t>,
                                                        std::vector<std::int64_t>, int, int>>>& descs) {
        new (self) Layouts(make_layouts(descs));
      }, "descs"_a, "One (shape, strides, dtype code, element bytes) or None per tensor argument.");
  m.def("copy_launch", &copy_launch, "plan"_a, "layouts"_a, "dst"_a.none(), "src"_a.none(), "stream"_a.none(),
        "Launches plan on torch tensors matching its layouts (stream None: the current torch stream "
        "of their device). False, with nothing launched, otherwise.");
  m.def("rope_launch", &rope_launch, "plan"_a, "layouts"_a, "checked"_a, "q"_a.none(), "y"_a.none(), "k"_a.none(),
        "k_out"_a.none(), "cos"_a.none(), "sin"_a.none(), "positions"_a.none(), "offset"_a, "stream"_a.none(),
        "As copy_launch, for a rope plan's seven tensors (None where the plan has none).");
  m.def("copy_cached", &copy_cached, "dst"_a.none(), "src"_a.none(), "axes"_a.none(), "stream"_a.none(), "plan"_a.none(),
        "A one-shot copy or permute through the plan cached for these torch tensors' layouts (or "
        "`plan`, stored for them). False, with nothing launched, on a miss or other arguments.");
  m.def("rope_cached", &rope_cached, "q"_a.none(), "y"_a.none(), "k"_a.none(), "k_out"_a.none(), "cos"_a.none(), "sin"_a.none(),
        "positions"_a.none(), "offset"_a, "style"_a, "rotary_dim"_a, "inplace"_a, "inverse"_a, "checked"_a,
        "stream"_a.none(), "plan"_a.none(), "As copy_cached, for rope.");
  m.def("clear_torch_plans", [] {
    copy_plans().plans.clear();
    rope_plans().plans.clear();
  }, "Forgets the one-shot plans of the fast path.");
}

}  // namespace shapejit::python
