#include "rearrange_executor.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <vector>

#include "core/fastdiv.hpp"

namespace shapejit::test {
namespace {

using plan::RearrangeKernelArgs;
using plan::KernelDivisor;
using plan::RearrangeFamily;
using plan::RearrangeSpec;

// sj_div of the template: a fast division for 32-bit indices, a plain one for 64-bit.
std::int64_t divide(std::int64_t n, const KernelDivisor& d, const RearrangeSpec& s) {
  if (s.index64 || s.exact) return n / d.value;
  if (n < 0 || n > 0xffffffffLL) throw std::logic_error("32-bit fast division of an out-of-range numerator");
  return fast_div(static_cast<std::uint32_t>(n), FastDivisor{static_cast<std::uint32_t>(d.value), d.multiplier, d.shift});
}

// sj_offsets of the template.
void offsets(const RearrangeKernelArgs& a, const RearrangeSpec& s, int first, int count, std::int64_t n, std::int64_t& src,
             std::int64_t& dst) {
  src = dst = 0;
  for (int k = first; k < first + count; ++k) {
    std::int64_t c = n;
    if (k + 1 < first + count) {
      const std::int64_t q = divide(n, a.dim[k].extent, s);
      c = n - q * a.dim[k].extent.value;
      n = q;
    }
    src += c * a.dim[k].src_stride;
    dst += c * a.dim[k].dst_stride;
  }
}

// Source (destination) offset of index n over dims [first, first + count): a group's table entry.
std::int64_t src_offset(const RearrangeKernelArgs& a, const RearrangeSpec& s, int first, int count, std::int64_t n) {
  std::int64_t src = 0, dst = 0;
  offsets(a, s, first, count, n, src, dst);
  return src;
}
std::int64_t dst_offset(const RearrangeKernelArgs& a, const RearrangeSpec& s, int first, int count, std::int64_t n) {
  std::int64_t src = 0, dst = 0;
  offsets(a, s, first, count, n, src, dst);
  return dst;
}

void copy_units(std::uint8_t* to, const std::uint8_t* from, int units, int unit) {
  std::memcpy(to, from, static_cast<std::size_t>(units) * static_cast<std::size_t>(unit));
}

// A global access of `bytes` must be aligned to its width, as the GPU requires.
void check_vector(const std::uint8_t* address, int bytes) {
  if (reinterpret_cast<std::uintptr_t>(address) % static_cast<std::uintptr_t>(bytes) != 0)
    throw std::logic_error("misaligned global vector access");
}

// Stores the `vec` units at `units` as units [first, first + vec) of the run of `length` units at
// `run`: one aligned vector where they lie inside it, else only the units inside.
void store_in_run(std::uint8_t* run, std::int64_t first, int vec, std::int64_t length, const std::uint8_t* units,
                  int unit) {
  if (first >= 0 && first + vec <= length) {
    check_vector(run + first * unit, vec * unit);
    copy_units(run + first * unit, units, vec, unit);
  } else {
    for (int i = 0; i < vec; ++i)
      if (first + i >= 0 && first + i < length) copy_units(run + (first + i) * unit, units + i * unit, 1, unit);
  }
}

void execute_rows(const plan::RearrangeVariant& v, std::uint8_t* dst, const std::uint8_t* src) {
  const RearrangeSpec& s = v.spec;
  const RearrangeKernelArgs& a = v.args;
  const int u = s.unit_bytes;
  const int tile_y = s.threads / s.tile_x;
  const std::int64_t tile_cols = std::int64_t{s.tile_x} * s.items_x, tile_rows = std::int64_t{tile_y} * s.items_y;
  const std::int64_t src_step = s.src_inner_unit ? 1 : a.dim[0].src_stride;
  const std::int64_t dst_step = s.dst_inner_unit ? 1 : a.dim[0].dst_stride;
  const int step2 = tile_y / s.tile_y1;
  const std::int64_t tile_y2 = std::int64_t{step2} * s.items_y;
  for (std::int64_t tile = 0; tile < a.num_tiles; ++tile) {
    const std::int64_t row_tile = divide(tile, a.tiles_x, s);
    for (int t = 0; t < s.threads; ++t) {
      const int tx = t % s.tile_x, ty = t / s.tile_x;
      const std::int64_t col0 = (tile - row_tile * a.tiles_x.value) * tile_cols + tx;
      for (int iy = 0; iy < s.items_y; ++iy) {
        std::int64_t src_row, dst_row;
        bool row_ok;
        if (s.split_rows) {
          const std::int64_t t2 = divide(row_tile, a.tiles_y, s);
          const std::int64_t row = (row_tile - t2 * a.tiles_y.value) * s.tile_y1 + ty % s.tile_y1;
          const std::int64_t y2 = t2 * tile_y2 + ty / s.tile_y1 + iy * step2;
          row_ok = row < a.extent_b && y2 < a.dim[1].extent.value;
          if (!s.bounds && !row_ok) throw std::logic_error("rows: a row past the end without bounds checks");
          offsets(a, s, 2, s.num_dims - 2, row < a.extent_b ? row : 0, src_row, dst_row);
          src_row += y2 * a.dim[1].src_stride;
          dst_row += y2 * a.dim[1].dst_stride;
        } else {
          const std::int64_t row = row_tile * tile_rows + iy * tile_y + ty;
          row_ok = !s.bounds || row < a.extent_b;
          if (!s.bounds && row >= a.extent_b) throw std::logic_error("rows: a row past the end without bounds checks");
          offsets(a, s, 1, s.num_dims - 1, row_ok ? row : 0, src_row, dst_row);
        }
        for (int ix = 0; ix < s.items_x; ++ix) {
          const std::int64_t col = col0 + ix * s.tile_x;
          if (!s.bounds && col >= a.extent_a) throw std::logic_error("rows: a column past the end without bounds checks");
          if (row_ok && col < a.extent_a) {
            std::uint8_t* to = dst + (dst_row + col * dst_step) * u;
            const std::uint8_t* from = src + (src_row + col * src_step) * u;
            check_vector(to, u);
            check_vector(from, u);
            copy_units(to, from, 1, u);
          }
        }
      }
    }
  }
}

// rearrange_rows_vectors.cu: each destination row written in the aligned 16-byte vectors that hold its
// bytes, a warp along a row. Each lane loads the aligned source vector holding its vector's first
// source byte, where that holds a byte of the row; the next one comes from the next lane, the last
// lane's from lane 0's next item, and past the last item from lane 0's own extra load (where the
// row's shift is not 0). A byte taken from a vector nobody loaded is zero, so the copy comes out wrong.
void execute_vector_rows(const plan::RearrangeVariant& v, std::uint8_t* dst, const std::uint8_t* src) {
  const RearrangeSpec& s = v.spec;
  const RearrangeKernelArgs& a = v.args;
  const std::int64_t row_bytes = a.extent_a * s.unit_bytes;
  constexpr int kLanes = 32;
  if (s.tile_x != kLanes || s.threads % kLanes != 0) throw std::logic_error("vector rows: a warp along a row");
  if (a.dim[0].extent.value != a.extent_a || a.dim[0].src_stride != 1 || a.dim[0].dst_stride != 1)
    throw std::logic_error("vector rows: dim[0] must be the shared row");
  const int tile_y = s.threads / kLanes;
  const std::int64_t tile_vectors = std::int64_t{kLanes} * s.items_x, tile_rows = std::int64_t{tile_y} * s.items_y;
  if ((row_bytes + 30) / 16 > a.tiles_x.value * tile_vectors)
    throw std::logic_error("vector rows: the tiles along a row miss some of its vectors");
  auto low = [](const std::uint8_t* p) { return static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(p) & 15); };
  using Vector = std::array<std::uint8_t, 16>;
  for (std::int64_t tile = 0; tile < a.num_tiles; ++tile) {
    const std::int64_t row_tile = divide(tile, a.tiles_x, s);
    const std::int64_t vector0 = (tile - row_tile * a.tiles_x.value) * tile_vectors;
    for (int ty = 0; ty < tile_y; ++ty)
      for (int iy = 0; iy < s.items_y; ++iy) {
        const std::int64_t row = row_tile * tile_rows + iy * tile_y + ty;
        if (row >= a.extent_b) {
          if (!s.bounds) throw std::logic_error("vector rows: a row past the end without bounds checks");
          continue;
        }
        std::int64_t src_row = 0, dst_row = 0;
        offsets(a, s, 1, s.num_dims - 1, row, src_row, dst_row);
        const std::uint8_t* from_row = src + src_row * s.unit_bytes;
        std::uint8_t* to_row = dst + dst_row * s.unit_bytes;
        const std::int64_t shift = (low(from_row) - low(to_row)) & 15;
        auto position = [&](int lane, int ix) { return 16 * (vector0 + ix * kLanes + lane) - low(to_row); };
        // loaded[ix][lane]: item ITEMS_X is lane 0's extra load.
        std::vector<std::array<Vector, kLanes>> loaded(static_cast<std::size_t>(s.items_x + 1));
        for (int ix = 0; ix <= s.items_x; ++ix)
          for (int lane = 0; lane < kLanes; ++lane) {
            Vector& vector = loaded[static_cast<std::size_t>(ix)][static_cast<std::size_t>(lane)];
            vector.fill(0);
            if (ix == s.items_x && (lane != 0 || shift == 0)) continue;
            const std::uint8_t* first = from_row + position(lane, ix);
            const std::uint8_t* aligned = first - low(first);
            if (aligned + 16 > from_row && aligned < from_row + row_bytes) {
              check_vector(aligned, 16);
              std::memcpy(vector.data(), aligned, 16);
            }
          }
        for (int ix = 0; ix < s.items_x; ++ix)
          for (int lane = 0; lane < kLanes; ++lane) {
            const std::int64_t p = position(lane, ix);
            if (p >= row_bytes) continue;
            const Vector& first = loaded[static_cast<std::size_t>(ix)][static_cast<std::size_t>(lane)];
            const Vector& second = lane + 1 < kLanes ? loaded[static_cast<std::size_t>(ix)][static_cast<std::size_t>(lane + 1)]
                                                     : loaded[static_cast<std::size_t>(ix + 1)][0];
            check_vector(to_row + p, 16);
            for (std::int64_t k = std::max<std::int64_t>(0, -p); k < 16 && p + k < row_bytes; ++k) {
              const std::int64_t at = shift + k;
              to_row[p + k] = at < 16 ? first[static_cast<std::size_t>(at)] : second[static_cast<std::size_t>(at - 16)];
            }
          }
      }
  }
}

// sj_tile of the templates: tile t's first A and B indices and the offsets of its outer coordinates.
struct TileOrigin {
  std::int64_t a0, b0, src_base, dst_base;
};

TileOrigin tile_origin(const RearrangeKernelArgs& a, const RearrangeSpec& s, std::int64_t t, int first_outer, bool a_fastest) {
  TileOrigin o{};
  const KernelDivisor& fastest = a_fastest ? a.tiles_y : a.tiles_x;
  const KernelDivisor& next = a_fastest ? a.tiles_x : a.tiles_y;
  const std::int64_t rest = divide(t, fastest, s);
  const std::int64_t outer = divide(rest, next, s);
  const std::int64_t fastest_index = t - rest * fastest.value, next_index = rest - outer * next.value;
  // Tiled kernels' tiles of skewed stores step by the A units each destination row stores.
  const bool tiled = s.family == RearrangeFamily::transpose || s.family == RearrangeFamily::packed;
  o.a0 = (a_fastest ? fastest_index : next_index) * (tiled && s.skew_store ? s.tile_a - s.vec_a : s.tile_a);
  o.b0 = (a_fastest ? next_index : fastest_index) * s.tile_b;
  offsets(a, s, first_outer, s.num_dims - first_outer, outer, o.src_base, o.dst_base);
  return o;
}

// Shared memory of one tile, with the checks the hardware would not make for us.
struct SharedTile {
  const RearrangeSpec& s;
  std::vector<std::uint8_t> bytes;
  explicit SharedTile(const RearrangeSpec& spec)
      : s(spec),
        bytes(static_cast<std::size_t>(staged_units(spec) * spec.unit_bytes), 0xee) {}
  static int staged_units(const RearrangeSpec& spec) {
    if (spec.skew_runs) return plan::skewed_runs_staged_units(spec);
    return (spec.load_linear ? spec.tile_a : spec.tile_b) * spec.pitch;
  }
  std::uint8_t* at(int position, int units) {
    if (position < 0 || static_cast<std::size_t>(position + units) * s.unit_bytes > bytes.size())
      throw std::logic_error("tiled: shared-memory access out of range");
    if ((static_cast<std::size_t>(position) * s.unit_bytes) % (static_cast<std::size_t>(units) * s.unit_bytes) != 0)
      throw std::logic_error("tiled: misaligned shared-memory vector");
    return bytes.data() + static_cast<std::size_t>(position) * s.unit_bytes;
  }
};

}  // namespace

