// rearrange tiled: the transpose and packed families. Group A (dims contiguous in the destination,
// starting at its stride-1 dim) and group B (the source's innermost dims) span a TILE_A x TILE_B
// tile: read from src along B, staged in shared memory (row b holds the tile's A units of B index b),
// written to dst along A. dim[0, DIMS_A) = A, then DIMS_B dims of B, then the outer dims, each
// innermost first. Composite groups look their cross offsets up in per-tile tables.
//
// Loads: micro-tiles of VEC_A rows x VEC_B units, transposed in registers into VEC_B vectors of
// VEC_A units, or (LOAD_LINEAR) the tile as one contiguous source run copied as is, so shared memory
// then holds one row per A index. Stores: VEC_A-unit vectors along A, or (STORE_LINEAR) the tile as
// one contiguous destination run.
constexpr int MICRO_A = TILE_A / VEC_A;
constexpr int MICRO_B = TILE_B / VEC_B;
constexpr int MICRO = MICRO_A * MICRO_B;
constexpr int MICRO_PER_THREAD = (MICRO + THREADS - 1) / THREADS;
constexpr int STORE_VECTORS = TILE_B * MICRO_A;
constexpr int STORES_PER_THREAD = (STORE_VECTORS + THREADS - 1) / THREADS;
constexpr int LOAD_VEC = LOAD_LINEAR > 0 ? LOAD_LINEAR : 1;
constexpr int LOADS_LINEAR_PER_THREAD = (TILE_A * TILE_B / LOAD_VEC + THREADS - 1) / THREADS;
constexpr int STORE_VEC = STORE_LINEAR > 0 ? STORE_LINEAR : 1;
constexpr int STORES_LINEAR_PER_THREAD = (TILE_A * TILE_B / STORE_VEC + THREADS - 1) / THREADS;
constexpr int FIRST_OUTER = DIMS_A + DIMS_B;
constexpr bool ROWS_BY_A = LOAD_LINEAR > 0;  // shared memory in source order: row a holds B indices

typedef sj_bytes<VEC_A * UNIT> VecA;
typedef sj_bytes<VEC_B * UNIT> VecB;
typedef sj_bytes<LOAD_VEC * UNIT> VecLoad;
typedef sj_bytes<STORE_VEC * UNIT> VecStore;
union PackA { VecA v; Unit u[VEC_A]; };
union PackB { VecB v; Unit u[VEC_B]; };

// Shared-memory position of tile element (a, b). Swizzled rows XOR the A-vector index with the
// B-vector index, so both the micro-tile stores (down a column) and the row reads hit distinct banks.
__device__ __forceinline__ int sj_smem_pos(int a, int b) {
  if (ROWS_BY_A) return a * PITCH + b;
  if (SWIZZLE) return b * PITCH + (((a / VEC_A) ^ ((b / VEC_B) % SWIZZLE_PERIOD)) * VEC_A) + a % VEC_A;
  return b * PITCH + a;
}

