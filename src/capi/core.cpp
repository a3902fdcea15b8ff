#include <cstring>

#include "capi/guard.hpp"
#include "core/errors.hpp"

namespace shapejit::capi {
thread_local std::string t_last_error;

void set_last_error(const std::string& message) { t_last_error = message; }

TensorDesc to_desc(const sj_tensor_desc* desc, const char* argument) {
  if (desc == nullptr) invalid_argument("{} is NULL", argument);
  if (desc->rank < 0) invalid_argument("{}.rank is {}; it must be 0 or more", argument, desc->rank);
  if (desc->rank > 0 && desc->shape == nullptr) invalid_argument("{}.shape is NULL but rank is {}", argument, desc->rank);
  if (static_cast<unsigned>(desc->dtype) > static_cast<unsigned>(SJ_F64))
    invalid_argument("{}.dtype is {}, not an sj_dtype value", argument, static_cast<int>(desc->dtype));
  TensorDesc out;
  out.shape.assign(desc->shape, desc->shape + desc->rank);
  if (desc->strides != nullptr) out.strides.assign(desc->strides, desc->strides + desc->rank);
  out.dtype = static_cast<DType>(desc->dtype);
  out.elem_bytes = desc->elem_bytes;
  return out;
}

}  // namespace shapejit::capi

extern "C" {

const char* sj_last_error(void) { return shapejit::capi::t_last_error.c_str(); }

const char* sj_version(void) { return SHAPEJIT_VERSION; }

sj_status sj_describe_manifest_line(const char* line, int json, char* buffer, size_t capacity, size_t* length) {
  return shapejit::capi::guarded([&] {
    if (line == nullptr) shapejit::invalid_argument("line is NULL: pass a manifest line such as \"rearrange ...\"");
    const std::string text = shapejit::describe_manifest_line(line, json != 0);
    if (length != nullptr) *length = text.size();
    if (buffer == nullptr || capacity <= text.size())
      shapejit::invalid_argument("the description needs {} bytes with its NUL but the buffer has {}", text.size() + 1,
                                 buffer == nullptr ? 0 : capacity);
    std::memcpy(buffer, text.c_str(), text.size() + 1);
  });
}

void sj_set_offline(int offline) { shapejit::set_offline(offline != 0); }

void sj_set_record_file(const char* path) { shapejit::set_record_file(path ? path : ""); }

}  // extern "C"