int tiled_rotated(const RearrangeSpec& s, int l) {
  if (s.rotate_span == 0) return l;
  if (!s.store_linear || s.load_linear || s.swizzle || s.rotate_span % s.store_linear != 0 ||
      (s.rotate_span & (s.rotate_span - 1)) != 0 ||
      s.store_linear % s.vec_a != 0 || (s.tile_a * s.tile_b) % s.rotate_span != 0)
    throw std::logic_error("tiled: rotated spans that do not tile the tile in whole store vectors");
  const int vectors = s.rotate_span / s.store_linear, span = l / s.rotate_span;
  return span * s.rotate_span + (l % s.rotate_span / s.store_linear + span) % vectors * s.store_linear +
         l % s.store_linear;
}

int tiled_smem_pos(const RearrangeSpec& s, int a, int b) {
  if (s.a_pass > 0) {
    const int a_low = a % s.a_chain, b_low = b % s.a_pass;
    return tiled_rotated(s, a_low + s.a_chain * b_low + s.a_pass * (a - a_low) + s.tile_a * (b - b_low));
  }
  if (s.load_linear) return a * s.pitch + b;
  if (s.swizzle)
    return b * s.pitch + (((a / s.vec_a) ^ (b / s.vec_b * s.swizzle_step % s.swizzle_period)) * s.vec_a) + a % s.vec_a;
  return tiled_rotated(s, b * s.pitch + a);
}

