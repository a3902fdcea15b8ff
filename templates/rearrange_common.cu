// rearrange, common part: the runtime arguments and the index helpers of every rearrange family.
// Specialization read here: Unit, UNIT_BYTES, Index, NUM_DIMS, INDEX64, EXACT, THREADS and the K_* values
// (the baked arguments in exact mode, placeholders otherwise).
// Offsets are summed as Index before they meet a pointer, `p + (a + b)`: `p + a + b` widens each
// term to 64 bits (sm_90, 32-bit index: a fifth of an f16 transpose kernel's instructions).

struct SjDiv {  // a divisor and its multiply-high magic numbers (valid for 32-bit numerators)
  long long value;
  unsigned mul;
  unsigned shift;
};
struct SjDim {
  SjDiv extent;
  long long src_stride;
  long long dst_stride;
};
struct SjArgs {
  long long num_tiles;
  long long extent_a;  // tiled: product of group A; rows: innermost extent
  long long extent_b;  // tiled: product of group B; rows: number of rows
  SjDiv tiles_x;       // tiled: tiles along B; rows: tiles along a row
  SjDiv tiles_y;       // tiled: tiles along A
  SjDim dim[NUM_DIMS];
};

// Tile ordinals are Index: a kernel of 32-bit indices has fewer tiles than units, under 2^30.
__device__ __forceinline__ Index sj_num_tiles(const SjArgs& a) { return (Index)(EXACT ? K_NUM_TILES : a.num_tiles); }
__device__ __forceinline__ Index sj_extent_a(const SjArgs& a) { return (Index)(EXACT ? K_EXTENT_A : a.extent_a); }
__device__ __forceinline__ Index sj_extent_b(const SjArgs& a) { return (Index)(EXACT ? K_EXTENT_B : a.extent_b); }
__device__ __forceinline__ Index sj_tiles_x(const SjArgs& a) { return (Index)(EXACT ? K_TILES_X : a.tiles_x.value); }
__device__ __forceinline__ Index sj_tiles_y(const SjArgs& a) { return (Index)(EXACT ? K_TILES_Y : a.tiles_y.value); }
__device__ __forceinline__ Index sj_extent(const SjArgs& a, int k) {
  return (Index)(EXACT ? K_EXTENT[k] : a.dim[k].extent.value);
}
__device__ __forceinline__ Index sj_src_stride(const SjArgs& a, int k) {
  return (Index)(EXACT ? K_SRC_STRIDE[k] : a.dim[k].src_stride);
}
__device__ __forceinline__ Index sj_dst_stride(const SjArgs& a, int k) {
  return (Index)(EXACT ? K_DST_STRIDE[k] : a.dim[k].dst_stride);
}

// body(i) for each i below COUNT that the thread owns (threadIdx.x, then every THREADS). Where one
// pass covers COUNT, a guarded call: a loop bounded by COUNT alone made nvcc wrap every table fill
// in a 4-way unrolled loop and its remainder.
template <int COUNT, typename Body>
__device__ __forceinline__ void sj_block_for(Body body) {
  if constexpr (COUNT <= THREADS) {
    if (COUNT == THREADS || (int)threadIdx.x < COUNT) body((int)threadIdx.x);
  } else {
    for (int i = threadIdx.x; i < COUNT; i += THREADS) body(i);
  }
}

// Row-major W x W block of 1- or 2-byte units in 32-bit words (w[i] = the W units of row i, W = 4
// or 2) -> column-major (out[j] = unit j of every row), by byte permutes: 8 for a 4 x 4 block, where
// shifts and masks of its units take about 30.
template <int W>
__device__ __forceinline__ void sj_transpose_block(const unsigned (&w)[W], unsigned (&out)[W]) {
  static_assert(W == 2 || W == 4, "blocks of 2 x 2 or 4 x 4 units");
  if constexpr (W == 2) {
    out[0] = __byte_perm(w[0], w[1], 0x5410);
    out[1] = __byte_perm(w[0], w[1], 0x7632);
  } else {
    const unsigned lo01 = __byte_perm(w[0], w[1], 0x5140), hi01 = __byte_perm(w[0], w[1], 0x7362);
    const unsigned lo23 = __byte_perm(w[2], w[3], 0x5140), hi23 = __byte_perm(w[2], w[3], 0x7362);
    out[0] = __byte_perm(lo01, lo23, 0x5410);
    out[1] = __byte_perm(lo01, lo23, 0x7632);
    out[2] = __byte_perm(hi01, hi23, 0x5410);
    out[3] = __byte_perm(hi01, hi23, 0x7632);
  }
}

// A pointer's address in units: its low bits are its misalignment.
__device__ __forceinline__ unsigned sj_unit_address(const void* p) {
  return (unsigned)(reinterpret_cast<unsigned long long>(p) / UNIT_BYTES);
}

// Misalignment in units, below `units` (a power of two), of unit offset `offset` from a base whose
// unit address is `base`.
__device__ __forceinline__ int sj_misalignment(unsigned base, Index offset, int units) {
  return (int)((base + (unsigned)offset) & (units - 1));
}

