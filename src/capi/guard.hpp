// The C boundary: runs a C++ body, turns any exception into an sj_status and a thread-local message.
#pragma once

#include <exception>
#include <string>

#include "shapejit/core.hpp"
#include "shapejit/shapejit_core.h"

namespace shapejit::capi {

void set_last_error(const std::string& message);

template <typename Body>
sj_status guarded(Body&& body) noexcept {
  try {
    body();
    set_last_error("");
    return SJ_OK;
  } catch (const Error& e) {
    set_last_error(e.what());
    return static_cast<sj_status>(e.code());
  } catch (const std::bad_alloc&) {
    set_last_error("out of host memory");
    return SJ_INTERNAL;
  } catch (const std::exception& e) {
    set_last_error(e.what());
    return SJ_INTERNAL;
  } catch (...) {
    set_last_error("unknown error");
    return SJ_INTERNAL;
  }
}

/// Converts a C descriptor; rejects a NULL shape for rank > 0 and negative ranks.
TensorDesc to_desc(const sj_tensor_desc* desc, const char* argument);

}  // namespace shapejit::capi