namespace {

// Source units the tensor spans from the kernel's src pointer, [first, end) (strides may be negative).
struct SourceSpan {
  std::int64_t first = 0, end = 1;
  void check(std::int64_t offset, int units, const char* what) const {
    if (offset < first || offset + units > end) throw std::logic_error(what);
  }
};
// Misalignment, in units of `unit` bytes below `units`, of the unit at `p`: from the real address,
// as the kernels see it.
int misalignment_at(const std::uint8_t* p, int unit, std::int64_t units) {
  return static_cast<int>((reinterpret_cast<std::uintptr_t>(p) / static_cast<std::uintptr_t>(unit)) %
                          static_cast<std::uintptr_t>(units));
}

SourceSpan source_span(const RearrangeKernelArgs& a, const RearrangeSpec& s) {
  SourceSpan span;
  for (int k = 0; k < s.num_dims; ++k) {
    const std::int64_t reach = (a.dim[k].extent.value - 1) * a.dim[k].src_stride;
    (reach < 0 ? span.first : span.end) += reach;
  }
  return span;
}

void execute_tiled(const plan::RearrangeVariant& v, std::uint8_t* dst, const std::uint8_t* src) {
  const RearrangeSpec& s = v.spec;
  const RearrangeKernelArgs& a = v.args;
  const int u = s.unit_bytes;
  const int micro_a = s.tile_a / s.vec_a, micro_b = s.tile_b / s.vec_b, micro = micro_a * micro_b;
  const int first_outer = s.dims_a + s.dims_b;
  const std::int64_t ea = a.extent_a, eb = a.extent_b;
  if (s.b_chain > 0 && s.b_chain % s.vec_b != 0)
    throw std::logic_error("tiled: B vectors cross the end of B's source chain");
  if (s.a_pass > 0 && (!s.store_linear || s.load_linear || s.a_chain % s.vec_a != 0 || s.tile_a % s.a_chain != 0 ||
                       s.tile_b % s.a_pass != 0 || a.extent_a % s.tile_a != 0))
    throw std::logic_error("tiled: a passing tile that does not store whole chains in destination order");
  if (s.skew_load && (u > 2 || s.vec_b * u < 4 || s.load_linear || s.b_chain || a.dim[s.dims_a].src_stride != 1))
    throw std::logic_error("tiled: skewed loads need rows of whole words of 1- or 2-byte units along a contiguous B");
  if (s.skew_store && (s.dims_a != 1 || s.vec_a * u != 16 || s.store_linear || s.load_linear || s.a_pass ||
                       s.skew_load || !s.bounds || s.tile_a % s.vec_a != 0 || s.tile_a < 2 * s.vec_a))
    throw std::logic_error("tiled: skewed stores need one A dim, 16-byte A vectors and micro-tile moves");
  // A tile of skewed stores loads its A units from a0 - lead.
  const int lead = s.skew_store ? s.vec_a : 0;
  // Skewed micro-tile rows (sj_load_skewed): the aligned vectors around the row where they lie inside
  // the source tensor's span, funnel-shifted; else unit by unit. Misalignments come from the real
  // addresses; every read is checked against the span.
  const SourceSpan span = source_span(a, s);
  auto load_skewed_row = [&](std::int64_t at, std::uint8_t* out) {
    const int vb = s.vec_b;
    const int m = misalignment_at(src + at * u, u, vb);
    const int vectors = m ? 2 : 1;
    if (at - m >= span.first && at - m + vectors * vb <= span.end) {
      std::vector<std::uint8_t> pair(static_cast<std::size_t>(2 * vb * u), 0xee);
      for (int k = 0; k < vectors; ++k) {
        const std::int64_t first = at - m + std::int64_t{k} * vb;
        span.check(first, vb, "tiled: a skewed load outside the source tensor");
        check_vector(src + first * u, vb * u);
        copy_units(pair.data() + k * vb * u, src + first * u, vb, u);
      }
      std::memcpy(out, pair.data() + m * u, static_cast<std::size_t>(vb * u));
    } else {
      for (int j = 0; j < vb && at + j < span.end; ++j) {
        span.check(at + j, 1, "tiled: a skewed unit outside the source tensor");
        copy_units(out + j * u, src + (at + j) * u, 1, u);
      }
    }
  };
  std::vector<std::int64_t> table_a(static_cast<std::size_t>(s.tile_a)), table_b(static_cast<std::size_t>(s.tile_b)),
      table_b_src(static_cast<std::size_t>(s.tile_b));
  // A fixed table holds the offsets of the tile's own indices (filled once); the others those of the
  // tile's indices.
  auto fill_tables = [&](std::int64_t a0, std::int64_t b0, bool first) {
    std::int64_t so, dd;
    if (s.dims_a > 1 && (first || !s.fixed_a))
      for (int i = 0; i < s.tile_a; ++i) {
        offsets(a, s, 0, s.dims_a, s.fixed_a ? i : std::min(a0 + i, ea - 1), so, dd);
        table_a[static_cast<std::size_t>(i)] = so;
      }
    if (s.dims_b > 1 && (first || !s.fixed_b))
      for (int i = 0; i < s.tile_b; ++i) {
        offsets(a, s, s.dims_a, s.dims_b, s.fixed_b ? i : std::min(b0 + i, eb - 1), so, dd);
        table_b[static_cast<std::size_t>(i)] = dd;
        table_b_src[static_cast<std::size_t>(i)] = so;
      }
  };
  for (std::int64_t t = 0; t < a.num_tiles; ++t) {
    auto [a0, b0, src_base, dst_base] = tile_origin(a, s, t, first_outer, s.a_first);
    fill_tables(a0, b0, t == 0);
    // Fixed tables: the tile's base moves by its first indices' offsets.
    std::int64_t so, dd;
    if (s.dims_a > 1 && s.fixed_a) {
      offsets(a, s, 0, s.dims_a, a0, so, dd);
      src_base += so;
    }
    if (s.dims_b > 1 && s.fixed_b) {
      offsets(a, s, s.dims_a, s.dims_b, b0, so, dd);
      dst_base += dd;
      if (s.b_chain > 0) src_base += so;
    }
    auto src_a = [&](int la) {
      return s.dims_a > 1 ? table_a[static_cast<std::size_t>(la)] : (a0 - lead + la) * a.dim[0].src_stride;
    };
    auto src_b = [&](int lb) {
      if (s.b_chain > 0) return table_b_src[static_cast<std::size_t>(lb)];
      return s.dims_b > 1 ? b0 + lb : (b0 + lb) * a.dim[s.dims_a].src_stride;
    };
    auto dst_b = [&](int lb) { return s.dims_b > 1 ? table_b[static_cast<std::size_t>(lb)] : (b0 + lb) * a.dim[s.dims_a].dst_stride; };
    if (!s.bounds && (a0 + s.tile_a > ea || b0 + s.tile_b > eb))
      throw std::logic_error("tiled: a tile past the end without bounds checks");

    SharedTile tile(s);
    if (s.load_linear) {
      if (s.pitch != s.tile_b || b0 != 0) throw std::logic_error("tiled: linear loads need whole rows back to back");
      if (s.load_run < 1 || s.tile_a % s.load_run != 0 || s.load_linear > s.load_run * s.tile_b)
        throw std::logic_error("tiled: linear loads over runs that do not tile the tile");
      const std::int64_t count = (s.bounds ? std::min<std::int64_t>(s.tile_a, ea - a0) : s.tile_a) * s.tile_b;
      const int run_units = s.load_run * s.tile_b;
      if (s.load_run != s.tile_a && count % run_units != 0)
        throw std::logic_error("tiled: linear loads over a tile of partial runs");
      auto linear_src_a = [&](int la) { return s.dims_a > 1 ? table_a[static_cast<std::size_t>(la)] : (a0 + la) * s.tile_b; };
      auto at = [&](int l) { return src_base + linear_src_a(l / run_units * s.load_run) + l % run_units; };
      const int vectors = (s.tile_a * s.tile_b + s.load_linear - 1) / s.load_linear;
      for (int k = 0; k < vectors; ++k) {
        const int l = k * s.load_linear;
        if (l + s.load_linear <= count) {
          if ((l + s.load_linear - 1) / run_units != l / run_units)
            throw std::logic_error("tiled: a linear load crosses the end of its run");
          check_vector(src + at(l) * u, s.load_linear * u);
          copy_units(tile.at(l, s.load_linear), src + at(l) * u, s.load_linear, u);
        } else {
          for (int x = 0; x < s.load_linear; ++x)
            if (l + x < count) copy_units(tile.at(l + x, 1), src + at(l + x) * u, 1, u);
        }
      }
    } else {
      for (int m = 0; m < micro; ++m) {
        const int la = m / micro_b * s.vec_a, lb = m % micro_b * s.vec_b;
        std::vector<std::uint8_t> in(static_cast<std::size_t>(s.vec_a * s.vec_b * u), 0xdd);
        for (int i = 0; i < s.vec_a; ++i)
          if (const std::int64_t a_index = a0 - lead + la + i;
              !s.bounds || (a_index >= 0 && a_index < ea && b0 + lb < eb)) {
            const std::int64_t at = src_base + src_a(la + i) + src_b(lb);
            if (s.skew_load) {
              load_skewed_row(at, in.data() + i * s.vec_b * u);
            } else {
              check_vector(src + at * u, s.vec_b * u);
              copy_units(in.data() + i * s.vec_b * u, src + at * u, s.vec_b, u);
            }
          }
        for (int j = 0; j < s.vec_b; ++j) {
          std::uint8_t* row = tile.at(tiled_smem_pos(s, la, lb + j), s.vec_a);
          for (int i = 0; i < s.vec_a; ++i) copy_units(row + i * u, in.data() + (i * s.vec_b + j) * u, 1, u);
        }
      }
    }

    if (s.store_linear) {
      if (s.pitch != s.tile_a || (a0 != 0 && s.a_pass == 0))
        throw std::logic_error("tiled: linear stores need whole rows back to back");
      if (s.store_run < 1 || s.tile_b % s.store_run != 0 || s.store_linear > s.store_run * s.tile_a)
        throw std::logic_error("tiled: linear stores over runs that do not tile the tile");
      const std::int64_t count = (s.bounds ? std::min<std::int64_t>(s.tile_b, eb - b0) : s.tile_b) * s.tile_a;
      const int run_units = s.store_run * s.tile_a;
      const std::int64_t a_start = std::int64_t{s.a_pass} * a0;
      auto at = [&](int l) { return dst_base + a_start + dst_b(l / run_units * s.store_run) + l % run_units; };
      if (s.store_run != s.tile_b && count % run_units != 0)
        throw std::logic_error("tiled: linear stores over a tile of partial runs");
      // The template takes TILE_A as the stride of a single B dim: a passing tile's lone B dim is
      // the passed one, which the tile spans whole (only dst_b(0) is used).
      if (s.dims_b == 1 && (s.a_pass == 0 ? a.dim[s.dims_a].dst_stride != s.tile_a : s.tile_b != eb))
        throw std::logic_error("tiled: linear stores of one B dim whose stride is not TILE_A");
      if (s.skew_runs) {
        // Aligned vector j of a run misaligned by `shift` units holds its units [j * vec - shift, +
        // vec), staged from `place` on: the aligned staged vector at or before it (vector 0 where that
        // lies before the tile) and the next, shifted.
        const int vec = s.store_linear;
        if (vec * u != 16 || s.rotate_span != 0 || s.skew_store || s.swizzle || s.pitch != s.tile_a)
          throw std::logic_error("tiled: skewed runs need 16-byte stores from a tile staged in destination order");
        // A tile of one run may end early; shorter runs span whole B dims.
        const int length = s.store_run == s.tile_b ? static_cast<int>(count) : run_units;
        for (int run = 0; run * run_units < count; ++run) {
          std::uint8_t* to = dst + at(run * run_units) * u;
          const int shift = misalignment_at(to, u, vec);
          for (int j = 0; j * vec - shift < length; ++j) {
            std::vector<std::uint8_t> pair(static_cast<std::size_t>(2 * vec * u));
            const int first = j * vec - shift, place = run * run_units + first;
            const int aligned = (place + vec) / vec * vec - vec;
            std::memcpy(pair.data(), tile.at(std::max(aligned, 0), vec), static_cast<std::size_t>(vec * u));
            std::memcpy(pair.data() + vec * u, tile.at(aligned + vec, vec), static_cast<std::size_t>(vec * u));
            store_in_run(to, first, vec, length, pair.data() + (place - aligned) * u, u);
          }
        }
      } else {
        const int vectors = (s.tile_a * s.tile_b + s.store_linear - 1) / s.store_linear;
        for (int k = 0; k < vectors; ++k) {
          const int l = k * s.store_linear;
          if (l + s.store_linear <= count) {
            if ((l + s.store_linear - 1) / run_units != l / run_units)
              throw std::logic_error("tiled: a linear store crosses the end of its run");
            check_vector(dst + at(l) * u, s.store_linear * u);
            copy_units(dst + at(l) * u, tile.at(tiled_rotated(s, l), s.store_linear), s.store_linear, u);
          } else if (l < count) {
            // The kernel stores a ragged end unit by unit only where the tile is one run.
            if (s.store_run != s.tile_b) throw std::logic_error("tiled: a ragged linear store over short runs");
            for (int x = 0; x < s.store_linear; ++x)
              if (l + x < count) copy_units(dst + at(l + x) * u, tile.at(tiled_rotated(s, l + x), 1), 1, u);
          }
        }
      }
    } else if (s.skew_store) {
      // Vector la / vec_a of row lb: A indices [a0 - shift + la, + vec_a), staged in the tile's
      // vectors at la and la + vec_a from place vec_a - shift on.
      const int stored = micro_a - 1;
      for (int k = 0; k < s.tile_b * stored; ++k) {
        const int la = k % stored * s.vec_a, lb = k / stored;
        if (b0 + lb >= eb) continue;
        const std::int64_t row = dst_base + dst_b(lb);
        const int shift = misalignment_at(dst + (row + a0) * u, u, s.vec_a);
        const std::int64_t x = a0 - shift + la;
        std::vector<std::uint8_t> pair(static_cast<std::size_t>(2 * s.vec_a * u));
        std::memcpy(pair.data(), tile.at(tiled_smem_pos(s, la, lb), s.vec_a), static_cast<std::size_t>(s.vec_a * u));
        std::memcpy(pair.data() + s.vec_a * u, tile.at(tiled_smem_pos(s, la + s.vec_a, lb), s.vec_a),
                    static_cast<std::size_t>(s.vec_a * u));
        const std::uint8_t* units = pair.data() + (s.vec_a - shift) * u;
        store_in_run(dst + row * u, x, s.vec_a, ea, units, u);
      }
    } else {
      for (int k = 0; k < s.tile_b * micro_a; ++k) {
        const int la = k % micro_a * s.vec_a, lb = k / micro_a;
        if (!s.bounds || (a0 + la < ea && b0 + lb < eb)) {
          const std::int64_t at = dst_base + a0 + la + dst_b(lb);
          check_vector(dst + at * u, s.vec_a * u);
          if (s.load_linear) {  // rows by A index: gather the vector
            for (int i = 0; i < s.vec_a; ++i) copy_units(dst + (at + i) * u, tile.at(tiled_smem_pos(s, la + i, lb), 1), 1, u);
          } else {
            copy_units(dst + at * u, tile.at(tiled_smem_pos(s, la, lb), s.vec_a), s.vec_a, u);
          }
        }
      }
    }
  }
}

}  // namespace

