// rearrange tiled: the transpose and packed families. Group A (dims contiguous in the destination,
// starting at its stride-1 dim) and group B (the source's innermost dims) span a TILE_A x TILE_B
// tile: read from src along B, staged in shared memory (row b holds the tile's A units of B index b),
// written to dst along A. dim[0, DIMS_A) = A, then DIMS_B dims of B, then the outer dims, each
// innermost first. Composite groups look their cross offsets up in per-tile tables. With B_CHAIN, B
// holds dims past its B_CHAIN source-contiguous units (slab dims: outer dims the tile spans whole, and
// a piece of the next, so that a small tile still gives every thread work; or the source chain past A
// dims that the tiles span whole), and B's source offsets come from a table too. With A_PASS, A's
// destination chain passes B's first A_PASS units (whole in every tile): A's first A_CHAIN units,
// then those, then A's next dims are back to back in dst, so shared memory holds the tile in
// destination order and the stores are linear, runs of whole A tiles. With
// FIXED_A (FIXED_B) the group's tiles start where adding an index inside the tile carries into no
// dim the tile does not span (a whole group, or tiles of whole inner dims times a piece of the next):
// the table then holds the offsets of the tile's own indices, filled once per block, and each tile
// adds the offsets of its first index to its base.
//
// Loads: micro-tiles of VEC_A rows x VEC_B units, transposed in registers into VEC_B vectors of
// VEC_A units (SKEW_LOAD: 1- and 2-byte rows at any alignment, odd source pitches or a misaligned
// pointer, each funnel-shifted out of the two aligned VEC_B-unit vectors around it), or
// (LOAD_LINEAR, the tile spanning B whole) runs of LOAD_RUN A indices that are contiguous in the
// source, copied as they are, so shared memory then holds one row per A index. Stores: VEC_A-unit
// vectors along A, or (STORE_LINEAR, the tile spanning A whole) runs of STORE_RUN B indices that are
// contiguous in the destination. With SKEW_STORE (one A dim, 16-byte A vectors, destination rows at
// any alignment), destination row b owns, in the tile at a0, the A range [a0 - s(b), a0 + STEP_A -
// s(b)), s(b) its misalignment to VEC_A units: every store is an aligned vector except at a row's
// two ends, shifted out of the two staged vectors around it. The tile loads TILE_A = STEP_A + VEC_A
// A indices from a0 - VEC_A, and tiles step by STEP_A along A. With SKEW_RUNS (linear stores whose
// runs sit at any alignment), each run is stored in aligned 16-byte vectors, each shifted out of the
// two aligned staged vectors around its units; a run's ends store only their bytes inside it.
constexpr int LEAD_A = SKEW_STORE ? VEC_A : 0;  // A indices a tile loads before a0
constexpr int STEP_A = TILE_A - LEAD_A;          // A indices a tile stores per destination row
static_assert(!SKEW_STORE || (DIMS_A == 1 && VEC_A * UNIT_BYTES == 16 && !STORE_LINEAR && !LOAD_LINEAR &&
                              A_PASS == 0 && !SKEW_LOAD && BOUNDS && TILE_A % VEC_A == 0 && STEP_A >= VEC_A),
              "skewed stores: one A dim whose 16-byte vectors the tile loads and stores by micro-tile");
constexpr int MICRO_A = TILE_A / VEC_A;
constexpr int MICRO_B = TILE_B / VEC_B;
constexpr int MICRO = MICRO_A * MICRO_B;
constexpr int MICRO_PER_THREAD = (MICRO + THREADS - 1) / THREADS;
constexpr int STORE_MICRO_A = STEP_A / VEC_A;  // store vectors per destination row of a tile
constexpr int STORE_VECTORS = TILE_B * STORE_MICRO_A;
constexpr int STORES_PER_THREAD = (STORE_VECTORS + THREADS - 1) / THREADS;
constexpr int LOAD_VEC = LOAD_LINEAR > 0 ? LOAD_LINEAR : 1;
constexpr int LOADS_LINEAR_PER_THREAD = (TILE_A * TILE_B / LOAD_VEC + THREADS - 1) / THREADS;
constexpr int STORE_VEC = STORE_LINEAR > 0 ? STORE_LINEAR : 1;
constexpr int STORES_LINEAR_PER_THREAD = (TILE_A * TILE_B / STORE_VEC + THREADS - 1) / THREADS;
// Linear stores' destination runs: STORE_RUN B indices of TILE_A units each, RUNS_PER_TILE per tile.
constexpr int STORE_RUN_UNITS = (STORE_RUN > 0 ? STORE_RUN : 1) * TILE_A;
constexpr int RUNS_PER_TILE = TILE_B / (STORE_RUN > 0 ? STORE_RUN : 1);
static_assert(!SKEW_RUNS || (STORE_VEC * UNIT_BYTES == 16 && !SKEW_STORE && !LOAD_LINEAR && ROTATE_SPAN == 0 &&
                             TILE_B % STORE_RUN == 0),
              "skewed runs: linear 16-byte stores over whole runs of micro-tile loads");
