// rearrange rows: the row family (innermost dim shared, unit stride on both sides) and the gather
// family (walked in destination order, so stores stay coalesced). dim[0] is the innermost dim; a
// tile is TILE_COLS units of it times a set of rows, and each thread loads all its ITEMS_Y x ITEMS_X
// units before storing them.
// Without SPLIT_ROWS, dim[1..] index the rows: a tile is TILE_ROWS consecutive rows, each decomposed
// once. With SPLIT_ROWS (short rows), dim[1] is the row dim nearest in the source and dim[2..] the
// others: a tile is TILE_Y1 rows of dim[2..] x TILE_Y2 indices of dim[1], so reads and writes both
// come in runs of several rows; a thread decomposes one row and steps along dim[1].
constexpr int TILE_Y = THREADS / TILE_X;
constexpr long long TILE_COLS = TILE_X * ITEMS_X;
constexpr long long TILE_ROWS = TILE_Y * ITEMS_Y;
constexpr int STEP_Y2 = TILE_Y / TILE_Y1;
constexpr long long TILE_Y2 = STEP_Y2 * ITEMS_Y;

extern "C" __global__ void __launch_bounds__(THREADS)
    sj_kernel(char* __restrict__ dst, const char* __restrict__ src, const SjArgs args) {
  Unit* __restrict__ d = reinterpret_cast<Unit*>(dst);
  const Unit* __restrict__ s = reinterpret_cast<const Unit*>(src);
  const Index length = sj_extent_a(args);
  const Index rows = sj_extent_b(args);
  const Index src_step = SRC_INNER_UNIT ? 1 : sj_src_stride(args, 0);
  const Index dst_step = DST_INNER_UNIT ? 1 : sj_dst_stride(args, 0);
  const int tx = threadIdx.x % TILE_X;
  const int ty = threadIdx.x / TILE_X;
  for (Index tile = blockIdx.x; tile < sj_num_tiles(args); tile += gridDim.x) {
    const Index row_tile = sj_div(tile, args.tiles_x, K_TILES_X);
    const Index col0 = (tile - row_tile * sj_tiles_x(args)) * TILE_COLS + tx;
    Index src_row[ITEMS_Y], dst_row[ITEMS_Y];
    bool row_ok[ITEMS_Y];
    if (SPLIT_ROWS) {
      const Index tile_y2 = sj_div(row_tile, args.tiles_y, K_TILES_Y);
      const Index row = (row_tile - tile_y2 * sj_tiles_y(args)) * TILE_Y1 + ty % TILE_Y1;
      const bool ok = !BOUNDS || row < rows;
      Index src_offset, dst_offset;
      sj_offsets(args, 2, NUM_DIMS - 2, ok ? row : 0, src_offset, dst_offset);
#pragma unroll
      for (int iy = 0; iy < ITEMS_Y; ++iy) {
        const Index y2 = tile_y2 * TILE_Y2 + ty / TILE_Y1 + iy * STEP_Y2;
        row_ok[iy] = ok && (!BOUNDS || y2 < sj_extent(args, 1));
        src_row[iy] = src_offset + y2 * sj_src_stride(args, 1);
        dst_row[iy] = dst_offset + y2 * sj_dst_stride(args, 1);
      }
    } else {
#pragma unroll
      for (int iy = 0; iy < ITEMS_Y; ++iy) {
        const Index row = row_tile * TILE_ROWS + iy * TILE_Y + ty;
        row_ok[iy] = !BOUNDS || row < rows;
        sj_offsets(args, 1, NUM_DIMS - 1, row_ok[iy] ? row : 0, src_row[iy], dst_row[iy]);
      }
    }
    Unit v[ITEMS_Y][ITEMS_X];
#pragma unroll
    for (int iy = 0; iy < ITEMS_Y; ++iy)
#pragma unroll
      for (int ix = 0; ix < ITEMS_X; ++ix) {
        const Index col = col0 + ix * TILE_X;
        if (!BOUNDS || (row_ok[iy] && col < length)) v[iy][ix] = s[src_row[iy] + col * src_step];
      }
#pragma unroll
    for (int iy = 0; iy < ITEMS_Y; ++iy)
#pragma unroll
      for (int ix = 0; ix < ITEMS_X; ++ix) {
        const Index col = col0 + ix * TILE_X;
        if (!BOUNDS || (row_ok[iy] && col < length)) d[dst_row[iy] + col * dst_step] = v[iy][ix];
      }
  }
}