// The 16 bytes `shift` bytes into the 32 of `low` and `high` (shift below 16): words selected by two
// steps, then a funnel shift by the bytes left.
__device__ __forceinline__ sj_bytes<16> sj_shifted_vector(const sj_bytes<16>& low, const sj_bytes<16>& high, int shift) {
  const unsigned w[8] = {low.v[0], low.v[1], low.v[2], low.v[3], high.v[0], high.v[1], high.v[2], high.v[3]};
  unsigned by_two[6], by_one[5];
#pragma unroll
  for (int i = 0; i < 6; ++i) by_two[i] = (shift & 8) ? w[i + 2] : w[i];
#pragma unroll
  for (int i = 0; i < 5; ++i) by_one[i] = (shift & 4) ? by_two[i + 1] : by_two[i];
  sj_bytes<16> out;
#pragma unroll
  for (int m = 0; m < 4; ++m) out.v[m] = __funnelshift_r(by_one[m], by_one[m + 1], (shift & 3) * 8);
  return out;
}

// Bytes [first, last) of `v`, stored at the aligned 16 bytes `to`: whole words as words, the rest bytewise.
__device__ __forceinline__ void sj_store_piece(unsigned char* to, const sj_bytes<16>& v, long long first, long long last) {
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    if (4 * m >= first && 4 * m + 4 <= last) {
      *reinterpret_cast<unsigned*>(to + 4 * m) = v.v[m];
    } else {
#pragma unroll
      for (int k = 0; k < 4; ++k)
        if (4 * m + k >= first && 4 * m + k < last) to[4 * m + k] = (unsigned char)(v.v[m] >> (8 * k));
    }
  }
}

// Stores the 16-byte vector v at byte p of a run of `length` bytes (Position: int or long long):
// whole where it lies inside the run, else only its bytes inside.
template <typename Position>
__device__ __forceinline__ void sj_store_in_run(unsigned char* run, Position p, Position length, const sj_bytes<16>& v) {
  if (p >= 0 && p + 16 <= length)
    *reinterpret_cast<sj_bytes<16>*>(run + p) = v;
  else
    sj_store_piece(run + p, v, -p, length - p);
}

// n / d: by a constant in exact mode, by a division with 64-bit indices, else multiply-high and shift,
// in 32 bits: 32-bit indices are below 2^30, so the sum cannot carry (with tile ordinals in 64 bits
// too, sj_fastdiv's 64-bit sum took a packed tile of 864 bytes 4% more instructions and 1.11x its
// time, H200).
__device__ __forceinline__ Index sj_div(Index n, const SjDiv& d, long long exact_divisor) {
  if (EXACT) return n / (Index)exact_divisor;
  if (INDEX64) return n / (Index)d.value;
  return (Index)((__umulhi((unsigned)n, d.mul) + (unsigned)n) >> d.shift);
}

// Source and destination offsets of linear index n over dims [first, first + count), innermost
// first; n is below their product, so the outermost coordinate needs no division.
__device__ __forceinline__ void sj_offsets(const SjArgs& a, int first, int count, Index n, Index& src_offset,
                                           Index& dst_offset) {
  src_offset = 0;
  dst_offset = 0;
#pragma unroll
  for (int k = first; k < first + count; ++k) {
    Index c = n;
    if (k + 1 < first + count) {
      const Index q = sj_div(n, a.dim[k].extent, K_EXTENT[k]);
      c = n - q * sj_extent(a, k);
      n = q;
    }
    src_offset += c * sj_src_stride(a, k);
    dst_offset += c * sj_dst_stride(a, k);
  }
}

// A tile of the tiled and skewed families: its first A and B indices and the offsets of its outer
// coordinates (dims from `first_outer` on). Tile t counts along B fastest (along A fastest when
// `a_fastest`), then along the other, then outer.
struct SjTile {
  Index a0, b0, src_base, dst_base;
};

__device__ __forceinline__ SjTile sj_tile(const SjArgs& args, Index t, int tile_a, int tile_b, int first_outer,
                                          bool a_fastest) {
  SjTile tile;
  Index a_index, b_index, outer;
  if (a_fastest) {
    const Index rest = sj_div(t, args.tiles_y, K_TILES_Y);
    a_index = t - rest * sj_tiles_y(args);
    outer = sj_div(rest, args.tiles_x, K_TILES_X);
    b_index = rest - outer * sj_tiles_x(args);
  } else {
    const Index rest = sj_div(t, args.tiles_x, K_TILES_X);
    b_index = t - rest * sj_tiles_x(args);
    outer = sj_div(rest, args.tiles_y, K_TILES_Y);
    a_index = rest - outer * sj_tiles_y(args);
  }
  tile.a0 = a_index * tile_a;
  tile.b0 = b_index * tile_b;
  sj_offsets(args, first_outer, NUM_DIMS - first_outer, outer, tile.src_base, tile.dst_base);
  return tile;
}
