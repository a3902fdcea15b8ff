// Permutes a tensor of any rank on the GPU: output dimension i is input dimension perm[i].
// Plans the permute, prints the plan, runs it on random data, checks the result bit for bit
// against the CPU, and prints its bandwidth next to a device-to-device copy of the same bytes.
//
//   permute --shape 64,512,32,128 --perm 0,2,1,3 --dtype f16
//   permute --shape 1000,3,7 --perm 2,0,1 --elem-bytes 12
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <vector>

#include "examples/host_reference.hpp"
#include "shapejit/rearrange.hpp"
#include "support/device.hpp"

namespace {

using namespace shapejit;

/// Index of the first element where `got` and `want` differ, or -1 when they are identical.
std::int64_t first_mismatch(const std::vector<std::uint8_t>& got, const std::vector<std::uint8_t>& want,
                            std::size_t elem) {
  for (std::size_t i = 0; i < got.size(); i += elem)
    if (std::memcmp(got.data() + i, want.data() + i, elem) != 0) return static_cast<std::int64_t>(i / elem);
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Permute a tensor on the GPU with shapejit and check it against the CPU"};
  std::vector<std::int64_t> shape;
  std::vector<int> perm;
  std::string dtype_name = "f32";
  int elem_bytes = 0;
  app.add_option("--shape", shape, "Input shape, comma-separated (e.g. 64,512,32,128)")->required()->delimiter(',');
  app.add_option("--perm", perm, "Output dim i is input dim perm[i], comma-separated (e.g. 0,2,1,3)")
      ->required()
      ->delimiter(',');
  app.add_option("--dtype", dtype_name, "Element type: u8 i8 u16 i16 u32 i32 u64 i64 f16 bf16 f32 f64");
  app.add_option("--elem-bytes", elem_bytes, "Opaque element size in bytes instead of a dtype (1 to 64)")
      ->check(CLI::Range(1, 64));
  CLI11_PARSE(app, argc, argv);

  try {
    const auto dtype = parse_dtype(dtype_name);
    if (!dtype) throw std::invalid_argument(fmt::format("--dtype '{}' is not a dtype name (u8 ... f64)", dtype_name));
    const TensorDesc src{shape, {}, *dtype, elem_bytes};
    const TensorDesc view = permuted(src, perm);  // the input seen in output order
    const TensorDesc dst{view.shape, {}, *dtype, elem_bytes};

    const RearrangePlan plan = plan_rearrange(dst, view);
    fmt::print("{}\n", plan.describe());
    const std::size_t elem = src.element_size();
    const std::size_t bytes = static_cast<std::size_t>(src.numel()) * elem;
    if (bytes == 0) {
      fmt::print("empty tensor: nothing to copy\n");
      return 0;
    }

    const std::vector<std::uint8_t> host_src = support::random_bytes(bytes, 42);
    support::DeviceBuffer src_buf(bytes), dst_buf(bytes);
    src_buf.upload(host_src.data(), bytes);
    dst_buf.fill(0xa5);  // poison: an element the kernel forgets to write shows up
    plan.launch(dst_buf.get(), src_buf.get());
    std::vector<std::uint8_t> got(bytes);
    dst_buf.download(got.data(), bytes);

    std::vector<std::uint8_t> want(bytes, 0xa5);
    examples::reference_rearrange(want.data(), dst, host_src.data(), view);
    if (const std::int64_t bad = first_mismatch(got, want, elem); bad >= 0) {
      fmt::print("MISMATCH at output element {} (of {})\n", bad, src.numel());
      return 1;
    }
    fmt::print("check: bit-exact against the CPU ({} elements of {} bytes)\n", src.numel(), elem);

    const double ms = support::median_ms([&](CUstream stream) { plan.launch(dst_buf.get(), src_buf.get(), stream); });
    const double gbs = 2.0 * static_cast<double>(bytes) / (ms * 1e6);
    const double copy_gbs = support::copy_bandwidth_gbs(bytes);
    fmt::print("permute: {:.4f} ms, {:.0f} GB/s (read + write); device copy of the same bytes {:.0f} GB/s: {:.0f}%\n",
               ms, gbs, copy_gbs, 100.0 * gbs / copy_gbs);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "permute: {}\n", e.what());
    return 1;
  }
}
