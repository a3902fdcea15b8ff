// rearrange skewed: a transpose whose rows sit at odd places on both sides (odd row pitches,
// misaligned pointers), so that fixed tiles would move them in accesses narrower than 8 bytes.
// dim[0] = A (dst stride 1), dim[1] = B (src stride 1), then the outer dims, innermost first.
//
// Destination row b owns, in the tile at (a0, b0), the A range [a0 - s(b), a0 + TILE_A - s(b)),
// where s(b) is the row's misalignment in units: the ranges of successive tiles meet at aligned
// places, so every store is one aligned VEC_A-unit vector except at a row's two ends. The tile reads
// the TILE_A + VEC_A - 1 source rows those ranges can touch, each as the aligned vectors covering its
// B range, and drops every unit at its skewed place in shared memory (row b, place a - a0 + s(b)).
constexpr int ROWS_A = TILE_A + VEC_A - 1;   // source rows a tile reads
constexpr int CHUNKS_B = TILE_B / VEC_A + 1;  // aligned source vectors covering a row's B range
constexpr int CHUNKS_A = TILE_A / VEC_A;      // aligned destination vectors of a row's A range
constexpr int LOAD_ITEMS = ROWS_A * CHUNKS_B;
constexpr int LOADS_PER_THREAD = (LOAD_ITEMS + THREADS - 1) / THREADS;
constexpr int STORE_ITEMS = TILE_B * CHUNKS_A;
constexpr int STORES_PER_THREAD = (STORE_ITEMS + THREADS - 1) / THREADS;

typedef sj_bytes<VEC_A * UNIT_BYTES> Vec;
union Pack { Vec v; Unit u[VEC_A]; };

// Shared-memory place of unit p of row lb. Whole vectors are XOR-swizzled by the row, so the unit
// writes of a warp (rows VEC_A apart, the same p) spread over the banks and vectors stay aligned.
__device__ __forceinline__ int sj_skew_pos(int lb, int p) {
  return lb * TILE_A + (((p / VEC_A) ^ ((lb / VEC_A) % CHUNKS_A)) * VEC_A) + p % VEC_A;
}

// Load item `item`: the k-th aligned vector of source row a = a0 - (VEC_A - 1) + item / CHUNKS_B,
// starting at B index c0 (unit offset `row` + c0). False when the item or its row lies outside.
__device__ __forceinline__ bool sj_load_item(const SjArgs& args, unsigned src_address, const SjTile& tile,
                                             int item, Index& a, Index& row, Index& c0) {
  a = tile.a0 - (VEC_A - 1) + item / CHUNKS_B;
  if ((LOAD_ITEMS % THREADS != 0 && item >= LOAD_ITEMS) || a < 0 || a >= sj_extent_a(args)) return false;
  row = tile.src_base + a * sj_src_stride(args, 0);
  c0 = tile.b0 - sj_misalignment(src_address, row + tile.b0, VEC_A) + item % CHUNKS_B * VEC_A;
  return true;
}

// Issues the tile's loads into registers.
__device__ __forceinline__ void sj_load(const SjArgs& args, const Unit* __restrict__ s, unsigned src_address,
                                        const SjTile& tile, Pack (&in)[LOADS_PER_THREAD]) {
  const Index extent_b = sj_extent_b(args);
#pragma unroll
  for (int r = 0; r < LOADS_PER_THREAD; ++r) {
    Index a, row, c0;
    if (!sj_load_item(args, src_address, tile, threadIdx.x + r * THREADS, a, row, c0)) continue;
    if (c0 >= 0 && c0 + VEC_A <= extent_b) {
      in[r].v = *reinterpret_cast<const Vec*>(s + (row + c0));
    } else {
#pragma unroll
      for (int u = 0; u < VEC_A; ++u)
        if (c0 + u >= 0 && c0 + u < extent_b) in[r].u[u] = s[row + c0 + u];
    }
  }
}

