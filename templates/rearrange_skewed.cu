// rearrange skewed: a transpose whose rows sit at odd places on both sides (odd row pitches,
// misaligned pointers), so that fixed tiles would move them in accesses narrower than 8 bytes.
// dim[0] = A (dst stride 1), dim[1] = B (src stride 1), then the outer dims, innermost first.
//
// Destination row b owns, in the tile at (a0, b0), the A range [a0 - s(b), a0 + TILE_A - s(b)),
// where s(b) is the row's misalignment in units: the ranges of successive tiles meet at aligned
// places, so every store is one aligned VEC-unit vector except at a row's two ends. Every other
// access is an aligned vector too:
// - a thread loads, for VEC source rows, the two aligned vectors around one B chunk and shifts each
//   pair by that row's misalignment, which leaves a VEC x VEC block aligned to b0;
// - the block, transposed, goes to shared memory as VEC vectors, one per destination row, whose
//   shared row holds A from a0 - VEC on;
// - a destination vector is the pair of shared vectors around it, shifted by its row's s(b).
constexpr int COL_CHUNKS = TILE_A / VEC + 1;  // vectors of a shared row; also the tile's groups of VEC rows
constexpr int CHUNKS_B = TILE_B / VEC;       // B chunks of a tile
constexpr int CHUNKS_A = TILE_A / VEC;       // destination vectors of a row's range
constexpr int STORE_ITEMS = TILE_B * CHUNKS_A;
constexpr int STORES_PER_THREAD = (STORE_ITEMS + THREADS - 1) / THREADS;
static_assert(COL_CHUNKS * CHUNKS_B == THREADS, "one load item per thread");
static_assert(COL_CHUNKS >= 8 && (COL_CHUNKS & (COL_CHUNKS - 1)) == 0, "the swizzle spreads 8 vectors");

typedef sj_bytes<VEC * UNIT> Vec;
union Pack { Vec v; Unit u[VEC]; };

// Shared vector `chunk` of row lb, XOR-swizzled by the row's group of VEC: the block stores of 8
// neighbouring threads (rows VEC apart, the same chunk) fall in distinct banks.
__device__ __forceinline__ int sj_chunk(int lb, int chunk) { return lb * COL_CHUNKS + (chunk ^ ((lb / VEC) & 7)); }

// Misalignment in units, below VEC, of unit offset `offset` from a base of misalignment `base`.
__device__ __forceinline__ int sj_misalignment(unsigned base, Index offset) {
  return (int)((base + (unsigned)offset) & (VEC - 1));
}

// Units shift .. shift + VEC - 1 of the pair (lo, hi), 0 <= shift < VEC: a barrel shifter, as
// registers cannot be indexed at run time.
__device__ __forceinline__ Pack sj_shift(const Pack& lo, const Pack& hi, int shift) {
  Unit w[2 * VEC];
#pragma unroll
  for (int i = 0; i < VEC; ++i) {
    w[i] = lo.u[i];
    w[VEC + i] = hi.u[i];
  }
#pragma unroll
  for (int step = 1; step < VEC; step *= 2) {
    const bool take = (shift & step) != 0;
#pragma unroll
    for (int i = 0; i + step < 2 * VEC; ++i) w[i] = take ? w[i + step] : w[i];
  }
  Pack out;
#pragma unroll
  for (int i = 0; i < VEC; ++i) out.u[i] = w[i];
  return out;
}

// Aligned vector at unit `c` of a source row, units outside [0, extent_b) left zero.
__device__ __forceinline__ Pack sj_load_vector(const Unit* __restrict__ row, Index c, Index extent_b) {
  Pack p;
  if (c >= 0 && c + VEC <= extent_b) {
    p.v = *reinterpret_cast<const Vec*>(row + c);
  } else {
#pragma unroll
    for (int u = 0; u < VEC; ++u) p.u[u] = c + u >= 0 && c + u < extent_b ? row[c + u] : Unit{};
  }
  return p;
}

// This thread's load item: group g of VEC source rows and B chunk k. Source row r of the group,
// a = a0 - VEC + g * VEC + r, is read as the two aligned vectors around the chunk; false when the
// row is outside the tensor or is row a0 - VEC, which no destination range reaches.
__device__ __forceinline__ bool sj_block_row(const SjArgs& args, unsigned src_misalignment, const SjTile& tile, int r,
                                             Index& row, int& shift) {
  const int g = threadIdx.x / CHUNKS_B;
  const Index a = tile.a0 - VEC + g * VEC + r;
  if ((g == 0 && r == 0) || a < 0 || a >= sj_extent_a(args)) return false;
  row = tile.src_base + a * sj_src_stride(args, 0);
  shift = sj_misalignment(src_misalignment, row + tile.b0);
  return true;
}