void reference_rearrange(std::uint8_t* dst_base, const TensorDesc& dst, const std::uint8_t* src_base,
                         const TensorDesc& src) {
  const std::size_t rank = dst.shape.size();
  const std::int64_t e = static_cast<std::int64_t>(dst.element_size());
  if (dst.numel() == 0) return;
  const auto ds = dst.effective_strides(), ss = src.effective_strides();
  std::vector<std::int64_t> index(rank, 0);
  for (;;) {
    std::int64_t d = 0, s = 0;
    for (std::size_t i = 0; i < rank; ++i) {
      d += index[i] * ds[i];
      s += index[i] * ss[i];
    }
    std::memcpy(dst_base + d * e, src_base + s * e, static_cast<std::size_t>(e));
    std::size_t i = rank;
    while (i > 0 && ++index[i - 1] == dst.shape[i - 1]) index[--i] = 0;
    if (i == 0) return;
  }
}

// The skewed template: misalignments come from the real buffer addresses, as on the GPU.
void execute_skewed(const plan::RearrangeVariant& v, std::uint8_t* dst, const std::uint8_t* src) {
  const RearrangeSpec& s = v.spec;
  const RearrangeKernelArgs& a = v.args;
  const int u = s.unit_bytes, vec = s.vec_a;
  if (vec * u != 16) throw std::logic_error("skewed: vectors must be 16 bytes");
  if (a.dim[0].dst_stride != 1 || a.dim[1].src_stride != 1)
    throw std::logic_error("skewed: A must be unit-stride in dst and B in src");
  const std::int64_t ea = a.extent_a, eb = a.extent_b, sa = a.dim[0].src_stride, db = a.dim[1].dst_stride;
  auto misalignment = [&](const std::uint8_t* base, std::int64_t offset) {
    return std::int64_t{misalignment_at(base + offset * u, u, vec)};
  };
  const int chunks_a = s.tile_a / vec;
  for (std::int64_t t = 0; t < a.num_tiles; ++t) {
    const auto [a0, b0, src_base, dst_base] = tile_origin(a, s, t, 2, s.a_first);
    SharedTile tile(s);
    auto smem = [&](std::int64_t lb, std::int64_t p) {
      return tile.at(static_cast<int>(lb * s.tile_a + ((p / vec) ^ ((lb / vec) % chunks_a)) * vec + p % vec), 1);
    };
    for (std::int64_t row = 0; row < s.tile_a + vec - 1; ++row) {
      const std::int64_t ai = a0 - (vec - 1) + row;
      if (ai < 0 || ai >= ea) continue;
      const std::int64_t src_row = src_base + ai * sa;
      for (int k = 0; k <= s.tile_b / vec; ++k) {
        const std::int64_t c0 = b0 - misalignment(src, src_row + b0) + k * vec;
        if (c0 >= 0 && c0 + vec <= eb) check_vector(src + (src_row + c0) * u, 16);
        for (int x = 0; x < vec; ++x) {
          const std::int64_t b = c0 + x, lb = b - b0;
          if (b < 0 || b >= eb || lb < 0 || lb >= s.tile_b) continue;
          const std::int64_t p = ai - a0 + misalignment(dst, dst_base + b * db);
          if (p >= 0 && p < s.tile_a) copy_units(smem(lb, p), src + (src_row + b) * u, 1, u);
        }
      }
    }
    for (std::int64_t lb = 0; lb < s.tile_b && b0 + lb < eb; ++lb) {
      const std::int64_t dst_row = dst_base + (b0 + lb) * db;
      for (int j = 0; j < chunks_a; ++j) {
        const std::int64_t x0 = a0 - misalignment(dst, dst_row) + j * vec;
        if (x0 >= 0 && x0 + vec <= ea) check_vector(dst + (dst_row + x0) * u, 16);
        for (int x = 0; x < vec; ++x)
          if (x0 + x >= 0 && x0 + x < ea) copy_units(dst + (dst_row + x0 + x) * u, smem(lb, j * vec + x), 1, u);
      }
    }
  }
}

// The words template: 1- or 2-byte units loaded in 4-byte words, in blocks of several words a row, and
// stored in vectors of store_words words; misalignments come from the real addresses.
using Word = std::array<std::uint8_t, 4>;