// Drops every loaded unit of the tile's B range at its skewed place: row lb, place a - a0 + s(b).
__device__ __forceinline__ void sj_stage(const SjArgs& args, unsigned src_address, unsigned dst_address,
                                         const SjTile& tile, const Pack (&in)[LOADS_PER_THREAD], Unit* smem) {
  const Index extent_b = sj_extent_b(args);
  const Index dst_stride_b = sj_dst_stride(args, 1);
#pragma unroll
  for (int r = 0; r < LOADS_PER_THREAD; ++r) {
    Index a, row, c0;
    if (!sj_load_item(args, src_address, tile, threadIdx.x + r * THREADS, a, row, c0)) continue;
#pragma unroll
    for (int u = 0; u < VEC_A; ++u) {
      const Index lb = c0 + u - tile.b0;
      if (lb >= 0 && lb < TILE_B && c0 + u < extent_b) {
        const Index p = a - tile.a0 + sj_misalignment(dst_address, tile.dst_base + (c0 + u) * dst_stride_b, VEC_A);
        if (p >= 0 && p < TILE_A) smem[sj_skew_pos((int)lb, (int)p)] = in[r].u[u];
      }
    }
  }
}

// Store item (lb, j): the j-th aligned vector of destination row b0 + lb in this tile.
__device__ __forceinline__ void sj_store(const SjArgs& args, Unit* __restrict__ d, unsigned dst_address,
                                         const SjTile& tile, const Unit* smem) {
  const Index extent_a = sj_extent_a(args);
#pragma unroll
  for (int r = 0; r < STORES_PER_THREAD; ++r) {
    const int item = threadIdx.x + r * THREADS;
    const int lb = item / CHUNKS_A, j = item % CHUNKS_A;
    if ((STORE_ITEMS % THREADS != 0 && item >= STORE_ITEMS) || tile.b0 + lb >= sj_extent_b(args)) continue;
    const Index row = tile.dst_base + (tile.b0 + lb) * sj_dst_stride(args, 1);
    const Index x = tile.a0 - sj_misalignment(dst_address, row, VEC_A) + j * VEC_A;
    Pack out;
    out.v = *reinterpret_cast<const Vec*>(&smem[sj_skew_pos(lb, j * VEC_A)]);
    if (x >= 0 && x + VEC_A <= extent_a) {
      *reinterpret_cast<Vec*>(d + (row + x)) = out.v;
    } else {
#pragma unroll
      for (int u = 0; u < VEC_A; ++u)
        if (x + u >= 0 && x + u < extent_a) d[row + x + u] = out.u[u];
    }
  }
}

// One tile per block (tiles beyond the grid are walked by a grid-stride loop). Tiles count along A
// first (A_FIRST; the planner counts along B where A's rows hold many more tiles): the blocks in
// flight then write whole destination rows rather than a narrow band of every row (f32 [8191,
// 8193]: H200 67% -> 72% of copy, H100 84% -> 87%).
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
    sj_kernel(char* __restrict__ dst, const char* __restrict__ src, const SjArgs args) {
  __shared__ __align__(16) Unit smem[TILE_B * TILE_A];
  Unit* __restrict__ d = reinterpret_cast<Unit*>(dst);
  const Unit* __restrict__ s = reinterpret_cast<const Unit*>(src);
  const unsigned dst_address = sj_unit_address(dst), src_address = sj_unit_address(src);
  for (Index t = blockIdx.x; t < sj_num_tiles(args); t += gridDim.x) {
    const SjTile tile = sj_tile(args, t, TILE_A, TILE_B, 2, A_FIRST);
    Pack in[LOADS_PER_THREAD];
    sj_load(args, s, src_address, tile, in);
    sj_stage(args, src_address, dst_address, tile, in, smem);
    __syncthreads();
    sj_store(args, d, dst_address, tile, smem);
    __syncthreads();
  }
}