__device__ __forceinline__ void sj_load(const SjArgs& args, const Unit* __restrict__ s, unsigned src_misalignment,
                                        const SjTile& tile, Pack (&in)[VEC][2]) {
  const int k = threadIdx.x % CHUNKS_B;
  const Index extent_b = sj_extent_b(args);
#pragma unroll
  for (int r = 0; r < VEC; ++r) {
    Index row;
    int shift;
    if (!sj_block_row(args, src_misalignment, tile, r, row, shift)) {
      in[r][0].v = in[r][1].v = Vec{};
      continue;
    }
    const Index c = tile.b0 - shift + k * VEC;
    in[r][0] = sj_load_vector(s + row, c, extent_b);
    in[r][1] = sj_load_vector(s + row, c + VEC, extent_b);
  }
}

// Aligns each loaded row to b0 and stores the transposed block: destination row k * VEC + i gets
// the vector of A group g.
__device__ __forceinline__ void sj_stage(const SjArgs& args, unsigned src_misalignment, const SjTile& tile,
                                         const Pack (&in)[VEC][2], Vec* smem) {
  const int g = threadIdx.x / CHUNKS_B, k = threadIdx.x % CHUNKS_B;
  Pack block[VEC];
#pragma unroll
  for (int r = 0; r < VEC; ++r) {
    Index row;
    int shift = 0;
    sj_block_row(args, src_misalignment, tile, r, row, shift);
    block[r] = sj_shift(in[r][0], in[r][1], shift);
  }
#pragma unroll
  for (int i = 0; i < VEC; ++i) {
    Pack column;
#pragma unroll
    for (int r = 0; r < VEC; ++r) column.u[r] = block[r].u[i];
    smem[sj_chunk(k * VEC + i, g)] = column.v;
  }
}

// Store item (lb, j): the j-th aligned vector of destination row b0 + lb in this tile.
__device__ __forceinline__ void sj_store(const SjArgs& args, Unit* __restrict__ d, unsigned dst_misalignment,
                                         const SjTile& tile, const Vec* smem) {
  const Index extent_a = sj_extent_a(args);
#pragma unroll 2  // fully unrolled, every pass's shared loads live beside the prefetched tile: spills
  for (int r = 0; r < STORES_PER_THREAD; ++r) {
    const int item = threadIdx.x + r * THREADS;
    const int lb = item / CHUNKS_A, j = item % CHUNKS_A;
    if ((STORE_ITEMS % THREADS != 0 && item >= STORE_ITEMS) || tile.b0 + lb >= sj_extent_b(args)) continue;
    const Index row = tile.dst_base + (tile.b0 + lb) * sj_dst_stride(args, 1);
    const int skew = sj_misalignment(dst_misalignment, row);
    // Units a0 - skew + j * VEC on sit at shared column (j + 1) * VEC - skew on.
    const int col = (j + 1) * VEC - skew, first = col / VEC;
    Pack lo, hi;
    lo.v = smem[sj_chunk(lb, first)];
    hi.v = smem[sj_chunk(lb, min(first + 1, COL_CHUNKS - 1))];  // unused when the shift is 0
    const Pack out = sj_shift(lo, hi, col % VEC);
    const Index x = tile.a0 - skew + j * VEC;
    if (x >= 0 && x + VEC <= extent_a) {
      *reinterpret_cast<Vec*>(d + row + x) = out.v;
    } else {
#pragma unroll
      for (int u = 0; u < VEC; ++u)
        if (x + u >= 0 && x + u < extent_a) d[row + x + u] = out.u[u];
    }
  }
}

// Each block walks tiles t, t + gridDim.x, ...; the next tile's loads are issued as soon as this
// tile is staged, so they are in flight while this tile is stored. Tiles count along A first: the
// blocks in flight then write whole destination rows rather than a narrow band of every row (H200,
// f32 [8191, 8193]: 71-80% of copy against 66-67% along B first).
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
    sj_kernel(char* __restrict__ dst, const char* __restrict__ src, const SjArgs args) {
  __shared__ Vec smem[TILE_B * COL_CHUNKS];
  Unit* __restrict__ d = reinterpret_cast<Unit*>(dst);
  const Unit* __restrict__ s = reinterpret_cast<const Unit*>(src);
  const unsigned dst_misalignment = (unsigned)(reinterpret_cast<unsigned long long>(dst) / UNIT);
  const unsigned src_misalignment = (unsigned)(reinterpret_cast<unsigned long long>(src) / UNIT);
  long long t = blockIdx.x;
  if (t >= sj_num_tiles(args)) return;
  SjTile tile = sj_tile(args, t, TILE_A, TILE_B, 2, true);
  Pack in[VEC][2];
  sj_load(args, s, src_misalignment, tile, in);
  for (;;) {
    sj_stage(args, src_misalignment, tile, in, smem);
    __syncthreads();
    const long long next = t + gridDim.x;
    const bool more = next < sj_num_tiles(args);
    SjTile next_tile;
    if (more) {
      next_tile = sj_tile(args, next, TILE_A, TILE_B, 2, true);
      sj_load(args, s, src_misalignment, next_tile, in);
    }
    sj_store(args, d, dst_misalignment, tile, smem);
    if (!more) return;
    __syncthreads();
    t = next;
    tile = next_tile;
  }
}
