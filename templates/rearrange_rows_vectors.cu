// rearrange rows in vectors: the row family (innermost dim shared, unit stride on both sides) where a
// row's ends are not 16-byte aligned. dim[0] is the row (extent_a units, row_bytes bytes), dim[1..]
// index the rows, innermost first. Each destination row is written in the aligned 16-byte vectors
// that hold its bytes, a warp side by side along a row, ITEMS_X vectors per lane, ITEMS_Y rows per
// thread. A vector's 16 source bytes lie at one offset (the row's source address minus its
// destination address, mod 16) in two consecutive aligned source vectors: each lane loads the first,
// the next lane's load is the second (for the last lane, lane 0's load of the next item, or past the
// last item an extra load of lane 0's), and the bytes are shifted into place in registers. Only a
// row's two end vectors are stored in pieces.
static_assert(TILE_X == 32, "a warp along a row");
constexpr int TILE_Y = THREADS / TILE_X;
constexpr long long TILE_VECTORS = TILE_X * ITEMS_X;
constexpr long long TILE_ROWS = TILE_Y * ITEMS_Y;

extern "C" __global__ void __launch_bounds__(THREADS)
    sj_kernel(char* __restrict__ dst, const char* __restrict__ src, const SjArgs args) {
  const long long row_bytes = (long long)sj_extent_a(args) * UNIT_BYTES;
  const Index rows = sj_extent_b(args);
  const int tx = threadIdx.x % TILE_X;
  const int ty = threadIdx.x / TILE_X;
  for (Index tile = blockIdx.x; tile < sj_num_tiles(args); tile += gridDim.x) {
    const Index row_tile = sj_div(tile, args.tiles_x, K_TILES_X);
    const long long vector0 = (long long)(tile - row_tile * sj_tiles_x(args)) * TILE_VECTORS + tx;
    Index src_offset[ITEMS_Y], dst_offset[ITEMS_Y];
    bool row_ok[ITEMS_Y];
#pragma unroll
    for (int iy = 0; iy < ITEMS_Y; ++iy) {
      const Index row = row_tile * TILE_ROWS + iy * TILE_Y + ty;
      row_ok[iy] = !BOUNDS || row < rows;
      sj_offsets(args, 1, NUM_DIMS - 1, row_ok[iy] ? row : 0, src_offset[iy], dst_offset[iy]);
    }
    auto src_row = [&](int iy) { return reinterpret_cast<const unsigned char*>(src) + (long long)src_offset[iy] * UNIT_BYTES; };
    auto dst_row = [&](int iy) { return reinterpret_cast<unsigned char*>(dst) + (long long)dst_offset[iy] * UNIT_BYTES; };
    // Row position of vector ix's first byte (negative before the row).
    auto position = [&](int iy, int ix) {
      return (long long)(((unsigned long long)dst_row(iy) & ~15ull) - (unsigned long long)dst_row(iy)) +
             16 * (vector0 + ix * TILE_X);
    };
    auto shift = [&](int iy) { return (int)(((unsigned long long)src_row(iy) - (unsigned long long)dst_row(iy)) & 15); };
    // The aligned source vector holding each vector's first source byte, where it holds a byte of the
    // row; item ITEMS_X of lane 0 is the vector after the last lane's last one.
    sj_bytes<16> low[ITEMS_Y][ITEMS_X + 1];
#pragma unroll
    for (int iy = 0; iy < ITEMS_Y; ++iy)
#pragma unroll
      for (int ix = 0; ix <= ITEMS_X; ++ix) {
        low[iy][ix] = sj_bytes<16>{};
        if (!row_ok[iy] || (ix == ITEMS_X && (tx != 0 || shift(iy) == 0))) continue;
        const unsigned char* row = src_row(iy);
        const unsigned char* aligned =
            reinterpret_cast<const unsigned char*>((unsigned long long)(row + position(iy, ix)) & ~15ull);
        if (aligned + 16 > row && aligned < row + row_bytes) low[iy][ix] = *reinterpret_cast<const sj_bytes<16>*>(aligned);
      }
#pragma unroll
    for (int iy = 0; iy < ITEMS_Y; ++iy)
#pragma unroll
      for (int ix = 0; ix < ITEMS_X; ++ix) {
        sj_bytes<16> high;
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          high.v[m] = __shfl_down_sync(0xffffffffu, low[iy][ix].v[m], 1);
          const unsigned next_item = __shfl_sync(0xffffffffu, low[iy][ix + 1].v[m], 0);
          if (tx == TILE_X - 1) high.v[m] = next_item;
        }
        const long long p = position(iy, ix);
        if (!row_ok[iy] || p >= row_bytes) continue;
        sj_store_in_run(dst_row(iy), p, row_bytes, sj_shifted_vector(low[iy][ix], high, shift(iy)));
      }
  }
}