constexpr int FIRST_OUTER = DIMS_A + DIMS_B;
// The low-register variant (-DSJ_LOW_REGISTERS=1, compiled where ptxas spills this source): the
// store pass of micro-tile vectors reads the thread index afresh in every tile and gathers its
// vectors four at a time; linear store passes read it afresh too.
#ifndef SJ_LOW_REGISTERS
#define SJ_LOW_REGISTERS 0
#endif
constexpr bool LOW_REGISTERS = SJ_LOW_REGISTERS;
constexpr int STORE_BATCH = LOW_REGISTERS ? 4 : STORES_PER_THREAD;
// Whether the last pass of a thread loop has idle threads (else its range check is left out).
constexpr bool MICRO_RAGGED = MICRO % THREADS != 0;
constexpr bool STORES_RAGGED = STORE_VECTORS % THREADS != 0;
constexpr bool ROWS_BY_A = LOAD_LINEAR > 0;  // shared memory in source order: row a holds B indices
// Shared memory: the staged rows (skewed runs: and the aligned vector after them, which the last
// store may read).
constexpr int SMEM_UNITS = SKEW_RUNS ? (TILE_A * TILE_B + STORE_VEC - 1) / STORE_VEC * STORE_VEC + STORE_VEC
                                     : (ROWS_BY_A ? TILE_A : TILE_B) * PITCH;
// Tables that change per tile are double-buffered: the next tile's are filled during this one.
constexpr bool TABLE_A = DIMS_A > 1, TABLE_B = DIMS_B > 1;
constexpr int SETS_A = FIXED_A ? 1 : 2, SETS_B = FIXED_B ? 1 : 2;

typedef sj_bytes<VEC_A * UNIT_BYTES> VecA;
typedef sj_bytes<VEC_B * UNIT_BYTES> VecB;
typedef sj_bytes<LOAD_VEC * UNIT_BYTES> VecLoad;
typedef sj_bytes<STORE_VEC * UNIT_BYTES> VecStore;
// Micro-tiles of 1- and 2-byte units whose sides hold whole 32-bit words are transposed in blocks of
// WORD_UNITS x WORD_UNITS units by byte permutes.
constexpr int WORD_UNITS = UNIT_BYTES <= 2 ? 4 / UNIT_BYTES : 1;
constexpr bool WORD_TRANSPOSE = UNIT_BYTES <= 2 && VEC_A % WORD_UNITS == 0 && VEC_B % WORD_UNITS == 0;
constexpr int WORDS_A = WORD_TRANSPOSE ? VEC_A / WORD_UNITS : 1, WORDS_B = WORD_TRANSPOSE ? VEC_B / WORD_UNITS : 1;
union PackA { VecA v; Unit u[VEC_A]; unsigned w[WORDS_A]; };
union PackB { VecB v; Unit u[VEC_B]; unsigned w[WORDS_B]; };
constexpr int SKEW_WORDS = VEC_B * UNIT_BYTES >= 4 ? VEC_B * UNIT_BYTES / 4 : 1;
static_assert(!SKEW_LOAD || (VEC_B * UNIT_BYTES >= 4 && !LOAD_LINEAR && B_CHAIN == 0),
              "skewed micro-tile rows are whole words along a source-contiguous B");
union SkewRow { VecB v; unsigned w[SKEW_WORDS]; };

// Shared-memory place of the unit that linear stores read at tile offset l. With ROTATE_SPAN, the
// store vectors of each span of ROTATE_SPAN units rotate by the span's index: rows back to back put
// a warp's staging writes a multiple of 128 bytes apart, in one bank, which the rotation spreads.
static_assert(ROTATE_SPAN == 0 || (STORE_LINEAR > 0 && !LOAD_LINEAR && !SWIZZLE && ROTATE_SPAN % STORE_VEC == 0 &&
                                   (ROTATE_SPAN & (ROTATE_SPAN - 1)) == 0 && STORE_VEC % VEC_A == 0 &&
                                   TILE_A * TILE_B % ROTATE_SPAN == 0),
              "rotated spans: a power of two of whole store vectors, staged vectors inside them, tiling the tile");
__device__ __forceinline__ int sj_rotated(int l) {
  if constexpr (ROTATE_SPAN > 0) {
    constexpr unsigned VECTORS = ROTATE_SPAN / STORE_VEC;  // powers of two: shifts and masks
    const unsigned u = l, span = u / ROTATE_SPAN, vector = u % ROTATE_SPAN / STORE_VEC;
    return (int)(span * ROTATE_SPAN + (vector + span) % VECTORS * STORE_VEC + u % STORE_VEC);
  }
  return l;
}