void execute_words(const plan::RearrangeVariant& v, std::uint8_t* dst, const std::uint8_t* src) {
  const RearrangeSpec& s = v.spec;
  const RearrangeKernelArgs& a = v.args;
  const int u = s.unit_bytes;
  if (u != 1 && u != 2) throw std::logic_error("words: units must be 1 or 2 bytes");
  const int w = 4 / u;  // units per word
  if (a.dim[0].dst_stride != 1 || a.dim[s.dims_a].src_stride != 1)
    throw std::logic_error("words: A must be unit-stride in dst and B in src");
  const int vec = w * s.store_words;  // units per store vector
  if (s.tile_a % vec != 0 || s.tile_b % w != 0)
    throw std::logic_error("words: tiles must hold whole vectors and words");
  const std::int64_t ea = a.extent_a, eb = a.extent_b;
  // Offsets of A index ai in src and of B index bi in dst: through the groups' dims, as the tables hold.
  auto src_row = [&](std::int64_t ai) { return src_offset(a, s, 0, s.dims_a, ai); };
  auto dst_row = [&](std::int64_t bi) { return dst_offset(a, s, s.dims_a, s.dims_b, bi); };
  const int lead = s.skew_store ? vec : 0;  // units a tile reads before a0
  const int vecs_a = s.tile_a / vec, groups_a = (lead + s.tile_a) / w, words_b = s.tile_b / w;
  if (s.pitch < groups_a || s.pitch % 2 == 0) throw std::logic_error("words: pitch must be odd and hold every group");
  auto misalignment = [&](const std::uint8_t* base, std::int64_t offset, int units) {
    return misalignment_at(base + offset * u, u, units);
  };
  auto funnel = [&](const Word& low, const Word& high, int shift) {
    std::uint8_t pair[8];
    std::memcpy(pair, low.data(), 4);
    std::memcpy(pair + 4, high.data(), 4);
    Word out;
    std::memcpy(out.data(), pair + shift * u, 4);
    return out;
  };
  // Every global read must lie inside the source tensor.
  const SourceSpan span = source_span(a, s);
  auto read_word = [&](std::int64_t offset) {
    span.check(offset, w, "words: a load outside the source tensor");
    const std::uint8_t* at = src + offset * u;
    check_vector(at, 4);
    Word word;
    std::memcpy(word.data(), at, 4);
    return word;
  };
  // Load blocks as the template issues them: load_words words along B of each of w rows from one
  // aligned address per row, reading aligned word j where word j is whole (sj_source) or, on a
  // misaligned row, word j - 1 is; a word that is not whole is read unit by unit. Tiles whose B range
  // with its words lies inside skip the checks (sj_inside_b): every word is whole there.
  auto fills = [&](int words) { return words_b % words == 0 && words_b / words * groups_a >= s.threads; };
  const int load_words = 8 / w >= 4 && fills(4) ? 4 : fills(2) ? 2 : 1;
  const int loaded_words = load_words + (s.skew_load ? 1 : 0);
  const int chunks = words_b / load_words, lanes_b = std::min(chunks, 32 / (w * load_words));
  const int load_items = lanes_b * groups_a * ((chunks + lanes_b - 1) / lanes_b);
  const int loads_per_thread = (load_items + s.threads - 1) / s.threads;
  const bool unchecked_allowed = loads_per_thread * w * loaded_words <= 20;
  auto stage_block = [&](std::int64_t row, std::int64_t b, bool inside_b, std::vector<Word>& out) {
    const int m = s.skew_load ? misalignment(src, row + b, w) : 0;
    std::vector<bool> whole(static_cast<std::size_t>(load_words));
    for (int j = 0; j < load_words; ++j) {
      const std::int64_t bj = b + std::int64_t{j} * w;
      whole[static_cast<std::size_t>(j)] =
          inside_b || ((bj - m >= 0 || misalignment(src, 0, w) == 0) && bj - m + (m ? 2 : 1) * w <= eb);
    }
    std::vector<Word> in(static_cast<std::size_t>(loaded_words), Word{0xee, 0xee, 0xee, 0xee});
    for (int j = 0; j < loaded_words; ++j)
      if ((j < load_words && whole[static_cast<std::size_t>(j)]) || (j > 0 && m && whole[static_cast<std::size_t>(j - 1)]))
        in[static_cast<std::size_t>(j)] = read_word(row + b - m + std::int64_t{j} * w);
    for (int j = 0; j < load_words; ++j) {
      const std::int64_t bj = b + std::int64_t{j} * w;
      Word word = m ? funnel(in[static_cast<std::size_t>(j)], in[static_cast<std::size_t>(j + 1)], m)
                    : in[static_cast<std::size_t>(j)];
      if (!whole[static_cast<std::size_t>(j)]) {
        word = Word{};
        for (int x = 0; x < w; ++x)
          if (bj + x < eb) {
            span.check(row + bj + x, 1, "words: a unit outside the source tensor");
            copy_units(word.data() + x * u, src + (row + bj + x) * u, 1, u);
          }
      }
      out[static_cast<std::size_t>(j)] = word;
    }
  };
  std::vector<Word> smem(static_cast<std::size_t>(s.tile_b * s.pitch));
  auto shared = [&](int position) -> Word& {
    if (position < 0 || position >= static_cast<int>(smem.size())) throw std::logic_error("words: shared memory out of range");
    return smem[static_cast<std::size_t>(position)];
  };
  for (std::int64_t t = 0; t < a.num_tiles; ++t) {
    const auto [a0, b0, src_base, dst_base] = tile_origin(a, s, t, s.dims_a + s.dims_b, s.a_first);
    std::fill(smem.begin(), smem.end(), Word{0xee, 0xee, 0xee, 0xee});
    const std::int64_t a_base = a0 - lead;
    const bool inside_b = unchecked_allowed && (!s.skew_load || b0 >= w || misalignment(src, 0, w) == 0) &&
                          b0 + s.tile_b + (s.skew_load ? w : 0) <= eb;
    for (int g = 0; g < groups_a; ++g)
      for (int k = 0; k < words_b; k += load_words) {
        const std::int64_t b = b0 + std::int64_t{k} * w;
        if (!inside_b && b >= eb) continue;
        std::vector<std::vector<Word>> rows(static_cast<std::size_t>(w),
                                            std::vector<Word>(static_cast<std::size_t>(load_words), Word{0xee, 0xee, 0xee, 0xee}));
        for (int i = 0; i < w; ++i) {
          const std::int64_t ai = a_base + std::int64_t{g} * w + i;
          if (ai >= 0 && ai < ea) stage_block(src_base + src_row(ai), b, inside_b, rows[static_cast<std::size_t>(i)]);
        }
        for (int j = 0; j < load_words; ++j) {
          if (!inside_b && b + std::int64_t{j} * w >= eb) continue;
          for (int c = 0; c < w; ++c) {
            Word column;
            for (int i = 0; i < w; ++i)
              std::memcpy(column.data() + i * u, rows[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)].data() + c * u,
                          static_cast<std::size_t>(u));
            shared(((k + j) * w + c) * s.pitch + g) = column;
          }
        }
      }
    for (int item = 0; item < s.tile_b * vecs_a; ++item) {
      const int lb = item / vecs_a, j = item % vecs_a;
      if (b0 + lb >= eb) continue;
      const std::int64_t row = dst_base + dst_row(b0 + lb);
      const int skew = s.skew_store ? misalignment(dst, row, vec) : 0;
      const std::int64_t x = a0 - skew + std::int64_t{j} * vec;
      // The vector starts `offset` units into the staged row: word `first`, shifted by 1..w when skewed
      // (derived here from the offset; the template computes first and shift from the skew).
      const int offset = lead - skew + j * vec;
      const int first = s.skew_store ? (offset - 1) / w : offset / w;
      const int shift = offset - first * w, at = lb * s.pitch + first;
      if (first < 0 || first + s.store_words + (s.skew_store ? 1 : 0) > groups_a)
        throw std::logic_error("words: a store reads past its staged row");
      std::vector<Word> out(static_cast<std::size_t>(s.store_words));
      for (int i = 0; i < s.store_words; ++i)
        out[static_cast<std::size_t>(i)] =
            s.skew_store ? funnel(shared(at + i), shared(at + i + 1), shift) : shared(at + i);
      if (x >= 0 && x + vec <= ea) check_vector(dst + (row + x) * u, 4 * s.store_words);
      for (int i = 0; i < s.store_words; ++i) {
        const std::int64_t xi = x + std::int64_t{i} * w;
        const Word& word = out[static_cast<std::size_t>(i)];
        if (xi >= 0 && xi + w <= ea) {
          check_vector(dst + (row + xi) * u, 4);
          std::memcpy(dst + (row + xi) * u, word.data(), 4);
        } else {
          for (int y = 0; y < w; ++y)
            if (xi + y >= 0 && xi + y < ea) copy_units(dst + (row + xi + y) * u, word.data() + y * u, 1, u);
        }
      }
    }
  }
}

// A runs tile's origin, as sj_tile and the runs kernels' tile setup compute it: the offsets of its
// first unit and the units of its two tiled dims inside the extents.
struct RunsTileOrigin {
  std::int64_t src_base = 0, dst_base = 0, valid_a = 0, valid_b = 0;
};

RunsTileOrigin runs_tile_origin(const RearrangeKernelArgs& a, const RearrangeSpec& s, std::int64_t t) {
  const int pa = s.dst_run_dims - 1, pb = (s.src_order >> (4 * (s.src_run_dims - 1))) & 15;
  const std::int64_t rest = divide(t, a.tiles_x, s);
  const std::int64_t b_index = t - rest * a.tiles_x.value;
  const std::int64_t outer = divide(rest, a.tiles_y, s);
  const std::int64_t a0 = (rest - outer * a.tiles_y.value) * s.tile_a, b0 = b_index * s.tile_b;
  RunsTileOrigin tile;
  offsets(a, s, s.tile_dims, s.num_dims - s.tile_dims, outer, tile.src_base, tile.dst_base);
  tile.src_base += a0 * a.dim[pa].src_stride + b0 * a.dim[pb].src_stride;
  tile.dst_base += a0 * a.dim[pa].dst_stride + b0 * a.dim[pb].dst_stride;
  tile.valid_a = std::min<std::int64_t>(s.tile_a, a.extent_a - a0);
  tile.valid_b = std::min<std::int64_t>(s.tile_b, a.extent_b - b0);
  if (!s.bounds && (tile.valid_a != s.tile_a || tile.valid_b != s.tile_b))
    throw std::logic_error("runs: a partial tile without bounds");
  return tile;
}

