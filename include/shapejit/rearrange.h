/* shapejit C API: rearrange, an arbitrary-rank strided copy (permute, transpose, slice, reversal,
 * broadcast-expand) for any element type or opaque element of 1 to 64 bytes. Every call returns an
 * sj_status; on failure sj_last_error() says which argument was wrong and what would be accepted. */
#ifndef SHAPEJIT_REARRANGE_H
#define SHAPEJIT_REARRANGE_H

#include "shapejit/shapejit_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The most dimensions a rearrange accepts. */
#define SJ_REARRANGE_MAX_RANK 64

/** An opaque, immutable rearrange plan; safe to launch from several threads at once. */
typedef struct sj_rearrange_plan_t* sj_rearrange_plan;

/** Planning options; pass NULL for the defaults (exact = 0, assumed_alignment = 16,
 *  check_pointers = 0, tune = 0). */
typedef struct sj_rearrange_options {
  /** Nonzero: bake every extent and stride into the kernel (one compile per shape). */
  int exact;
  /** Alignment in bytes the plan assumes for both base pointers: a power of two from 1 to 16.
   *  Launching with less aligned pointers is safe (a narrower variant runs). */
  size_t assumed_alignment;
  /** Nonzero: each launch first verifies that dst and src are device memory of the stream's device
   *  (or managed memory) and that each view lies inside its pointer's allocation; a violation is
   *  SJ_INVALID_ARGUMENT naming the argument, and nothing is launched. */
  int check_pointers;
  /** Nonzero: measured planning. The candidate kernels are timed on scratch buffers on the current
   *  device and the fastest is launched; the choice is kept in a tuning record in the cache
   *  directory, which later plans with `tune` use without measuring (see RearrangeOptions::tune). */
  int tune;
} sj_rearrange_options;

/** Plans copying every logical element of `src` into `dst`: equal shapes and element sizes, each
 *  side with its own signed strides in elements (src strides may be 0 to broadcast; dst elements
 *  must be distinct). Writes the new plan to *plan (NULL on failure). `options` may be NULL. */
sj_status sj_rearrange_plan_create(sj_rearrange_plan* plan, const sj_tensor_desc* dst, const sj_tensor_desc* src,
                                   const sj_rearrange_options* options);

/** Enqueues the planned copy on `stream` (a CUstream / cudaStream_t, NULL for the default stream).
 *  It runs on the stream's device whatever the current device (the default stream: the current
 *  context's device).
 *  `dst` and `src` are device pointers of any alignment; their memory must not overlap unless they
 *  are the same pointer with the same layout (then nothing happens). */
sj_status sj_rearrange_plan_launch(sj_rearrange_plan plan, void* dst, const void* src, void* stream);

/** The plan's description (canonical form, family, parameters, launch shape, key) as a NUL-terminated
 *  string owned by the plan, valid until it is destroyed; NULL if `plan` is NULL. */
const char* sj_rearrange_plan_describe(sj_rearrange_plan plan);

/** Releases a plan (NULL is accepted). Launches already enqueued are unaffected. */
sj_status sj_rearrange_plan_destroy(sj_rearrange_plan plan);

/** One-shot: plans (through an internal plan cache keyed by both descriptors) and launches. */
sj_status sj_rearrange(void* dst, const sj_tensor_desc* dst_desc, const void* src, const sj_tensor_desc* src_desc,
                       void* stream);

#ifdef __cplusplus
}
#endif

#endif /* SHAPEJIT_REARRANGE_H */