// Shared-memory position of tile element (a, b). Swizzled rows XOR the A-vector index with the
// micro-tile row times SWIZZLE_STEP. The planner picks the padding or swizzle whose micro-tile stores
// (down a column) and row reads take the fewest bank wavefronts.
__device__ __forceinline__ int sj_smem_pos(int a, int b) {
  if constexpr (A_PASS > 0) {
    const int a_low = a % A_CHAIN, b_low = b % A_PASS;
    return sj_rotated(a_low + A_CHAIN * b_low + A_PASS * (a - a_low) + TILE_A * (b - b_low));
  }
  if (ROWS_BY_A) return a * PITCH + b;
  if (SWIZZLE) return b * PITCH + (((a / VEC_A) ^ (b / VEC_B * SWIZZLE_STEP % SWIZZLE_PERIOD)) * VEC_A) + a % VEC_A;
  return sj_rotated(b * PITCH + a);
}

// The thread index, read where it is used. Index math derived from threadIdx.x is the same in every
// tile, so nvcc hoists it out of the tile loop and holds it in registers (a tile of 16 store vectors
// per thread spilled 300 bytes at 80 registers); index math from a volatile read is redone per tile.
__device__ __forceinline__ int sj_thread_fresh() {
  int thread;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(thread));
  __builtin_assume(thread >= 0 && thread < THREADS);
  return thread;
}

// One pass of the block's threads (this one is `thread`) over a run of `count` units in VEC-unit
// pieces: whole pieces go to whole(pass, first unit), the ragged end unit by unit to part(unit).
template <int VEC, int PASSES, typename Whole, typename Part>
__device__ __forceinline__ void sj_run_pass(unsigned thread, Index count, Whole whole, Part part) {
#pragma unroll
  for (int r = 0; r < PASSES; ++r) {
    const int l = (thread + r * THREADS) * VEC;
    if (l + VEC <= count) {
      whole(r, l);
    } else {
#pragma unroll
      for (int u = 0; u < VEC; ++u)
        if (l + u < count) part(l + u);
    }
  }
}

// Composite groups: the source offsets of the tile's A indices and the destination offsets of its
// B indices (with B_CHAIN their source offsets too), computed by the whole block.
struct SjTables {
  Index* a;      // source offsets of A indices
  Index* b;      // destination offsets of B indices
  Index* b_src;  // source offsets of B indices (B_CHAIN)
};

// `first`: the block's first fill, which also fills the fixed tables (with the offsets of indices
// from 0).
__device__ __forceinline__ void sj_fill_tables(const SjArgs& args, const SjTile& tile, const SjTables& table,
                                               bool first) {
  if (TABLE_A && (first || !FIXED_A))
    sj_block_for<TILE_A>([&](int i) {
      Index src_offset, dst_offset;
      sj_offsets(args, 0, DIMS_A, FIXED_A ? i : min(tile.a0 + i, sj_extent_a(args) - 1), src_offset, dst_offset);
      table.a[i] = src_offset;
    });
  if (TABLE_B && (first || !FIXED_B))
    sj_block_for<TILE_B>([&](int i) {
      Index src_offset, dst_offset;
      sj_offsets(args, DIMS_A, DIMS_B, FIXED_B ? i : min(tile.b0 + i, sj_extent_b(args) - 1), src_offset, dst_offset);
      table.b[i] = dst_offset;
      if (B_CHAIN > 0) table.b_src[i] = src_offset;
    });
}

// A tile's source units held in registers between its loads and its staging in shared memory. A
// skewed row holds the aligned vector at or before its first unit (micro), the next one (high; not
// with SKEW_SHUFFLE, see sj_skewed_high), and its misalignment in units (shift; -1 where the row was
// not loaded, 0 where it was read unit by unit).
constexpr int SKEWED_MICRO = SKEW_LOAD ? MICRO_PER_THREAD : 1, SKEWED_ROWS = SKEW_LOAD ? VEC_A : 1;
// Rows of 8 micro-tiles or more along B take the next aligned vector from the next lane: the lanes at
// a row's end, which read their own, are one in MICRO_B (and each warp's last). (H200, skewed-load
// lines of seeds 4435-4474 and of earlier seeds, every row shuffled: at 8 to 512 micro-tiles a row,
// 67 lines 59.8% -> 63.9% of copy, 40 up and 7 down by 3 points or more; at 2 to 6, 55 lines 55.9% ->
// 50.0%, 37 down, a sixth to a half of their lanes reading late in every tile.)
constexpr bool SKEW_SHUFFLE = SKEW_LOAD && MICRO_B >= 8;
static_assert(!SKEW_SHUFFLE || THREADS % 32 == 0, "shuffled skewed rows: blocks of whole warps");
struct SjLoaded {
  VecLoad linear[LOAD_LINEAR > 0 ? LOADS_LINEAR_PER_THREAD : 1];
  PackB micro[LOAD_LINEAR > 0 ? 1 : MICRO_PER_THREAD][VEC_A];
  VecB high[SKEWED_MICRO][SKEWED_ROWS];
  int shift[SKEWED_MICRO][SKEWED_ROWS];
};