// The runs template that scatters: source runs read as aligned words and scattered into staged
// destination runs, which are written as aligned words funnel-shifted out of two staged words.
void execute_runs_scatter(const plan::RearrangeVariant& v, std::uint8_t* dst, const std::uint8_t* src) {
  const RearrangeSpec& s = v.spec;
  const RearrangeKernelArgs& a = v.args;
  const int u = s.unit_bytes;
  const int w = u >= 4 ? 1 : 4 / u;  // units per word
  const std::vector<std::int64_t> tile = plan::runs_tile_extents(s, a);
  const int dims = s.tile_dims;
  auto src_dim = [&](int o) { return (s.src_order >> (4 * o)) & 15; };
  std::vector<std::int64_t> step(static_cast<std::size_t>(dims));  // shared-memory step per tile dim
  for (int k = 0; k < dims; ++k) {
    std::int64_t n = k < s.dst_run_dims ? 1 : s.pitch;
    for (int j = k < s.dst_run_dims ? 0 : s.dst_run_dims; j < k; ++j) n *= tile[static_cast<std::size_t>(j)];
    step[static_cast<std::size_t>(k)] = n;
  }
  std::int64_t dst_length_full = 1, src_length_full = 1, volume = 1;
  for (int k = 0; k < s.dst_run_dims; ++k) dst_length_full *= tile[static_cast<std::size_t>(k)];
  for (int o = 0; o < s.src_run_dims; ++o) src_length_full *= tile[static_cast<std::size_t>(src_dim(o))];
  for (std::int64_t e : tile) volume *= e;
  const std::int64_t runs_d = volume / dst_length_full, runs_s = volume / src_length_full;
  if (runs_d != s.tile_runs) throw std::logic_error("runs: tile_runs disagrees with the tile");
  if (s.pitch % w != 0 || s.pitch < dst_length_full + w) throw std::logic_error("runs: pitch too short");
  const std::int64_t words_d = w > 1 ? (dst_length_full + w - 1) / w + 1 : dst_length_full;
  const std::int64_t words_s = w > 1 ? (src_length_full + w - 1) / w + 1 : src_length_full;
  const int pa = s.dst_run_dims - 1, pb = src_dim(s.src_run_dims - 1);
  const auto smem_units = static_cast<std::size_t>(plan::shared_bytes(s) / u);
  std::vector<std::uint8_t> smem(smem_units * static_cast<std::size_t>(u));
  auto misalignment = [&](const std::uint8_t* p) { return std::int64_t{misalignment_at(p, u, w)}; };
  auto staged = [&](std::int64_t position) {
    if (position < 0 || position >= static_cast<std::int64_t>(smem_units))
      throw std::logic_error("runs: shared memory out of range");
    return smem.data() + position * u;
  };
  for (std::int64_t t = 0; t < a.num_tiles; ++t) {
    const RunsTileOrigin origin = runs_tile_origin(a, s, t);
    const std::int64_t src_base = origin.src_base, dst_base = origin.dst_base;
    const std::int64_t valid_a = origin.valid_a, valid_b = origin.valid_b;
    std::fill(smem.begin(), smem.end(), 0);
    const std::int64_t src_length = src_length_full / s.tile_b * valid_b;
    for (std::int64_t n = 0; n < runs_s * words_s; ++n) {
      std::int64_t r = n / words_s;
      const std::int64_t word = n - r * words_s;
      std::int64_t offset = 0, position = w;
      bool ok = true;
      for (int o = s.src_run_dims; o < dims; ++o) {
        const int k = src_dim(o);
        const std::int64_t c = o + 1 < dims ? r % tile[static_cast<std::size_t>(k)] : r;
        r = o + 1 < dims ? r / tile[static_cast<std::size_t>(k)] : 0;
        offset += c * a.dim[k].src_stride;
        position += c * step[static_cast<std::size_t>(k)];
        if (k == pa) ok = ok && c < valid_a;
      }
      const std::uint8_t* run = src + (src_base + offset) * u;
      const std::int64_t first = word * w - misalignment(run);
      if (!ok || first >= src_length) continue;
      check_vector(run + first * u, w * u);
      for (int unit = 0; unit < w; ++unit) {
        std::int64_t j = first + unit;
        if (j < 0 || j >= src_length) continue;
        std::int64_t at = position;
        for (int o = 0; o < s.src_run_dims; ++o) {
          const int k = src_dim(o);
          const std::int64_t c = o + 1 < s.src_run_dims ? j % tile[static_cast<std::size_t>(k)] : j;
          j = o + 1 < s.src_run_dims ? j / tile[static_cast<std::size_t>(k)] : 0;
          at += c * step[static_cast<std::size_t>(k)];
        }
        copy_units(staged(at), run + (first + unit) * u, 1, u);
      }
    }
    const std::int64_t dst_length = dst_length_full / s.tile_a * valid_a;
    for (std::int64_t n = 0; n < runs_d * words_d; ++n) {
      std::int64_t r = n / words_d;
      const std::int64_t word = n - r * words_d;
      const std::int64_t start = w + r * s.pitch;
      std::int64_t offset = 0;
      bool ok = true;
      for (int k = s.dst_run_dims; k < dims; ++k) {
        const std::int64_t c = k + 1 < dims ? r % tile[static_cast<std::size_t>(k)] : r;
        r = k + 1 < dims ? r / tile[static_cast<std::size_t>(k)] : 0;
        offset += c * a.dim[k].dst_stride;
        if (k == pb) ok = ok && c < valid_b;
      }
      std::uint8_t* run = dst + (dst_base + offset) * u;
      const std::int64_t first = word * w - misalignment(run);
      if (!ok || first >= dst_length) continue;
      // The template reads the two aligned staged words around the word's units and shifts them.
      const std::int64_t high = (start + word * w) / w;
      staged((high - 1) * w);
      staged(high * w + w - 1);
      const std::uint8_t* value = staged(start + first);
      store_in_run(run, first, w, dst_length, value, u);
    }
  }
}

// The aligned pieces the gathering runs template writes bytes [at, end) of a store vector of
// `vector_bytes` in (0 <= at < end <= vector_bytes, not the whole vector): pieces up from `at` while
// each is aligned and fits, then the remaining length's bits, largest first. Throws where a piece is
// misaligned or the pieces do not cover the range.
std::vector<std::pair<int, int>> store_pieces(int at, int end, int vector_bytes, int unit) {
  std::vector<std::pair<int, int>> pieces;  // (offset, bytes)
  const int lo = at;
  for (int p = unit; p < vector_bytes; p *= 2)
    if ((at & p) && at + p <= end) {
      pieces.emplace_back(at, p);
      at += p;
    }
  for (int p = vector_bytes / 2; p >= unit; p /= 2)
    if ((end - at) & p) {
      pieces.emplace_back(at, p);
      at += p;
    }
  int covered = lo;
  for (const auto& [offset, bytes] : pieces) {
    if (offset % bytes != 0 || offset != covered) throw std::logic_error("runs: a misplaced store piece");
    covered += bytes;
  }
  if (covered != end) throw std::logic_error("runs: store pieces do not cover the vector's units");
  return pieces;
}

// The staged positions sj_gather of the gathering runs template reads for the units of a store vector
// of `vector_units` whose first unit is unit `first` of its destination run, from `position` and
// `coordinate` (over the run's dims), those of run unit max(first, 0): a row of the run's innermost
// dim as long as a vector or more is crossed at most once; shorter rows take each unit's row and place
// from the vector's first place, with one jump past dim 1's end where that is crossed at most once a
// vector, else each row's place found a row at a time. Units outside the run get unchecked places.
using GatherPlaces = std::array<std::int64_t, 16>;  // a store vector's units (16 at most)
using RunCoordinates = std::array<std::int64_t, 8>;  // over a run's dims (8 at most)
GatherPlaces gather_positions(const std::vector<std::int64_t>& extent, const std::vector<std::int64_t>& step,
                              int run_dims, int vector_units, std::int64_t first, std::int64_t position,
                              RunCoordinates coordinate) {
  const auto e = [&](int k) { return extent[static_cast<std::size_t>(k)]; };
  const auto st = [&](int k) { return step[static_cast<std::size_t>(k)]; };
  const auto co = [&](int k) -> std::int64_t& { return coordinate[static_cast<std::size_t>(k)]; };
  auto jump_past = [&](int from) {  // sj_jump_past<from>
    std::int64_t jump = st(from + 1) - e(from) * st(from);
    bool carry = true;
    for (int k = from + 1; k + 1 < run_dims; ++k) {
      carry = carry && co(k) + 1 == e(k);
      jump += carry ? st(k + 1) - e(k) * st(k) : 0;
    }
    return jump;
  };
  if (vector_units > static_cast<int>(GatherPlaces{}.size()) || run_dims > static_cast<int>(RunCoordinates{}.size()))
    throw std::logic_error("runs: a store vector or a run wider than the executor models");
  const std::int64_t lead = std::max<std::int64_t>(-first, 0), e0 = e(0), units = vector_units;
  GatherPlaces out{};
  if (run_dims == 1 || e0 >= units) {
    const std::int64_t before = position - lead * st(0), after = before + (run_dims > 1 ? jump_past(0) : 0);
    const std::int64_t cross = run_dims > 1 ? lead + e0 - co(0) : units;
    for (std::int64_t u = 0; u < units; ++u) out[static_cast<std::size_t>(u)] = (u < cross ? before : after) + u * st(0);
    return out;
  }
  const std::int64_t back = (units - 1 + e0 - 1) / e0, t = co(0) - lead + back * e0;  // >= 0: lead < units
  const std::int64_t c = t % e0, row0 = t / e0 - back;
  if (run_dims == 2 || e(1) >= (e0 - 1 + units - 1) / e0) {
    const std::int64_t base = position + row0 * st(1) + (c - co(0)) * st(0);
    const std::int64_t cross = run_dims > 2 ? e(1) - co(1) - row0 : units, jump = run_dims > 2 ? jump_past(1) : 0;
    for (std::int64_t u = 0, q = 0, r = 0; u < units; ++u, q += r + 1 == e0, r = r + 1 == e0 ? 0 : r + 1) {
      const bool carry = c >= e0 - r;  // q = u / e0, r = u % e0
      out[static_cast<std::size_t>(u)] =
          base + q * st(1) + r * st(0) + (carry ? st(1) - e0 * st(0) : 0) + (q + carry >= cross ? jump : 0);
    }
    return out;
  }
  std::array<std::int64_t, 17> place_c{};  // (units - 1) / e0 + 2 rows at most
  const auto rows = static_cast<std::size_t>((units - 1) / e0 + 2);
  std::int64_t at = position + (c - co(0)) * st(0);
  place_c[0] = at;
  for (std::size_t i = 1; i < rows; ++i) {
    if (row0 + static_cast<std::int64_t>(i) > 0) {
      at += st(1);
      ++co(1);
      for (int k = 1; k + 1 < run_dims; ++k) {
        const bool wrap = co(k) == e(k);
        at += wrap ? st(k + 1) - e(k) * st(k) : 0;
        co(k) = wrap ? 0 : co(k);
        co(k + 1) += wrap;
      }
    }
    place_c[i] = at;
  }
  for (std::int64_t u = 0, q = 0, r = 0; u < units; ++u, q += r + 1 == e0, r = r + 1 == e0 ? 0 : r + 1) {
    const bool carry = c >= e0 - r;  // q = u / e0, r = u % e0
    const auto row = static_cast<std::size_t>(q + carry);
    out[static_cast<std::size_t>(u)] = (carry ? place_c[row] - e0 * st(0) : place_c[row]) + r * st(0);
  }
  return out;
}

