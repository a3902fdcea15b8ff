// Rearranging views: shapes and strides describe where elements are, so slicing, reversing,
// transposing and relayouts are all one plan_rearrange call. Both cases are checked on the CPU.
//
// 1. From a 1024 x 1536 f32 matrix X, copy the transpose of the view X[128:896:2, 1087:63:-1]
//    (every other row, a column range read backwards) into a dense 1024 x 384 matrix.
// 2. NCHW to NHWC for an f16 activation batch: the logical shape stays N, C, H, W; only the
//    destination's strides say that channels are innermost.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "examples/host_reference.hpp"
#include "shapejit/rearrange.hpp"
#include "support/device.hpp"

namespace {

using namespace shapejit;

/// Runs dst <- src on the GPU and on the CPU and compares every byte of the destination buffer,
/// gaps included. The source's element 0 lies `src_base` elements into a random buffer of
/// `src_elems` elements; the destination (positive strides) gets a poisoned buffer of its own.
bool run_and_check(const std::string& title, const TensorDesc& dst, const TensorDesc& src, std::int64_t src_elems,
                   std::int64_t src_base) {
  const RearrangePlan plan = plan_rearrange(dst, src);
  fmt::print("== {}\n{}\n", title, plan.describe());
  const std::size_t elem = src.element_size();
  const std::size_t src_bytes = static_cast<std::size_t>(src_elems) * elem;
  const std::size_t dst_bytes = static_cast<std::size_t>(examples::element_span(dst).count()) * elem;
  const std::size_t base_byte = static_cast<std::size_t>(src_base) * elem;

  const std::vector<std::uint8_t> host_src = support::random_bytes(src_bytes, 11);
  support::DeviceBuffer src_buf(src_bytes), dst_buf(dst_bytes);
  src_buf.upload(host_src.data(), src_bytes);
  dst_buf.fill(0xa5);  // poison, so that unwritten elements and stray writes show up
  plan.launch(dst_buf.get(), static_cast<std::uint8_t*>(src_buf.get()) + base_byte);
  std::vector<std::uint8_t> got(dst_bytes), want(dst_bytes, 0xa5);
  dst_buf.download(got.data(), dst_bytes);
  examples::reference_rearrange(want.data(), dst, host_src.data() + base_byte, src);
  const bool same = got == want;
  fmt::print("check: {}\n\n", same ? "bit-exact against the CPU" : "MISMATCH");
  return same;
}

/// Case 1: the transpose of a strided, partly reversed slice of a row-major matrix.
bool slice_and_transpose() {
  constexpr std::int64_t rows = 1024, cols = 1536;
  // X[128:896:2, 1087:63:-1]: 384 rows two apart, 1024 columns from 1087 down to 64. The view's
  // element 0 is X[128][1087]; the rest of X is there too but is not read.
  const TensorDesc slice{{384, 1024}, {2 * cols, -1}, DType::f32, 0};
  const TensorDesc slice_t = permuted(slice, {1, 0});
  const TensorDesc out{slice_t.shape, {}, DType::f32, 0};
  return run_and_check(fmt::format("transpose of X[128:896:2, 1087:63:-1], X a {} x {} f32 matrix", rows, cols), out,
                       slice_t, rows * cols, 128 * cols + 1087);
}

/// Case 2: NCHW to NHWC, expressed through the destination's strides.
bool nchw_to_nhwc() {
  constexpr std::int64_t n = 8, c = 64, h = 56, w = 56;
  const TensorDesc nchw{{n, c, h, w}, {}, DType::f16, 0};
  const TensorDesc nhwc{{n, c, h, w}, {h * w * c, 1, w * c, c}, DType::f16, 0};
  return run_and_check(fmt::format("NCHW to NHWC, f16 [{}, {}, {}, {}]", n, c, h, w), nhwc, nchw, nchw.numel(), 0);
}

}  // namespace

int main() {
  try {
    const bool sliced_ok = slice_and_transpose();
    const bool relayout_ok = nchw_to_nhwc();
    return sliced_ok && relayout_ok ? 0 : 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "views: {}\n", e.what());
    return 1;
  }
}
