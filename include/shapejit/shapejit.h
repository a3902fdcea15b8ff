/* shapejit C API: plan once, launch many. No C++ exception crosses this boundary: every call returns
 * an sj_status and sj_last_error() holds the message of the last failure on the calling thread.
 * Streams are CUstream / cudaStream_t handles passed as void* (NULL is the legacy default stream). */
#ifndef SHAPEJIT_H
#define SHAPEJIT_H

#include "shapejit/shapejit_core.h"
#include "shapejit/rearrange.h"
#include "shapejit/rope.h"
#include "shapejit/hadamard.h"

#endif /* SHAPEJIT_H */
