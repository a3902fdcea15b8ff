// rearrange runs, the tile both runs kernels share: dim[0, TILE_DIMS) in destination order, each
// whole except the last dim of each run. The first DST_RUN_DIMS of them are contiguous in dst (the
// tile's destination runs, of L_D units; the last, PA, tiled by TILE_A); SRC_ORDER lists them in
// source order, the first SRC_RUN_DIMS contiguous in src (source runs of L_S units; the last, PB,
// tiled by TILE_B).
__host__ __device__ constexpr long long sj_tile_extent(int k) {
  return k == 0 ? TILE_E0 : k == 1 ? TILE_E1 : k == 2 ? TILE_E2 : k == 3 ? TILE_E3
       : k == 4 ? TILE_E4 : k == 5 ? TILE_E5 : k == 6 ? TILE_E6 : k == 7 ? TILE_E7 : 1;
}
__host__ __device__ constexpr int sj_src_dim(int i) { return (SRC_ORDER >> (4 * i)) & 15; }
__host__ __device__ constexpr long long sj_dst_run_length() {
  long long n = 1;
  for (int k = 0; k < DST_RUN_DIMS; ++k) n *= sj_tile_extent(k);
  return n;
}
__host__ __device__ constexpr long long sj_src_run_length() {
  long long n = 1;
  for (int i = 0; i < SRC_RUN_DIMS; ++i) n *= sj_tile_extent(sj_src_dim(i));
  return n;
}
__host__ __device__ constexpr long long sj_tile_volume() {
  long long n = 1;
  for (int k = 0; k < TILE_DIMS; ++k) n *= sj_tile_extent(k);
  return n;
}

// The tile extents as an array for the device code: indexed by an unrolled loop's counter they fold
// to constants, where calls of sj_tile_extent with that counter compiled to run-time loops over jump
// tables (u8 tiles with runs over 5 source dims: 96 indirect branches). Each kernel's shared-memory
// steps (SMEM_STEP) come the same way.
__device__ constexpr int TILE_EXTENT[8] = {(int)sj_tile_extent(0), (int)sj_tile_extent(1), (int)sj_tile_extent(2),
                                           (int)sj_tile_extent(3), (int)sj_tile_extent(4), (int)sj_tile_extent(5),
                                           (int)sj_tile_extent(6), (int)sj_tile_extent(7)};

constexpr long long L_D = sj_dst_run_length();
constexpr long long L_S = sj_src_run_length();
constexpr long long RUNS_D = sj_tile_volume() / L_D;
constexpr long long RUNS_S = sj_tile_volume() / L_S;
constexpr int PA = DST_RUN_DIMS - 1;              // the destination run's tiled dim
constexpr int PB = sj_src_dim(SRC_RUN_DIMS - 1);  // the source run's tiled dim

// Offset of the tile's run r on one side (SOURCE: a source run, else a destination run): r's
// coordinates over that side's dims past its run (the source order's, or dim[DST_RUN_DIMS,
// TILE_DIMS)), each also passed to coordinate(k, c); `inside` is cleared where the other run's tiled
// dim (PA for a source run, PB for a destination run) is one of them and runs past the tile's valid
// units of it.
template <bool SOURCE, typename Coordinate>
__device__ __forceinline__ Index sj_run_offset(const SjArgs& args, unsigned r, Index valid, bool& inside,
                                               Coordinate coordinate) {
  constexpr int first = SOURCE ? SRC_RUN_DIMS : DST_RUN_DIMS;
  Index offset = 0;
#pragma unroll
  for (int o = first; o < TILE_DIMS; ++o) {
    const int k = SOURCE ? sj_src_dim(o) : o;
    const unsigned c = o + 1 < TILE_DIMS ? r % (unsigned)TILE_EXTENT[k] : r;
    r = o + 1 < TILE_DIMS ? r / (unsigned)TILE_EXTENT[k] : 0;
    offset += (Index)c * (SOURCE ? sj_src_stride(args, k) : sj_dst_stride(args, k));
    coordinate(k, c);
    if (BOUNDS && k == (SOURCE ? PA : PB)) inside = inside && (Index)c < valid;
  }
  return offset;
}