// The runs template that gathers: source runs copied into staged rows, vector by vector; destination
// runs written as aligned vectors of store_words words, each unit gathered from the staged position
// its tile coordinates give, the vectors at a run's ends in aligned pieces (store_pieces). A gather
// of a unit that no load staged throws. It models the staged positions, the bounds and the store
// widths and alignment, and how each vector's gathers step (gather_positions, checked against each
// unit's position computed afresh); not the kernel's aligned source reads and their shifts, or its
// store slots (which lanes take which vectors: each vector is taken once here).
void execute_runs_gather(const plan::RearrangeVariant& v, std::uint8_t* dst, const std::uint8_t* src) {
  const RearrangeSpec& s = v.spec;
  const RearrangeKernelArgs& a = v.args;
  const int u = s.unit_bytes;
  const int w = 16 / u;                  // units per load vector
  const int wd = 4 * s.store_words / u;  // units per store vector
  const std::vector<std::int64_t> tile = plan::runs_tile_extents(s, a);
  const int dims = s.tile_dims;
  auto src_dim = [&](int o) { return (s.src_order >> (4 * o)) & 15; };
  auto extent = [&](int k) { return tile[static_cast<std::size_t>(k)]; };
  std::vector<std::int64_t> step(static_cast<std::size_t>(dims));  // shared-memory step per tile dim
  for (int o = 0; o < dims; ++o) {
    std::int64_t n = o < s.src_run_dims ? 1 : s.pitch;
    for (int i = o < s.src_run_dims ? 0 : s.src_run_dims; i < o; ++i) n *= extent(src_dim(i));
    step[static_cast<std::size_t>(src_dim(o))] = n;
  }
  std::int64_t dst_length_full = 1, src_length_full = 1, volume = 1;
  for (int k = 0; k < s.dst_run_dims; ++k) dst_length_full *= extent(k);
  for (int o = 0; o < s.src_run_dims; ++o) src_length_full *= extent(src_dim(o));
  for (std::int64_t e : tile) volume *= e;
  const std::int64_t runs_d = volume / dst_length_full, runs_s = volume / src_length_full;
  if (runs_s != s.tile_runs) throw std::logic_error("runs: tile_runs disagrees with the tile");
  if (s.pitch % w != 0 || s.pitch < src_length_full) throw std::logic_error("runs: pitch too short");
  const std::int64_t vectors_d = wd > 1 ? (dst_length_full + wd - 1) / wd + 1 : dst_length_full;
  const std::int64_t vectors_s = (src_length_full + w - 1) / w;
  const int pa = s.dst_run_dims - 1, pb = src_dim(s.src_run_dims - 1);
  const auto smem_units = static_cast<std::size_t>(plan::shared_bytes(s) / u);
  std::vector<std::uint8_t> smem(smem_units * static_cast<std::size_t>(u));
  std::vector<bool> staged(smem_units);
  auto misalignment = [&](const std::uint8_t* p) { return std::int64_t{misalignment_at(p, u, wd)}; };
  for (std::int64_t t = 0; t < a.num_tiles; ++t) {
    const RunsTileOrigin origin = runs_tile_origin(a, s, t);
    const std::int64_t src_base = origin.src_base, dst_base = origin.dst_base;
    const std::int64_t valid_a = origin.valid_a, valid_b = origin.valid_b;
    std::fill(staged.begin(), staged.end(), false);
    const std::int64_t src_length = src_length_full / s.tile_b * valid_b;
    for (std::int64_t n = 0; n < runs_s * vectors_s; ++n) {
      std::int64_t r = n / vectors_s;
      const std::int64_t vector = n - r * vectors_s;
      const std::int64_t row = r * s.pitch + vector * w;  // staged unit of the vector's first unit
      std::int64_t offset = 0;
      bool ok = true;
      for (int o = s.src_run_dims; o < dims; ++o) {
        const int k = src_dim(o);
        const std::int64_t c = o + 1 < dims ? r % extent(k) : r;
        r = o + 1 < dims ? r / extent(k) : 0;
        offset += c * a.dim[k].src_stride;
        if (k == pa) ok = ok && c < valid_a;
      }
      if (!ok || vector * w >= src_length) continue;
      const std::uint8_t* run = src + (src_base + offset) * u;
      const std::uint8_t* first = run + vector * w * u;
      if (row + w > static_cast<std::int64_t>(smem_units)) throw std::logic_error("runs: shared memory out of range");
      // Only the vector's units inside the run are staged (the rest of a run's last vector is never read).
      for (std::int64_t unit = 0; unit < w && vector * w + unit < src_length; ++unit) {
        copy_units(smem.data() + (row + unit) * u, first + unit * u, 1, u);
        staged[static_cast<std::size_t>(row + unit)] = true;
      }
    }
    const std::int64_t dst_length = dst_length_full / s.tile_a * valid_a;
    for (std::int64_t n = 0; n < runs_d * vectors_d; ++n) {
      std::int64_t r = n / vectors_d;
      const std::int64_t vector = n - r * vectors_d;
      std::int64_t offset = 0, base = 0;
      bool ok = true;
      for (int k = s.dst_run_dims; k < dims; ++k) {
        const std::int64_t c = k + 1 < dims ? r % extent(k) : r;
        r = k + 1 < dims ? r / extent(k) : 0;
        offset += c * a.dim[k].dst_stride;
        base += c * step[static_cast<std::size_t>(k)];
        if (k == pb) ok = ok && c < valid_b;
      }
      std::uint8_t* run = dst + (dst_base + offset) * u;
      const std::int64_t first = vector * wd - misalignment(run);
      if (!ok || first >= dst_length) continue;
      if (first >= 0 && first + wd <= dst_length) {
        check_vector(run + first * u, wd * u);
      } else {
        const auto lo = static_cast<int>(std::max<std::int64_t>(-first, 0));
        const auto hi = static_cast<int>(std::min<std::int64_t>(wd, dst_length - first));
        for (const auto& [offset, bytes] : store_pieces(lo * u, hi * u, wd * u, u))
          check_vector(run + first * u + offset, bytes);
      }
      // Run unit j's staged position and its coordinates over the run's dims.
      auto place_of = [&](std::int64_t j, RunCoordinates& coordinate) {
        std::int64_t position = base;
        for (int k = 0; k < s.dst_run_dims; ++k) {
          const std::int64_t c = k + 1 < s.dst_run_dims ? j % extent(k) : j;
          j = k + 1 < s.dst_run_dims ? j / extent(k) : 0;
          coordinate[static_cast<std::size_t>(k)] = c;
          position += c * step[static_cast<std::size_t>(k)];
        }
        return position;
      };
      // The template steps from unit max(first, 0).
      RunCoordinates coordinate{};
      const std::int64_t anchor = place_of(std::max<std::int64_t>(first, 0), coordinate);
      const GatherPlaces stepped = gather_positions(tile, step, s.dst_run_dims, wd, first, anchor, coordinate);
      for (std::int64_t unit = 0; unit < wd; ++unit) {
        const std::int64_t j = first + unit;
        if (j < 0 || j >= dst_length) continue;
        RunCoordinates unit_coordinate{};
        const std::int64_t position = place_of(j, unit_coordinate);
        if (stepped[static_cast<std::size_t>(unit)] != position)
          throw std::logic_error("runs: a gather steps to another place than its unit's");
        if (position < 0 || position >= static_cast<std::int64_t>(smem_units) || !staged[static_cast<std::size_t>(position)])
          throw std::logic_error("runs: a gather of an unstaged unit");
        copy_units(run + (first + unit) * u, smem.data() + position * u, 1, u);
      }
    }
  }
}

