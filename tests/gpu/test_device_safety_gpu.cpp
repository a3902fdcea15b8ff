// Device safety: a launch runs on its stream's device whatever the current device, and with
// check_pointers a wrong pointer is an error naming it, never a fault. Cases that need two devices
// are skipped by name on a machine with one.
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../host/rearrange_executor.hpp"
#include "gpu.hpp"
#include "ops/rope/reference.hpp"
#include "ops/rope/impl.hpp"
#include "shapejit/rearrange.hpp"
#include "shapejit/rope.hpp"

using namespace shapejit;
using test::DeviceBuffer;

namespace {

/// Makes device `ordinal`'s primary context current for the scope.
class OnDevice {
 public:
  explicit OnDevice(int ordinal) {
    const jit::Driver& d = jit::driver();
    CUdevice device = 0;
    jit::check(d.cuDeviceGet(&device, ordinal), "cuDeviceGet");
    jit::check(d.cuDevicePrimaryCtxRetain(&context_, device), "cuDevicePrimaryCtxRetain");
    jit::check(d.cuCtxGetCurrent(&previous_), "cuCtxGetCurrent");
    jit::check(d.cuCtxSetCurrent(context_), "cuCtxSetCurrent");
  }
  ~OnDevice() { jit::driver().cuCtxSetCurrent(previous_); }
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;
  CUcontext context() const { return context_; }