// The source units the tensor spans from the kernel's src pointer, [first, end).
struct SjSpan {
  Index first, end;
};
__device__ __forceinline__ SjSpan sj_src_span(const SjArgs& args) {
  SjSpan span{0, 1};
#pragma unroll
  for (int k = 0; k < NUM_DIMS; ++k) {
    const Index reach = (sj_extent(args, k) - 1) * sj_src_stride(args, k);
    (reach < 0 ? span.first : span.end) += reach;
  }
  return span;
}

// Loads the skewed micro-tile row at unit offset `at`: the aligned vectors around it (the first only
// with SKEW_SHUFFLE) where they lie inside the tensor's span (reading past the row's B range, never
// past the tensor), else unit by unit with a shift of 0 (at the span's two ends). Nothing here waits
// for a load: the shifts are made at staging (sj_unskew).
__device__ __forceinline__ void sj_load_skewed(const Unit* __restrict__ s, unsigned src_address, Index at,
                                               const SjSpan& span, PackB& low, VecB& high, int& shift) {
  const int m = sj_misalignment(src_address, at, VEC_B);
  if (at - m >= span.first && at - m + (m ? 2 : 1) * VEC_B <= span.end) {
    low.v = *reinterpret_cast<const VecB*>(s + (at - m));
    if (m && !SKEW_SHUFFLE) high = *reinterpret_cast<const VecB*>(s + (at - m + VEC_B));
    shift = m;
  } else {
#pragma unroll
    for (int j = 0; j < VEC_B; ++j)
      if (at + j < span.end) low.u[j] = s[at + j];
    shift = 0;
  }
}

// Units [shift, shift + VEC_B) of the pair (low, high): word shifts by halving steps, then a funnel
// shift within words, so the words stay in registers.
__device__ __forceinline__ PackB sj_unskew(const PackB& low, const VecB& high, int shift) {
  SkewRow lo, hi, out;
  lo.v = low.v;
  hi.v = high;
  unsigned w[2 * SKEW_WORDS];
#pragma unroll
  for (int k = 0; k < SKEW_WORDS; ++k) {
    w[k] = lo.w[k];
    w[SKEW_WORDS + k] = hi.w[k];
  }
  const int bytes = shift * UNIT_BYTES;
#pragma unroll
  for (int step = SKEW_WORDS / 2; step >= 1; step /= 2)
    if ((bytes / 4) & step)
#pragma unroll
      for (int k = 0; k + step < 2 * SKEW_WORDS; ++k) w[k] = w[k + step];
#pragma unroll
  for (int k = 0; k < SKEW_WORDS; ++k) out.w[k] = __funnelshift_r(w[k], w[k + 1], (unsigned)(bytes % 4 * 8));
  PackB row;
  row.v = out.v;
  return row;
}

// Units of the tile's linear runs (LOAD_LINEAR) or of its rows' B runs that lie inside the tensor.
__device__ __forceinline__ Index sj_linear_count(const SjArgs& args, const SjTile& tile) {
  return (BOUNDS ? min((Index)TILE_A, sj_extent_a(args) - tile.a0) : (Index)TILE_A) * TILE_B;
}

// The source offset of the tile's A index a under linear loads (A's stride is TILE_B when A is one
// dim). In 64 bits: ptxas took 42 registers for the 32-bit product where it takes 31 for this one.
__device__ __forceinline__ long long sj_linear_src_a(const SjTile& tile, const SjTables& table, int a) {
  return DIMS_A > 1 ? table.a[a] : (tile.a0 + a) * TILE_B;
}

// Micro-tile r's row i of this thread: whether it lies inside the tensor, and what locates it in
// the source (sj_micro_row_at, to be read only inside: the idle lanes of a ragged pass index past A's
// table).
struct SjMicroRow {
  bool inside;
  Index a, src_b;  // its A index and the source offset of its B index
  int la;          // its A index in the tile
};
__device__ __forceinline__ SjMicroRow sj_micro_row(const SjArgs& args, const SjTile& tile, const SjTables& table,
                                                   int r, int i) {
  const int m = threadIdx.x + r * THREADS;
  const int la = m / MICRO_B * VEC_A, lb = m % MICRO_B * VEC_B;
  const Index src_b = B_CHAIN > 0  ? table.b_src[lb]
                      : DIMS_B > 1 ? tile.b0 + lb
                                   : (tile.b0 + lb) * sj_src_stride(args, DIMS_A);
  // Bounds as the rows left below the tensor's A extent, so each row's check is one compare (and,
  // with skewed stores, the rows before A's first).
  const Index a_first = tile.a0 - LEAD_A + la;
  const Index rows_a = sj_extent_a(args) - a_first;
  const bool inside = (!MICRO_RAGGED || m < MICRO) & (!BOUNDS || tile.b0 + lb < sj_extent_b(args)) &
                      (!BOUNDS || i < rows_a) & (!SKEW_STORE || a_first + i >= 0);
  return {inside, a_first + i, src_b, la + i};
}
__device__ __forceinline__ Index sj_micro_row_at(const SjArgs& args, const SjTile& tile, const SjTables& table,
                                                 const SjMicroRow& row) {
  return tile.src_base + (DIMS_A > 1 ? table.a[row.la] : row.a * sj_src_stride(args, 0)) + row.src_b;
}