// MIN_BLOCKS blocks per SM at least: a lone block leaves the memory system idle while it synchronizes.
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
    sj_kernel(char* __restrict__ dst, const char* __restrict__ src, const SjArgs args) {
  __shared__ __align__(16) Unit tile[(ROWS_BY_A ? TILE_A : TILE_B) * PITCH];
  __shared__ Index table_a[DIMS_A > 1 ? TILE_A : 1];  // source offsets of the tile's A indices
  __shared__ Index table_b[DIMS_B > 1 ? TILE_B : 1];  // destination offsets of the tile's B indices
  Unit* __restrict__ d = reinterpret_cast<Unit*>(dst);
  const Unit* __restrict__ s = reinterpret_cast<const Unit*>(src);
  const Index extent_a = sj_extent_a(args);
  const Index extent_b = sj_extent_b(args);

  for (long long t = blockIdx.x; t < sj_num_tiles(args); t += gridDim.x) {
    const Index rest = sj_div((Index)t, args.tiles_x, K_TILES_X);
    const Index b0 = ((Index)t - rest * sj_tiles_x(args)) * TILE_B;
    const Index outer = sj_div(rest, args.tiles_y, K_TILES_Y);
    const Index a0 = (rest - outer * sj_tiles_y(args)) * TILE_A;
    Index src_base, dst_base;
    sj_offsets(args, FIRST_OUTER, NUM_DIMS - FIRST_OUTER, outer, src_base, dst_base);
    if (DIMS_A > 1 || DIMS_B > 1) {
      Index src_offset, dst_offset;
      if (DIMS_A > 1)
        for (int i = threadIdx.x; i < TILE_A; i += THREADS) {
          sj_offsets(args, 0, DIMS_A, min(a0 + i, extent_a - 1), src_offset, dst_offset);
          table_a[i] = src_offset;
        }
      if (DIMS_B > 1)
        for (int i = threadIdx.x; i < TILE_B; i += THREADS) {
          sj_offsets(args, DIMS_A, DIMS_B, min(b0 + i, extent_b - 1), src_offset, dst_offset);
          table_b[i] = dst_offset;
        }
      __syncthreads();
    }
    // Offsets within the source and destination of local A index la and local B index lb.
    auto src_a = [&](int la) -> Index { return DIMS_A > 1 ? table_a[la] : (a0 + la) * sj_src_stride(args, 0); };
    auto src_b = [&](int lb) -> Index { return DIMS_B > 1 ? b0 + lb : (b0 + lb) * sj_src_stride(args, DIMS_A); };
    auto dst_b = [&](int lb) -> Index { return DIMS_B > 1 ? table_b[lb] : (b0 + lb) * sj_dst_stride(args, DIMS_A); };

    if (LOAD_LINEAR) {
      // The tile's rows are back to back in src (A's stride is TILE_B == extent_b) and in shared
      // memory (PITCH == TILE_B): a straight copy.
      const Index count = (BOUNDS ? min((Index)TILE_A, extent_a - a0) : (Index)TILE_A) * TILE_B;
      const Unit* run = s + src_base + a0 * TILE_B;
      VecLoad in[LOADS_LINEAR_PER_THREAD];
#pragma unroll
      for (int r = 0; r < LOADS_LINEAR_PER_THREAD; ++r) {
        const int l = (threadIdx.x + r * THREADS) * LOAD_VEC;
        if (l + LOAD_VEC <= count) in[r] = *reinterpret_cast<const VecLoad*>(run + l);
      }
#pragma unroll
      for (int r = 0; r < LOADS_LINEAR_PER_THREAD; ++r) {
        const int l = (threadIdx.x + r * THREADS) * LOAD_VEC;
        if (l + LOAD_VEC <= count) {
          *reinterpret_cast<VecLoad*>(&tile[l]) = in[r];
        } else {
#pragma unroll
          for (int u = 0; u < LOAD_VEC; ++u)
            if (l + u < count) tile[l + u] = run[l + u];
        }
      }
    } else {
      PackB in[MICRO_PER_THREAD][VEC_A];
#pragma unroll
      for (int r = 0; r < MICRO_PER_THREAD; ++r) {
        const int m = threadIdx.x + r * THREADS;
        const int la = m / MICRO_B * VEC_A, lb = m % MICRO_B * VEC_B;
#pragma unroll
        for (int i = 0; i < VEC_A; ++i)
          if (m < MICRO && (!BOUNDS || (a0 + la + i < extent_a && b0 + lb < extent_b)))
            in[r][i].v = *reinterpret_cast<const VecB*>(s + src_base + src_a(la + i) + src_b(lb));
      }
#pragma unroll
      for (int r = 0; r < MICRO_PER_THREAD; ++r) {
        const int m = threadIdx.x + r * THREADS;
        const int la = m / MICRO_B * VEC_A, lb = m % MICRO_B * VEC_B;
        if (m < MICRO) {
#pragma unroll
          for (int j = 0; j < VEC_B; ++j) {
            PackA out;
#pragma unroll
            for (int i = 0; i < VEC_A; ++i) out.u[i] = in[r][i].u[j];
            *reinterpret_cast<VecA*>(&tile[sj_smem_pos(la, lb + j)]) = out.v;
          }
        }
      }
    }
    __syncthreads();

    if (STORE_LINEAR) {
      // The tile's B rows are back to back in dst (B's stride is TILE_A == extent_a) and in shared
      // memory (PITCH == TILE_A): a straight copy.
      const Index count = (BOUNDS ? min((Index)TILE_B, extent_b - b0) : (Index)TILE_B) * TILE_A;
      Unit* run = d + dst_base + b0 * TILE_A;
#pragma unroll
      for (int r = 0; r < STORES_LINEAR_PER_THREAD; ++r) {
        const int l = (threadIdx.x + r * THREADS) * STORE_VEC;
        if (l + STORE_VEC <= count) {
          *reinterpret_cast<VecStore*>(run + l) = *reinterpret_cast<const VecStore*>(&tile[l]);
        } else {
#pragma unroll
          for (int u = 0; u < STORE_VEC; ++u)
            if (l + u < count) run[l + u] = tile[l + u];
        }
      }
    } else {
      PackA out[STORES_PER_THREAD];
#pragma unroll
      for (int r = 0; r < STORES_PER_THREAD; ++r) {
        const int k = threadIdx.x + r * THREADS;
        const int la = k % MICRO_A * VEC_A, lb = k / MICRO_A;
        if (k < STORE_VECTORS) {
          if (ROWS_BY_A) {
#pragma unroll
            for (int i = 0; i < VEC_A; ++i) out[r].u[i] = tile[sj_smem_pos(la + i, lb)];
          } else {
            out[r].v = *reinterpret_cast<const VecA*>(&tile[sj_smem_pos(la, lb)]);
          }
        }
      }
#pragma unroll
      for (int r = 0; r < STORES_PER_THREAD; ++r) {
        const int k = threadIdx.x + r * THREADS;
        const int la = k % MICRO_A * VEC_A, lb = k / MICRO_A;
        if (k < STORE_VECTORS && (!BOUNDS || (a0 + la < extent_a && b0 + lb < extent_b)))
          *reinterpret_cast<VecA*>(d + dst_base + a0 + la + dst_b(lb)) = out[r].v;
      }
    }
    __syncthreads();
  }
}
