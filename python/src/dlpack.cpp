#include "dlpack.hpp"

#include <string>

#include "shapejit/core.hpp"

namespace shapejit::python {
namespace {

// The DLPack ABI (dlpack.h, versions 0.x and 1.x), declared here for the fields read.
struct DLDevice {
  std::int32_t device_type;
  std::int32_t device_id;
};
struct DLDataType {
  std::uint8_t code;
  std::uint8_t bits;
  std::uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  std::int32_t ndim;
  DLDataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;
  std::uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
struct DLManagedTensorVersioned {
  std::uint32_t major, minor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned*);
  std::uint64_t flags;
  DLTensor dl_tensor;
};

enum DLTypeCode : std::uint8_t { kInt = 0, kUInt = 1, kFloat = 2, kBfloat = 4 };

/// The shapejit dtype of a DLPack dtype, or -1.
int dtype_code(const DLDataType& t) {
  if (t.lanes != 1) return -1;
  const auto code = [](DType d) { return static_cast<int>(d); };
  switch (t.code) {
    case kInt:
      switch (t.bits) {
        case 8: return code(DType::i8);
        case 16: return code(DType::i16);
        case 32: return code(DType::i32);
        case 64: return code(DType::i64);
      }
      break;
    case kUInt:
      switch (t.bits) {
        case 8: return code(DType::u8);
        case 16: return code(DType::u16);
        case 32: return code(DType::u32);
        case 64: return code(DType::u64);
      }
      break;
    case kFloat:
      switch (t.bits) {
        case 16: return code(DType::f16);
        case 32: return code(DType::f32);
        case 64: return code(DType::f64);
      }
      break;
    case kBfloat:
      if (t.bits == 16) return code(DType::bf16);
      break;
  }
  return -1;
}

}  // namespace

DlpackView dlpack_view(nanobind::handle capsule) {
  PyObject* o = capsule.ptr();
  const DLTensor* t = nullptr;
  if (PyCapsule_IsValid(o, "dltensor_versioned")) {
    t = &static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(o, "dltensor_versioned"))->dl_tensor;
  } else if (PyCapsule_IsValid(o, "dltensor")) {
    t = &static_cast<DLManagedTensor*>(PyCapsule_GetPointer(o, "dltensor"))->dl_tensor;
  } else {
    throw Error(ErrorCode::invalid_argument,
                "not an unused DLPack capsule (a capsule named 'dltensor' or 'dltensor_versioned')");
  }
  if (t->ndim < 0) throw Error(ErrorCode::invalid_argument, "DLPack tensor with a negative rank");
  const auto rank = static_cast<std::size_t>(t->ndim);
  std::vector<std::int64_t> shape(t->shape, t->shape + rank);
  std::optional<std::vector<std::int64_t>> strides;
  if (t->strides != nullptr && rank > 0) strides.emplace(t->strides, t->strides + rank);
  const int elem_bytes = static_cast<int>(t->dtype.bits) * t->dtype.lanes / 8;
  const auto data = reinterpret_cast<std::uintptr_t>(t->data) + static_cast<std::uintptr_t>(t->byte_offset);
  return {data, std::move(shape), std::move(strides), dtype_code(t->dtype), elem_bytes, t->device.device_type,
          t->device.device_id};
}

}  // namespace shapejit::python