// Issues the tile's loads; nothing waits for them until sj_stage.
__device__ __forceinline__ void sj_load(const SjArgs& args, const Unit* __restrict__ s, unsigned src_address,
                                        const SjSpan& span, const SjTile& tile, const SjTables& table, SjLoaded& in) {
  if (LOAD_LINEAR && LOAD_RUN == TILE_A) {
    // The tile's rows are back to back in src (A continues B): one run.
    const Unit* run = s + (tile.src_base + sj_linear_src_a(tile, table, 0));
    sj_run_pass<LOAD_VEC, LOADS_LINEAR_PER_THREAD>(
        threadIdx.x, sj_linear_count(args, tile),
        [&](int r, int l) { in.linear[r] = *reinterpret_cast<const VecLoad*>(run + l); },
        [](int) {});  // the ragged end is read in sj_stage
  } else if (LOAD_LINEAR) {
    // Runs of LOAD_RUN rows span whole A dims, so the count is a multiple of RUN_UNITS and of
    // LOAD_VEC: no piece is ragged.
    constexpr int RUN_UNITS = (LOAD_RUN > 0 ? LOAD_RUN : 1) * TILE_B;
    sj_run_pass<LOAD_VEC, LOADS_LINEAR_PER_THREAD>(
        threadIdx.x, sj_linear_count(args, tile),
        [&](int r, int l) {
          const Index at = tile.src_base + sj_linear_src_a(tile, table, l / RUN_UNITS * LOAD_RUN) + l % RUN_UNITS;
          in.linear[r] = *reinterpret_cast<const VecLoad*>(s + at);
        },
        [](int) {});
  } else {
    if constexpr (SKEW_LOAD)
#pragma unroll
      for (int r = 0; r < MICRO_PER_THREAD; ++r)
#pragma unroll
        for (int i = 0; i < VEC_A; ++i) in.shift[r][i] = -1;
#pragma unroll
    for (int r = 0; r < MICRO_PER_THREAD; ++r) {
#pragma unroll
      for (int i = 0; i < VEC_A; ++i) {
        const SjMicroRow row = sj_micro_row(args, tile, table, r, i);
        if (!row.inside) continue;
        const Index at = sj_micro_row_at(args, tile, table, row);
        if constexpr (SKEW_LOAD)
          sj_load_skewed(s, src_address, at, span, in.micro[r][i], in.high[r][i], in.shift[r][i]);
        else
          in.micro[r][i].v = *reinterpret_cast<const VecB*>(s + at);
      }
    }
  }
}

// The aligned vector after skewed row i of micro-tile r. With SKEW_SHUFFLE, the next lane's loaded
// vector where that lane holds the same row's next micro-tile loaded the same way (every lane but
// those at a tile row's or a warp's end), else read here, once the tile's other loads arrived: each
// aligned vector is read once, except those past a tile row's end, and held in one lane's registers.
// Every lane of the warp calls this.
__device__ __forceinline__ VecB sj_skewed_high(const SjArgs& args, const Unit* __restrict__ s, const SjTile& tile,
                                               const SjTables& table, const SjLoaded& in, int r, int i) {
  if (!SKEW_SHUFFLE) return in.high[r][i];
  SkewRow loaded, next;
  loaded.v = in.micro[r][i].v;
#pragma unroll
  for (int k = 0; k < SKEW_WORDS; ++k) next.w[k] = __shfl_down_sync(0xffffffffu, loaded.w[k], 1);
  const int shift = in.shift[r][i], next_shift = __shfl_down_sync(0xffffffffu, shift, 1);
  const int m = threadIdx.x + r * THREADS;
  const bool next_holds = threadIdx.x % 32 != 31 && (m + 1) % MICRO_B != 0 && next_shift == shift;
  if (shift > 0 && !next_holds) {
    const Index at = sj_micro_row_at(args, tile, table, sj_micro_row(args, tile, table, r, i));
    next.v = *reinterpret_cast<const VecB*>(s + (at - shift + VEC_B));
  }
  return next.v;
}

