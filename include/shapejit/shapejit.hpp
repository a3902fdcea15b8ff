// shapejit C++ API: plan once, launch many. Include this header; it pulls in every operation.
//
// Errors are thrown as shapejit::Error. Streams are CUstream / cudaStream_t handles passed as void*
// (nullptr is the legacy default stream).
#pragma once

#include "shapejit/core.hpp"
#include "shapejit/rearrange.hpp"
#include "shapejit/rope.hpp"
#include "shapejit/hadamard.hpp"
