/* shapejit C API: hadamard, the grouped-head fast Walsh-Hadamard transform. See
 * shapejit/hadamard.hpp for the semantics and the matrix; this mirrors it. */
#ifndef SHAPEJIT_HADAMARD_H
#define SHAPEJIT_HADAMARD_H

#include "shapejit/shapejit_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A hadamard call's shapes, strides and dtype. A y of rank 0 means contiguous (x itself for an
 *  in-place plan). */
typedef struct sj_hadamard_desc {
  sj_tensor_desc x; /**< [..., heads, dhead], rank 2 to 6; f16 bf16 f32 f64; dhead stride 1 */
  sj_tensor_desc y; /**< x's shape and dtype, any non-overlapping strides with dhead stride 1 */
  int64_t group;    /**< G, heads transformed together (divides heads); n = G * dhead */
  int has_scale;    /**< nonzero: use `scale`; zero: 1/sqrt(n) */
  double scale;
  int inplace;        /**< nonzero: y is x */
  int check_pointers; /**< nonzero: each launch first verifies both pointers (see hadamard.hpp) */
} sj_hadamard_desc;

/** Device pointers of one launch. */
typedef struct sj_hadamard_pointers {
  const void* x;
  void* y; /**< x itself for an in-place plan */
} sj_hadamard_pointers;

/** An opaque planned hadamard. */
typedef struct sj_hadamard_plan_s* sj_hadamard_plan;

/** Validates and plans `desc`; on success `*plan` holds a plan to launch and destroy (NULL on failure). */
sj_status sj_hadamard_plan_create(sj_hadamard_plan* plan, const sj_hadamard_desc* desc);

/** Launches `plan` on `stream` (a CUstream; NULL is the legacy default stream), on the stream's device. */
sj_status sj_hadamard_plan_launch(sj_hadamard_plan plan, const sj_hadamard_pointers* pointers, void* stream);

/** Frees a plan (NULL is ignored). */
sj_status sj_hadamard_plan_destroy(sj_hadamard_plan plan);

/** One-shot hadamard through an internal plan cache. */
sj_status sj_hadamard(const sj_hadamard_desc* desc, const sj_hadamard_pointers* pointers, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* SHAPEJIT_HADAMARD_H */
