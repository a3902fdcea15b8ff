// A minimal kernel that exercises the whole JIT path (compile, cache, load, launch):
// out[i] = in[i] * scale + PROBE_OFFSET for i < n.
extern "C" __global__ void sj_kernel(float* out, const float* in, float scale, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * scale + (float)PROBE_OFFSET;
}