// Stages one micro-tile, its VEC_A rows of VEC_B units as the source holds them, transposed in
// registers into VEC_B vectors of VEC_A units.
__device__ __forceinline__ void sj_stage_micro(const PackB (&rows)[VEC_A], int la, int lb, Unit* smem) {
  if constexpr (WORD_TRANSPOSE) {
#pragma unroll
    for (int jw = 0; jw < WORDS_B; ++jw) {
      PackA out[WORD_UNITS];
#pragma unroll
      for (int iw = 0; iw < WORDS_A; ++iw) {
        unsigned block[WORD_UNITS], columns[WORD_UNITS];
#pragma unroll
        for (int k = 0; k < WORD_UNITS; ++k) block[k] = rows[iw * WORD_UNITS + k].w[jw];
        sj_transpose_block(block, columns);
#pragma unroll
        for (int k = 0; k < WORD_UNITS; ++k) out[k].w[iw] = columns[k];
      }
#pragma unroll
      for (int k = 0; k < WORD_UNITS; ++k)
        *reinterpret_cast<VecA*>(&smem[sj_smem_pos(la, lb + jw * WORD_UNITS + k)]) = out[k].v;
    }
  } else {
#pragma unroll
    for (int j = 0; j < VEC_B; ++j) {
      PackA out;
#pragma unroll
      for (int i = 0; i < VEC_A; ++i) out.u[i] = rows[i].u[j];
      *reinterpret_cast<VecA*>(&smem[sj_smem_pos(la, lb + j)]) = out.v;
    }
  }
}

// Writes loaded units into shared memory: as they came (LOAD_LINEAR), or micro-tiles transposed in
// registers into VEC_B vectors of VEC_A units.
__device__ __forceinline__ void sj_stage(const SjArgs& args, const Unit* __restrict__ s, const SjTile& tile,
                                         const SjTables& table, const SjLoaded& in, Unit* smem) {
  if (LOAD_LINEAR) {
    const Unit* run = s + (tile.src_base + sj_linear_src_a(tile, table, 0));
    sj_run_pass<LOAD_VEC, LOADS_LINEAR_PER_THREAD>(
        threadIdx.x, sj_linear_count(args, tile),
        [&](int r, int l) { *reinterpret_cast<VecLoad*>(&smem[l]) = in.linear[r]; },
        [&](int i) {
          if (LOAD_RUN == TILE_A) smem[i] = run[i];
        });
  } else {
#pragma unroll
    for (int r = 0; r < MICRO_PER_THREAD; ++r) {
      const int m = threadIdx.x + r * THREADS;
      const int la = m / MICRO_B * VEC_A, lb = m % MICRO_B * VEC_B;
      if constexpr (SKEW_LOAD) {
        PackB rows[VEC_A];
#pragma unroll
        for (int i = 0; i < VEC_A; ++i)
          rows[i] = sj_unskew(in.micro[r][i], sj_skewed_high(args, s, tile, table, in, r, i), max(in.shift[r][i], 0));
        if (!MICRO_RAGGED || m < MICRO) sj_stage_micro(rows, la, lb, smem);
      } else if (!MICRO_RAGGED || m < MICRO) {
        sj_stage_micro(in.micro[r], la, lb, smem);
      }
    }
  }
}

// The destination offset of the tile's B index b0 + lb, from the tile's base.
__device__ __forceinline__ Index sj_dst_b(const SjArgs& args, const SjTile& tile, const SjTables& table, int lb) {
  return DIMS_B > 1 ? table.b[lb] : (tile.b0 + lb) * sj_dst_stride(args, DIMS_A);
}