 private:
  CUcontext context_ = nullptr, previous_ = nullptr;
};

/// A stream created in device `ordinal`'s primary context.
class DeviceStream {
 public:
  explicit DeviceStream(int ordinal) {
    OnDevice on(ordinal);
    jit::check(jit::driver().cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  }
  ~DeviceStream() { jit::driver().cuStreamDestroy(stream_); }
  DeviceStream(const DeviceStream&) = delete;
  DeviceStream& operator=(const DeviceStream&) = delete;
  void* get() const { return stream_; }
  void synchronize() const { jit::check(jit::driver().cuStreamSynchronize(stream_), "cuStreamSynchronize"); }

 private:
  CUstream stream_ = nullptr;
};

CUcontext current_context() {
  CUcontext c = nullptr;
  jit::check(jit::driver().cuCtxGetCurrent(&c), "cuCtxGetCurrent");
  return c;
}

/// The permute of the report that found the bug: f16 [8, 12, 1000, 80] -> permute(0, 2, 1, 3).
struct PermuteCase {
  TensorDesc src{{8, 12, 1000, 80}, {}, DType::f16};
  TensorDesc view = permuted(src, {0, 2, 1, 3});
  TensorDesc dst{view.shape, {}, DType::f16};
  std::size_t bytes = static_cast<std::size_t>(src.numel()) * 2;
  std::vector<std::uint8_t> input = test::random_bytes(bytes, 15);
  std::vector<std::uint8_t> expected = [this] {
    std::vector<std::uint8_t> out(bytes);
    test::reference_rearrange(out.data(), dst, input.data(), view);
    return out;
  }();
};

/// Device buffers of a PermuteCase in the current context: src uploaded, dst poisoned.
struct PermuteBuffers {
  explicit PermuteBuffers(const PermuteCase& c) : src(c.bytes), dst(c.bytes) {
    src.upload(c.input.data(), c.bytes);
    dst.fill(0xa5);
  }
  DeviceBuffer src, dst;
};

bool dst_matches(const PermuteCase& c, const PermuteBuffers& b) {
  std::vector<std::uint8_t> got(c.bytes);
  b.dst.download(got.data(), got.size());
  return got == c.expected;
}

/// The message of the shapejit::Error `body` throws ("" when it throws none).
template <typename Body>
std::string error_of(Body&& body) {
  try {
    body();
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// A rope of f32 [seq, heads, 64] with i32 positions and q only, its inputs on the current device.
struct RopeCase {
  static constexpr std::int64_t kSeq = 300, kHeads = 8, kDim = 64, kRows = 512;
  RopeDesc desc;
  std::vector<float> x;
  std::vector<std::int32_t> positions;
  RopeTables tables = rope_tables(kRows, kDim, DType::f32);
  DeviceBuffer x_dev{kSeq * kHeads * kDim * 4}, y_dev{kSeq * kHeads * kDim * 4}, cos_dev{tables.cos.size()},
      sin_dev{tables.sin.size()}, pos_dev{kSeq * 4};

  explicit RopeCase(bool check_pointers, bool checked = false) {
    desc.style = RopeStyle::neox;
    desc.x = TensorDesc{{kSeq, kHeads, kDim}, {}, DType::f32};
    desc.table = tables.desc();
    desc.positions = TensorDesc{{kSeq}, {}, DType::i32};
    desc.check_pointers = check_pointers;
    desc.checked = checked;
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> value(-2.f, 2.f);
    std::uniform_int_distribution<std::int32_t> position(0, kRows - 1);
    for (std::int64_t i = 0; i < kSeq * kHeads * kDim; ++i) x.push_back(value(rng));
    for (std::int64_t s = 0; s < kSeq; ++s) positions.push_back(position(rng));
    x_dev.upload(x.data(), x.size() * 4);
    cos_dev.upload(tables.cos.data(), tables.cos.size());
    sin_dev.upload(tables.sin.data(), tables.sin.size());
    pos_dev.upload(positions.data(), positions.size() * 4);
    y_dev.fill(0xff);  // NaN until written
  }
  RopePointers pointers() const {
    RopePointers p;
    p.x = x_dev.get();
    p.y = y_dev.get();
    p.cos = cos_dev.get();
    p.sin = sin_dev.get();
    p.positions = pos_dev.get();
    return p;
  }
  /// Elements further from the float64 reference than f32 arithmetic allows.
  std::int64_t mismatches(const RopePlan& plan) const {
    std::vector<float> y(x.size());
    y_dev.download(y.data(), y.size() * 4);
    RopePointers host;
    host.x = x.data();
    host.cos = tables.cos.data();
    host.sin = tables.sin.data();
    host.positions = positions.data();
    std::int64_t bad = 0;
    std::vector<double> ref;
    for (std::int64_t s = 0; s < kSeq; ++s) {
      detail::rope_reference_token(plan.impl().data, host, 0, s, ref);
      for (std::int64_t i = 0; i < kHeads * kDim; ++i) {
        const double r = ref[static_cast<std::size_t>(i)];
        const double got = y[static_cast<std::size_t>(s * kHeads * kDim + i)];
        bad += !(std::fabs(got - r) <= 1e-5 * (1 + std::fabs(r)));
      }
    }
    return bad;
  }
};

}  // namespace

TEST_CASE("device safety: check_pointers names a host pointer, a freed allocation and a view past its allocation, "
          "and the context stays usable" * test::gpu_only()) {
  const PermuteCase c;
  RearrangeOptions options;
  options.check_pointers = true;
  const RearrangePlan plan = plan_rearrange(c.dst, c.view, options);
  PermuteBuffers buffers(c);

  const std::vector<std::uint8_t> host(c.bytes);
  std::string why = error_of([&] { plan.launch(buffers.dst.get(), host.data()); });
  CHECK(contains(why, "src"));
  CHECK(contains(why, "not device memory"));

  void* freed = nullptr;
  {
    DeviceBuffer gone(c.bytes);
    freed = gone.get();
  }
  why = error_of([&] { plan.launch(freed, buffers.src.get()); });
  CHECK(contains(why, "dst"));
  CHECK(contains(why, "not device memory"));

  DeviceBuffer short_src(c.bytes - 2);  // one f16 element short
  why = error_of([&] { plan.launch(buffers.dst.get(), short_src.get()); });
  CHECK(contains(why, "src: the view reaches bytes"));
  CHECK(contains(why, "2 bytes past it"));
  // A view that starts one element before its allocation.
  why = error_of([&] { plan.launch(static_cast<char*>(buffers.dst.get()) - 2, buffers.src.get()); });
  CHECK(contains(why, "dst"));

  // Nothing was launched and the context is healthy: a correct launch still succeeds.
  plan.launch(buffers.dst.get(), buffers.src.get());
  CHECK(jit::driver().cuCtxSynchronize() == CUDA_SUCCESS);
  CHECK(dst_matches(c, buffers));

  RopeCase rope(true);
  const RopePlan rope_plan = plan_rope(rope.desc);
  RopePointers wrong = rope.pointers();
  wrong.positions = rope.positions.data();
  why = error_of([&] { rope_plan.launch(wrong); });
  CHECK(contains(why, "pointers.positions"));
  DeviceBuffer short_table(rope.tables.cos.size() - 4);
  wrong = rope.pointers();
  wrong.sin = short_table.get();
  why = error_of([&] { rope_plan.launch(wrong); });
  CHECK(contains(why, "pointers.sin"));
  rope_plan.launch(rope.pointers());
  CHECK(rope.mismatches(rope_plan) == 0);
}

TEST_CASE("device safety: the per-thread default stream and an explicit stream run in the current context" *
          test::gpu_only()) {
  const PermuteCase c;
  const RearrangePlan plan = plan_rearrange(c.dst, c.view);
  PermuteBuffers buffers(c);
  const CUcontext before = current_context();
  plan.launch(buffers.dst.get(), buffers.src.get(), CU_STREAM_PER_THREAD);
  CHECK(dst_matches(c, buffers));
  DeviceStream stream(0);
  buffers.dst.fill(0xa5);
  plan.launch(buffers.dst.get(), buffers.src.get(), stream.get());
  stream.synchronize();
  CHECK(dst_matches(c, buffers));
  CHECK(current_context() == before);
}

TEST_CASE("device safety (two GPUs): a stream of device 1 with device 0 current: rearrange and rope, plain and "
          "checked" * test::two_gpus()) {
  const PermuteCase c;
  OnDevice device0(0);
  const DeviceStream stream1(1);
  for (const bool check : {false, true}) {
    CAPTURE(check);
    RearrangeOptions options;
    options.check_pointers = check;
    const RearrangePlan plan = plan_rearrange(c.dst, c.view, options);
    std::optional<PermuteBuffers> on1;
    {
      OnDevice device1(1);
      on1.emplace(c);
      CHECK(jit::driver().cuCtxSynchronize() == CUDA_SUCCESS);
    }
    plan.launch(on1->dst.get(), on1->src.get(), stream1.get());
    CHECK(current_context() == device0.context());  // the caller's context is restored
    stream1.synchronize();
    CHECK(jit::driver().cuCtxSynchronize() == CUDA_SUCCESS);  // device 0 did not fault
    OnDevice device1(1);
    CHECK(dst_matches(c, *on1));
    on1.reset();
  }
  for (const bool checked : {false, true}) {
    CAPTURE(checked);
    std::optional<RopeCase> rope;
    {
      OnDevice device1(1);
      rope.emplace(/*check_pointers=*/checked, checked);
    }
    const RopePlan plan = plan_rope(rope->desc);
    plan.launch(rope->pointers(), stream1.get());
    CHECK(current_context() == device0.context());
    stream1.synchronize();
    CHECK(jit::driver().cuCtxSynchronize() == CUDA_SUCCESS);
    OnDevice device1(1);
    CHECK(rope->mismatches(plan) == 0);
    rope.reset();
  }
}

TEST_CASE("device safety (two GPUs): check_pointers refuses memory of the other device" * test::two_gpus()) {
  const PermuteCase c;
  OnDevice device0(0);
  PermuteBuffers on0(c);
  const DeviceStream stream1(1);
  RearrangeOptions options;
  options.check_pointers = true;
  const RearrangePlan plan = plan_rearrange(c.dst, c.view, options);
  const std::string why = error_of([&] { plan.launch(on0.dst.get(), on0.src.get(), stream1.get()); });
  CHECK(contains(why, "dst"));
  CHECK(contains(why, "memory of device 0 but the launch runs on device 1"));
  // Both devices still work.
  plan.launch(on0.dst.get(), on0.src.get());
  CHECK(dst_matches(c, on0));
  OnDevice device1(1);
  PermuteBuffers on1(c);
  plan.launch(on1.dst.get(), on1.src.get(), stream1.get());
  stream1.synchronize();
  CHECK(dst_matches(c, on1));
}

TEST_CASE("device safety (two GPUs): one plan launched on both devices from two threads" * test::two_gpus()) {
  const PermuteCase c;
  const RearrangePlan plan = plan_rearrange(c.dst, c.view);
  bool ok[2] = {false, false};
  std::vector<std::thread> threads;
  for (int device = 0; device < 2; ++device)
    threads.emplace_back([&, device] {
      const DeviceStream stream(device);
      std::optional<PermuteBuffers> buffers;
      {
        OnDevice on(device);
        buffers.emplace(c);
      }
      // This thread has no current context: the stream decides.
      for (int i = 0; i < 20; ++i) plan.launch(buffers->dst.get(), buffers->src.get(), stream.get());
      stream.synchronize();
      OnDevice on(device);
      ok[device] = dst_matches(c, *buffers);
      buffers.reset();
    });
  for (std::thread& t : threads) t.join();
  CHECK(ok[0]);
  CHECK(ok[1]);
}
