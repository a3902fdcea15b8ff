// Rearrange kernel families: the specialization (only what changes the generated code) and the
// runtime arguments (extents, strides, divisors), chosen from a canonical form in units.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/spec.hpp"
#include "ops/rearrange/canonical.hpp"
#include "shapejit/rearrange.hpp"

namespace shapejit::plan {

enum class RearrangeFamily {
  copy,       ///< contiguous on both sides: the driver's device-to-device memcpy, no kernel
  row,        ///< same innermost dim, unit stride on both sides: rows copied with wide units
  transpose,  ///< innermost dims differ: shared-memory tiles of (dst-contiguous dim x src-contiguous dim)
  packed,     ///< transpose whose tile spans several small dims, or a whole small dim read/written linearly
  gather,     ///< anything else: walked in destination order, so writes stay coalesced
  skewed,     ///< transpose whose rows are misaligned for vectors on both sides (2- and 4-byte units): tiles skewed per row
  words,      ///< transpose of 1- and 2-byte units (groups of any dims) moved as aligned 32-bit words on both sides, misaligned rows funnel-shifted
  runs,       ///< tile over several dims, read along its source run and written along its destination run: loads scatter or stores gather
  segments,   ///< short rows (innermost dim shared) tiled over the dims that follow them on each side: 16-byte loads, 16-byte or word stores read from staged rows
};

/// "copy", "row", "transpose", "packed", "gather", "skewed", "words", "runs", "segments".
std::string_view family_name(RearrangeFamily family);

inline std::string_view field_text(RearrangeFamily family) { return family_name(family); }

// The facts that change the generated code. Extents, strides and divisors are runtime arguments
// (RearrangeKernelArgs), except in exact mode, where the codegen bakes them in too.
//
// row and gather: dim[0] is the innermost (walked by threads), dim[1..] the rows, innermost first;
// split rows put the row dim nearest in the source at dim[1] and tile it apart from the others;
// vector rows count tile_x and items_x in 16-byte destination vectors, not units.
// transpose and packed: dim[0, dims_a) = group A (contiguous in dst), then group B (contiguous in
// src; with b_chain, b_chain units contiguous in src and then dims past them: slab dims, that is
// outer dims the tile spans whole and a piece of the next, or the source chain's dims past A dims it
// passes; with a_pass, A holds a_chain destination-contiguous units and then dims past B's first
// a_pass units), then the outer dims, each innermost first; with skew_load, micro-tile rows of vec_b
// units sit at any alignment and vec_b need not divide B's extent; with skew_store (one A dim,
// 16-byte A vectors), a tile loads tile_a A units and stores tile_a - vec_a of each destination row;
// with skew_runs (store_linear of 16 bytes), runs of store_run B indices at any alignment are stored
// in aligned vectors, each shifted out of the two aligned staged vectors around its units.
// skewed: one dim in each group, tile_a and tile_b, and vec_a = vec_b = units per 16-byte vector.
// words: 1- or 2-byte units, dims_a and dims_b dims, tile_a and tile_b in units (tile_a a multiple of
// the units per store vector, tile_b of the units per word), pitch in words, skew_load, skew_store
// and store_words. segments:
// dim[0] = the shared row (segment units), then group A (dims_a dims that follow it in dst), group B
// (dims_b dims that follow it in src) and the outer dims; tile_a x tile_b rows, pitch in bytes.
#define SHAPEJIT_REARRANGE_SPEC_FIELDS(X)                                                          \
  X(RearrangeFamily, family, RearrangeFamily::copy)                                                \
  X(int, unit_bytes, 1)        /* bytes one kernel element moves (1, 2, 4, 8, 16) */               \
  X(int, threads, 256)         /* threads per block */                                             \
  X(int, num_dims, 1)          /* dims in RearrangeKernelArgs::dim */                              \
  X(bool, index64, false)      /* 64-bit index math */                                             \
  X(bool, bounds, false)       /* tiles can run past an extent, so accesses are checked */         \
  X(bool, exact, false)        /* extents and strides baked into the kernel */                     \
  X(int, tile_x, 1)            /* rows: threads along a row */                                     \
  X(int, items_x, 1)           /* rows: units (vector rows: vectors) per thread along a row */     \
  X(int, items_y, 1)           /* rows: rows per thread */                                         \
  X(int, tile_y1, 1)           /* split rows: rows of dim[2..] per tile */                         \
  X(bool, split_rows, false)                                                                       \
  X(bool, vector_rows, false)  /* row: aligned 16-byte destination vectors, sources shifted into them */ \
  X(bool, src_inner_unit, true) /* the innermost source stride is 1 (else a runtime stride) */     \
  X(bool, dst_inner_unit, true) /* the innermost destination stride is 1 */                        \
  X(int, dims_a, 1)                                                                                \
  X(int, dims_b, 1)                                                                                \
  X(int, tile_a, 1)            /* tile extent in units along A */                                  \
  X(int, tile_b, 1)            /* tile extent in units along B */                                  \
  X(int, vec_a, 1)             /* units per access along A (stores) */                             \
  X(int, vec_b, 1)             /* units per access along B (loads) */                              \
  X(int, pitch, 1)             /* shared-memory row length in units (one row per B index) */       \
  X(bool, swizzle, false)      /* XOR-swizzled rows (else padded to pitch) */                      \
  X(int, swizzle_period, 1)    /* A vectors the swizzle permutes (a power of two dividing a row) */ \
  X(int, swizzle_step, 1)      /* XOR of micro-tile row i: (i * step) % swizzle_period */          \
  X(int, load_linear, 0)       /* units per linear load when the tile's src runs span B whole */   \
  X(int, load_run, 0)          /* A indices per source run under load_linear */                  \
  X(int, store_linear, 0)      /* units per linear store when the tile's dst runs span A whole */  \
  X(int, store_run, 0)         /* B indices per destination run under store_linear */            \
  X(int, rotate_span, 0)       /* tiled, linear stores: units per span whose store vectors rotate by its index */ \
  X(int, min_blocks, 2)        /* blocks per SM the register budget must allow */                 \
  X(int, b_chain, 0)           /* tiled: B's source-contiguous units, when B holds dims past them */ \
  X(int, a_chain, 0)           /* tiled: A's destination-contiguous units before the B units it passes */ \
  X(int, a_pass, 0)            /* tiled: B's first units, whole in every tile, that A's chain passes */ \
  X(bool, fixed_a, false)      /* tiled: group A's table is the same for every tile (filled once) */ \
  X(bool, fixed_b, false)      /* tiled: group B's table is the same for every tile (filled once) */ \
  X(bool, a_first, false)      /* tiled, skewed, words: tiles counted along A first, else B */   \
  X(bool, skew_load, false)    /* words, tiled: source rows may be misaligned (loads funnel-shifted) */ \
  X(bool, skew_store, false)   /* words, tiled: destination rows may be misaligned (owned ranges skewed) */ \
  X(bool, skew_runs, false)    /* tiled, linear stores: runs at any alignment, in aligned 16-byte vectors shifted out of the staged tile */ \
  X(int, store_words, 1)       /* words, runs: 32-bit words per destination store vector (1, 2 or 4) */ \
  X(int, tile_dims, 0)         /* runs: dims the tile spans (dim[0, tile_dims), destination order) */ \
  X(int, dst_run_dims, 0)      /* runs: leading tile dims contiguous in dst */                     \
  X(int, src_run_dims, 0)      /* runs: leading dims of src_order contiguous in src */              \
  X(int, src_order, 0)         /* runs: tile dims in source order, 4 bits each, innermost lowest */ \
  X(int, tile_runs, 0)         /* runs: staged rows of pitch units per tile (the runs of the side staged) */ \
  X(bool, gather_stores, false) /* runs: source runs staged as they are, stores gather (else loads scatter) */ \
  X(int, segment, 0)           /* segments: units per row (dim[0]'s extent) */                     \
  X(bool, merge_src, false)    /* segments: one source run (one A dim, next after B whole in src) */ \
  X(bool, merge_dst, false)    /* segments: one destination run (one B dim, next after A whole in dst) */

struct RearrangeSpec {
  SHAPEJIT_SPEC_FIELDS(SHAPEJIT_REARRANGE_SPEC_FIELDS)
  bool operator==(const RearrangeSpec&) const = default;
};
SHAPEJIT_CHECK_SPEC_FIELDS(RearrangeSpec, SHAPEJIT_REARRANGE_SPEC_FIELDS)

/// A divisor with its fast-division magic numbers (valid for 32-bit numerators).
struct KernelDivisor {
  std::int64_t value = 1;
  std::uint32_t multiplier = 1;
  std::uint32_t shift = 0;
};

/// One dim of the kernel arguments. Mirrors `SjDim` in templates/rearrange_common.cu.
struct KernelDim {
  KernelDivisor extent;
  std::int64_t src_stride = 0;
  std::int64_t dst_stride = 0;
};

/// The kernel's runtime arguments, passed by value. Mirrors `SjArgs` in templates/rearrange_common.cu,
/// which declares only the spec's num_dims dims (the launch copies just that prefix).
struct RearrangeKernelArgs {
  std::int64_t num_tiles = 0;
  std::int64_t extent_a = 0;  ///< tiled: product of group A; rows: the innermost extent
  std::int64_t extent_b = 0;  ///< tiled: product of group B; rows: the number of rows (split: of dim[2..])
  KernelDivisor tiles_x;      ///< tiled: tiles along B; rows: tiles along a row
  KernelDivisor tiles_y;      ///< tiled: tiles along A; split rows: tiles along the rows of dim[2..]
  KernelDim dim[kMaxRearrangeRank + 1];
};

/// One planned kernel (or memcpy) for one pointer alignment.
struct RearrangeVariant {
  CanonicalForm form;   ///< canonical form in units
  RearrangeSpec spec;
  RearrangeKernelArgs args;
  std::uint32_t grid = 0;     ///< blocks (grid.x); tiles beyond it are walked by a grid-stride loop
  std::int64_t copy_bytes = 0;  ///< copy family: bytes for the memcpy
};

/// Builds `divisor` with its magic numbers (multiplier and shift only when it fits in 32 bits).
KernelDivisor make_kernel_divisor(std::int64_t divisor);

/// Classifies a canonical form in units and chooses its family, parameters and runtime arguments.
/// `src_align` and `dst_align`: alignment in bytes of the pointers the kernel starts from.
RearrangeVariant plan_variant(const CanonicalForm& units, bool exact, std::int64_t src_align, std::int64_t dst_align);

/// Every variant worth timing for one canonical form: plan_variant's first, then tiles of other
/// sizes and the other families that can move the form, each also at one, two and four tiles per
/// block (no two alike). Each is a correct plan of the form; measured planning picks among them.
std::vector<RearrangeVariant> candidate_variants(const CanonicalForm& units, bool exact, std::int64_t src_align,
                                                std::int64_t dst_align);

/// The specialization key: a hash of every spec field and, in exact mode, the baked extents and
/// strides. Kernels are registered under it.
SpecKey rearrange_key(const RearrangeSpec& spec, const RearrangeKernelArgs& args);

/// A short readable name of the kernel (family first), for labels and describe text; the fields
/// that matter to its family, and in exact mode the baked shape. The tile order shows where it is
/// not the family's order before it was planned (tuning records name kernels by label): `.af` on
/// tiled kernels counting along A, `.bf` on skewed and word tiles counting along B.
std::string kernel_label(const RearrangeSpec& spec, const RearrangeKernelArgs& args);

/// The runs family's tile extent of each tile dim (dim[0, tile_dims)): the dim's extent, or tile_a
/// and tile_b for the two runs' tiled dims; empty for the other families. Baked into the kernel.
std::vector<std::int64_t> runs_tile_extents(const RearrangeSpec& spec, const RearrangeKernelArgs& args);
// Bytes of a runs tile: its unit times its dims' tile extents.
std::int64_t runs_tile_bytes(const RearrangeSpec& spec, const RearrangeKernelArgs& args);

/// Bytes of RearrangeKernelArgs that the kernel of `spec` reads (the header plus num_dims dims).
std::size_t kernel_args_bytes(const RearrangeSpec& spec);

/// Shared memory a tiled kernel declares (0 for the other families).
int shared_bytes(const RearrangeSpec& spec);

/// Units of shared memory a tiled kernel of skewed runs stages (rearrange_tiled.cu's SMEM_UNITS): the
/// tile, rounded up to its 16-byte store vectors, and one vector more, which its last store may read.
int skewed_runs_staged_units(const RearrangeSpec& spec);

/// Bytes per destination store of a segment tile (rearrange_segments.cu's STORE_BYTES): 16-byte
/// vectors for rows of 8 bytes or more, which a vector may cut at up to two row starts, 32-bit words
/// for shorter rows.
int segment_store_bytes(const RearrangeSpec& spec);

}  // namespace shapejit::plan