// Writes the staged tile to dst: runs of STORE_RUN rows (STORE_LINEAR: A is TILE_A == extent_a units
// and the run's B dims continue it in dst, or A passes B's first dims), each starting at its first B
// index's offset, or VEC_A-unit vectors along A.
__device__ __forceinline__ void sj_store(const SjArgs& args, Unit* __restrict__ d, unsigned dst_address,
                                         const SjTile& tile, const SjTables& table, const Unit* smem) {
  if constexpr (SKEW_STORE) {
    // Vector j of row lb: A indices [a0 - s + j * VEC_A, + VEC_A), staged at place LEAD_A - s + j *
    // VEC_A, so in staged vectors j and j + 1.
    const Index extent_a = sj_extent_a(args), rows_b = sj_extent_b(args) - tile.b0;
#pragma unroll
    for (int r = 0; r < STORES_PER_THREAD; ++r) {
      const int k = threadIdx.x + r * THREADS;
      const int la = k % STORE_MICRO_A * VEC_A, lb = k / STORE_MICRO_A;
      if ((STORES_RAGGED && k >= STORE_VECTORS) || lb >= rows_b) continue;
      const Index row = tile.dst_base + sj_dst_b(args, tile, table, lb);
      const int shift = sj_misalignment(dst_address, row + tile.a0, VEC_A);
      const Index x = tile.a0 - shift + la;
      // In 16-byte types, which the A vectors are here (so this compiles for every tile).
      const sj_bytes<16> low = *reinterpret_cast<const sj_bytes<16>*>(&smem[sj_smem_pos(la, lb)]);
      const sj_bytes<16> high = *reinterpret_cast<const sj_bytes<16>*>(&smem[sj_smem_pos(la + VEC_A, lb)]);
      union {
        sj_bytes<16> v;
        Unit u[VEC_A];
      } out;
      out.v = shift == 0 ? high : sj_shifted_vector(low, high, (VEC_A - shift) * UNIT_BYTES);
      Unit* at = d + (row + x);
      if (x >= 0 && x + VEC_A <= extent_a) {
        *reinterpret_cast<sj_bytes<16>*>(at) = out.v;
      } else {
#pragma unroll
        for (int u = 0; u < VEC_A; ++u)
          if (x + u >= 0 && x + u < extent_a) at[u] = out.u[u];
      }
    }
  } else if (STORE_LINEAR) {
    // A passing tile's A range starts A_PASS units in dst per A index (A's next dims follow B's passed
    // ones); other linear stores span A whole.
    const Index dst_base = tile.dst_base + (A_PASS > 0 ? (Index)A_PASS * tile.a0 : (Index)0);
    const Index count = (BOUNDS ? min((Index)TILE_B, sj_extent_b(args) - tile.b0) : (Index)TILE_B) * TILE_A;
    // The destination offset of the tile's B index b (B's stride is TILE_A when B is one dim).
    auto dst_b = [&](int b) { return DIMS_B > 1 ? table.b[b] : (tile.b0 + b) * (Index)TILE_A; };
    if constexpr (SKEW_RUNS) {
      // Aligned vector j of a run whose misalignment is s holds its units [j * STORE_VEC - s, +
      // STORE_VEC), staged from `place` on: in the aligned staged vector at or before it and the next.
      constexpr int RUN_VECTORS = (STORE_RUN_UNITS + 2 * STORE_VEC - 2) / STORE_VEC;  // the most a run touches
      constexpr int ITEMS = RUNS_PER_TILE * RUN_VECTORS;
      // A tile of one run may end early (bounds along B); shorter runs span whole B dims.
      const int runs = (int)((count + STORE_RUN_UNITS - 1) / STORE_RUN_UNITS);
      const int run_units = STORE_RUN == TILE_B ? (int)count : STORE_RUN_UNITS;
#pragma unroll
      for (int r = 0; r < (ITEMS + THREADS - 1) / THREADS; ++r) {
        const int item = threadIdx.x + r * THREADS;
        const int run = item / RUN_VECTORS, j = item % RUN_VECTORS;
        if ((ITEMS % THREADS != 0 && item >= ITEMS) || run >= runs) continue;
        const Index at = dst_base + dst_b(run * STORE_RUN);
        const int shift = sj_misalignment(dst_address, at, STORE_VEC);
        const int first = j * STORE_VEC - shift;
        if (first >= run_units) continue;
        const int place = run * STORE_RUN_UNITS + first;  // above -STORE_VEC
        const int aligned = (place + STORE_VEC) / STORE_VEC * STORE_VEC - STORE_VEC, skew = place - aligned;
        // Before the tile (the first run's first vector), the low vector's units are not stored.
        const sj_bytes<16> low = *reinterpret_cast<const sj_bytes<16>*>(smem + max(aligned, 0));
        const sj_bytes<16> high = *reinterpret_cast<const sj_bytes<16>*>(smem + (aligned + STORE_VEC));
        const sj_bytes<16> out = skew == 0 ? low : sj_shifted_vector(low, high, skew * UNIT_BYTES);
        sj_store_in_run(reinterpret_cast<unsigned char*>(d + at), first * UNIT_BYTES, run_units * UNIT_BYTES, out);
      }
    } else if (STORE_RUN == TILE_B) {
      Unit* run = d + (dst_base + dst_b(0));
      sj_run_pass<STORE_VEC, STORES_LINEAR_PER_THREAD>(
          LOW_REGISTERS ? sj_thread_fresh() : threadIdx.x, count,
          [&](int, int l) {
            *reinterpret_cast<VecStore*>(run + l) = *reinterpret_cast<const VecStore*>(&smem[sj_rotated(l)]);
          },
          [&](int i) { run[i] = smem[sj_rotated(i)]; });
    } else {
      // Shorter runs span whole B dims, so count is a multiple of STORE_RUN_UNITS and of STORE_VEC: no
      // piece is ragged.
      sj_run_pass<STORE_VEC, STORES_LINEAR_PER_THREAD>(
          LOW_REGISTERS ? sj_thread_fresh() : threadIdx.x, count,
          [&](int, int l) {
            Unit* at = d + (dst_base + dst_b(l / STORE_RUN_UNITS * STORE_RUN) + l % STORE_RUN_UNITS);
            *reinterpret_cast<VecStore*>(at) = *reinterpret_cast<const VecStore*>(&smem[sj_rotated(l)]);
          },
          [](int) {});
    }
  } else {
    const int thread = LOW_REGISTERS ? sj_thread_fresh() : (int)threadIdx.x;
#pragma unroll
    for (int r0 = 0; r0 < STORES_PER_THREAD; r0 += STORE_BATCH) {
      PackA out[STORE_BATCH];
      Index at[STORE_BATCH];  // looked up beside the staged reads: inside the bounds check, nvcc branched around each store
#pragma unroll
      for (int r = r0; r < r0 + STORE_BATCH && r < STORES_PER_THREAD; ++r) {
        const int k = thread + r * THREADS;
        const int la = k % MICRO_A * VEC_A, lb = k / MICRO_A;
        if (!STORES_RAGGED || k < STORE_VECTORS) {
          at[r - r0] = tile.dst_base + tile.a0 + la + sj_dst_b(args, tile, table, lb);
          if (ROWS_BY_A) {
#pragma unroll
            for (int i = 0; i < VEC_A; ++i) out[r - r0].u[i] = smem[sj_smem_pos(la + i, lb)];
          } else {
            out[r - r0].v = *reinterpret_cast<const VecA*>(&smem[sj_smem_pos(la, lb)]);
          }
        }
      }
      const Index rows_a = sj_extent_a(args) - tile.a0, rows_b = sj_extent_b(args) - tile.b0;
#pragma unroll
      for (int r = r0; r < r0 + STORE_BATCH && r < STORES_PER_THREAD; ++r) {
        const int k = thread + r * THREADS;
        const int la = k % MICRO_A * VEC_A, lb = k / MICRO_A;
        if ((!STORES_RAGGED || k < STORE_VECTORS) & (!BOUNDS || ((la < rows_a) & (lb < rows_b))))
          *reinterpret_cast<VecA*>(d + at[r - r0]) = out[r - r0].v;
      }
    }
  }
}