// The segments template: source runs read in aligned 16-byte vectors and staged at their address's
// offset within 16 bytes; destination runs written in aligned 16-byte vectors (rows of 8 bytes or
// more: for units of a multiple of 4 bytes, each word read from its own row; else read from the
// staged bytes of up to three rows) or words (of one or two rows), and byte by byte at their ends.
void execute_segments(const plan::RearrangeVariant& v, std::uint8_t* dst, const std::uint8_t* src) {
  const RearrangeSpec& s = v.spec;
  const RearrangeKernelArgs& a = v.args;
  const int u = s.unit_bytes;
  const std::int64_t seg = std::int64_t{s.segment} * u;
  const int first_b = 1 + s.dims_a, first_outer = first_b + s.dims_b;
  // Group A follows the row in dst and group B in src, each a contiguous chain of its extent.
  std::int64_t chain_a = s.segment, chain_b = s.segment;
  for (int k = 1; k < first_b; ++k) {
    if (a.dim[k].dst_stride != chain_a) throw std::logic_error("segments: group A must follow the row in dst");
    chain_a *= a.dim[k].extent.value;
  }
  for (int k = first_b; k < first_outer; ++k) {
    if (a.dim[k].src_stride != chain_b) throw std::logic_error("segments: group B must follow the row in src");
    chain_b *= a.dim[k].extent.value;
  }
  if (seg < 3 || a.dim[0].extent.value != s.segment || a.dim[0].src_stride != 1 || a.dim[0].dst_stride != 1 ||
      chain_a != s.segment * a.extent_a || chain_b != s.segment * a.extent_b)
    throw std::logic_error("segments: dim[0] must be the shared row, and the groups' extents extent_a and extent_b");
  const std::int64_t tile_a = s.tile_a, tile_b = s.tile_b;
  if (s.merge_src && (s.dims_a != 1 || tile_b != a.extent_b || a.dim[1].src_stride != s.segment * a.extent_b))
    throw std::logic_error("segments: a merged source run needs one A dim, B whole and A next in src");
  if (s.merge_dst && (s.dims_b != 1 || tile_a != a.extent_a || a.dim[first_b].dst_stride != s.segment * a.extent_a))
    throw std::logic_error("segments: a merged destination run needs one B dim, A whole and B next in dst");
  // Source offset of A index i, destination offset of B index j (in units).
  auto src_of_a = [&](std::int64_t i) { return src_offset(a, s, 1, s.dims_a, i); };
  auto dst_of_b = [&](std::int64_t j) { return dst_offset(a, s, first_b, s.dims_b, j); };
  const std::int64_t src_run_bytes = seg * tile_b * (s.merge_src ? tile_a : 1);
  if (s.pitch % 16 != 0 || s.pitch < src_run_bytes + 15) throw std::logic_error("segments: pitch too short");
  // The staged rows with their padding (the tables after them are not modelled).
  std::vector<std::uint8_t> smem(static_cast<std::size_t>(16 + (s.merge_src ? 1 : tile_a) * s.pitch + 16));
  auto at = [&](std::int64_t position) -> std::uint8_t& {
    if (position < 0 || position >= static_cast<std::int64_t>(smem.size()))
      throw std::logic_error("segments: shared memory out of range");
    return smem[static_cast<std::size_t>(position)];
  };
  auto low4 = [](const std::uint8_t* p, std::uintptr_t mask) {
    return static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(p) & mask);
  };
  for (std::int64_t t = 0; t < a.num_tiles; ++t) {
    const auto [a0, b0, src_base, dst_base] = tile_origin(a, s, t, first_outer, s.a_first);
    const std::int64_t valid_a = std::min(tile_a, a.extent_a - a0), valid_b = std::min(tile_b, a.extent_b - b0);
    if (!s.bounds && (valid_a != tile_a || valid_b != tile_b)) throw std::logic_error("segments: a partial tile without bounds");
    const std::uint8_t* tile_src = src + (src_base + b0 * s.segment) * u;  // A offsets added per run
    std::uint8_t* tile_dst = dst + (dst_base + a0 * s.segment) * u;        // B offsets added per run
    auto src_run = [&](std::int64_t r) { return tile_src + src_of_a(a0 + r) * u; };
    std::fill(smem.begin(), smem.end(), 0);
    const std::int64_t src_runs = s.merge_src ? 1 : valid_a;
    const std::int64_t src_length = s.merge_src ? seg * tile_b * valid_a : seg * valid_b;
    // Rows start 16 bytes into shared memory (padding on both sides).
    for (std::int64_t r = 0; r < src_runs; ++r) {
      const std::uint8_t* run = src_run(r);
      const std::uint8_t* first = run - low4(run, 15);
      for (std::int64_t x = 0; first + 16 * x < run + src_length; ++x) {
        check_vector(first + 16 * x, 16);
        at(16 + r * s.pitch + 16 * x + 15);  // the vector's last staged byte is in range too
        std::memcpy(&at(16 + r * s.pitch + 16 * x), first + 16 * x, 16);
      }
    }
    // Staged position of byte j of row (ra, rb).
    auto staged = [&](std::int64_t ra, std::int64_t rb, std::int64_t j) {
      if (s.merge_src) return 16 + low4(src_run(0), 15) + (rb + tile_b * ra) * seg + j;
      return 16 + ra * s.pitch + low4(src_run(ra), 15) + rb * seg + j;
    };
    // Stores of `width` bytes (16-byte vectors or words). A store's staged bytes from `position` on are
    // read as the template reads them: two aligned reads of `width`.
    const std::int64_t width = plan::segment_store_bytes(s);
    const std::int64_t row_cuts = (width - 2) / seg + 1;  // row starts a store can hold after its first byte
    const bool word_gather = width == 16 && u % 4 == 0;       // each word of a vector read from its own row
    auto staged_bytes = [&](std::int64_t position) {
      at(position & ~(width - 1));
      at((position & ~(width - 1)) + 2 * width - 1);
      std::array<std::uint8_t, 16> bytes{};
      for (std::int64_t k = 0; k < width; ++k) bytes[static_cast<std::size_t>(k)] = at(position + k);
      return bytes;
    };
    const std::int64_t dst_runs = s.merge_dst ? 1 : valid_b;
    const std::int64_t dst_length = s.merge_dst ? seg * tile_a * valid_b : seg * valid_a;
    auto row_a = [&](std::int64_t row) { return s.merge_dst ? row % tile_a : row; };
    const std::int64_t run_rows = s.merge_dst ? tile_a * valid_b : valid_a;
    for (std::int64_t q = 0; q < dst_runs; ++q) {
      std::uint8_t* run = tile_dst + dst_of_b(b0 + q) * u;
      auto row_b = [&](std::int64_t row) { return s.merge_dst ? row / tile_a : q; };
      for (std::int64_t p = -low4(run, static_cast<std::uintptr_t>(width - 1)); p < dst_length; p += width) {
        std::array<std::uint8_t, 16> bytes{};
        if (word_gather) {
          // Units of a multiple of 4 bytes: word m of the store, where it lies in the run, is read
          // whole, as one aligned shared word, from its own row.
          for (std::int64_t m = 0; m < 4; ++m) {
            const std::int64_t b = p + 4 * m;
            if (b < 0 || b >= dst_length) continue;
            const std::int64_t g = b / seg, position = staged(row_a(g), row_b(g), b - g * seg);
            if (position % 4 != 0) throw std::logic_error("segments: a gathered word off a shared word");
            for (std::int64_t k = 0; k < 4; ++k) bytes[static_cast<std::size_t>(4 * m + k)] = at(position + k);
          }
        } else {
          // The store is read whole from row g (from before row 0 at a run's start) and, where its
          // bytes from `cut` on begin row g + 1 inside the run (from cut + SEG on, row g + 2), from
          // each such row: a word from the row's byte 0, a vector from as many bytes before it as the
          // row starts into the store. Only bytes in the run are kept.
          const std::int64_t inside = std::max<std::int64_t>(p, 0), g = inside / seg, sg = inside - g * seg;
          bytes = staged_bytes(staged(row_a(g), row_b(g), sg) + p - inside);
          const std::int64_t cut = inside - sg + seg - p;
          for (std::int64_t k = 1; k <= row_cuts; ++k) {
            const std::int64_t start = cut + (k - 1) * seg;  // the store's byte where row g + k begins
            if (start >= width || p + start >= dst_length) break;
            if (g + k >= run_rows) throw std::logic_error("segments: a store read a row past its run");
            const std::int64_t lead = width == 16 ? start : 0;
            const std::array<std::uint8_t, 16> next = staged_bytes(staged(row_a(g + k), row_b(g + k), 0) - lead);
            for (std::int64_t j = start; j < width; ++j)
              bytes[static_cast<std::size_t>(j)] = next[static_cast<std::size_t>(j - start + lead)];
          }
        }
        if (p >= 0 && p + width <= dst_length) check_vector(run + p, static_cast<int>(width));
        for (std::int64_t k = 0; k < width; ++k)
          if (p + k >= 0 && p + k < dst_length) run[p + k] = bytes[static_cast<std::size_t>(k)];
      }
    }
  }
}

void execute_variant(const plan::RearrangeVariant& v, std::uint8_t* dst, const std::uint8_t* src) {
  switch (v.spec.family) {
    case RearrangeFamily::copy: std::memcpy(dst, src, static_cast<std::size_t>(v.copy_bytes)); return;
    case RearrangeFamily::row:
    case RearrangeFamily::gather:
      if (v.spec.vector_rows)
        execute_vector_rows(v, dst, src);
      else
        execute_rows(v, dst, src);
      return;
    case RearrangeFamily::transpose:
    case RearrangeFamily::packed: execute_tiled(v, dst, src); return;
    case RearrangeFamily::skewed: execute_skewed(v, dst, src); return;
    case RearrangeFamily::words: execute_words(v, dst, src); return;
    case RearrangeFamily::runs:
      if (v.spec.gather_stores)
        execute_runs_gather(v, dst, src);
      else
        execute_runs_scatter(v, dst, src);
      return;
    case RearrangeFamily::segments: execute_segments(v, dst, src); return;
  }
}

void execute_plan(const plan::RearrangePlanData& p, std::uint8_t* dst, const std::uint8_t* src,
                  std::uintptr_t address_bits) {
  if (p.empty) return;
  execute_variant(plan::variant_for_pointers(p, address_bits), dst + p.elements.dst_offset * p.elem_bytes,
                  src + p.elements.src_offset * p.elem_bytes);
}

}  // namespace shapejit::test