// The tile of index t, its base moved by its first indices' offsets in the fixed tables' groups
// (none in a group the tile spans whole).
__device__ __forceinline__ SjTile sj_tiled_tile(const SjArgs& args, Index t) {
  SjTile tile = sj_tile(args, t, STEP_A, TILE_B, FIRST_OUTER, A_FIRST);
  Index src_offset, dst_offset;
  if (TABLE_A && FIXED_A && tile.a0 != 0) {
    sj_offsets(args, 0, DIMS_A, tile.a0, src_offset, dst_offset);
    tile.src_base += src_offset;
  }
  if (TABLE_B && FIXED_B && tile.b0 != 0) {
    sj_offsets(args, DIMS_A, DIMS_B, tile.b0, src_offset, dst_offset);
    tile.dst_base += dst_offset;
    if (B_CHAIN > 0) tile.src_base += src_offset;
  }
  return tile;
}

// Blocks walk the tiles in a grid-stride loop (the planner launches a block per two tiles, or per
// tile) and issue their next tile's loads before they store the current one, so loads stay in flight
// while the block writes. MIN_BLOCKS blocks per SM at least: a lone block leaves the memory system
// idle while it synchronizes. Composite-group tables are double-buffered, indexed by the tile's
// parity, unless they are fixed.
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
    sj_kernel(char* __restrict__ dst, const char* __restrict__ src, const SjArgs args) {
  __shared__ __align__(16) Unit smem[SMEM_UNITS];
  __shared__ Index table_a[SETS_A][TABLE_A ? TILE_A : 1];
  __shared__ Index table_b[SETS_B][TABLE_B ? TILE_B : 1];
  __shared__ Index table_b_src[SETS_B][B_CHAIN > 0 ? TILE_B : 1];
  auto tables = [&](int parity) {
    const int a = FIXED_A ? 0 : parity, b = FIXED_B ? 0 : parity;
    return SjTables{table_a[a], table_b[b], table_b_src[b]};
  };
  Unit* __restrict__ d = reinterpret_cast<Unit*>(dst);
  const Unit* __restrict__ s = reinterpret_cast<const Unit*>(src);
  const Index num_tiles = sj_num_tiles(args);
  Index t = blockIdx.x;
  if (t >= num_tiles) return;

  SjTile tile = sj_tiled_tile(args, t);
  int parity = 0;
  sj_fill_tables(args, tile, tables(0), true);
  if (DIMS_A > 1 || DIMS_B > 1) __syncthreads();
  const unsigned src_address = sj_unit_address(src), dst_address = sj_unit_address(dst);
  const SjSpan span = SKEW_LOAD ? sj_src_span(args) : SjSpan{0, 0};
  SjLoaded in;
  sj_load(args, s, src_address, span, tile, tables(0), in);
  for (;;) {
    sj_stage(args, s, tile, tables(parity), in, smem);
    const Index next_t = t + gridDim.x;
    const bool more = next_t < num_tiles;
    SjTile next;
    if (more) {
      next = sj_tiled_tile(args, next_t);
      sj_fill_tables(args, next, tables(parity ^ 1), false);
    }
    __syncthreads();
    if (more) sj_load(args, s, src_address, span, next, tables(parity ^ 1), in);
    sj_store(args, d, dst_address, tile, tables(parity), smem);
    if (!more) break;
    __syncthreads();
    tile = next;
    t = next_t;
    parity ^= 1;
  }
}
