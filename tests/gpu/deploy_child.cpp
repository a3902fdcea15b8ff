// A fresh process for the deployment tests (the caches, offline mode and NVRTC are per process).
//   deploy_child offline-miss   asks for a kernel that no cache holds; prints
//                               "offline_miss nvrtc_loaded=0|1" and the message, exit 0 on that error
#include <cstdio>
#include <cstring>
#include <string>

#include "jit/kernel_cache.hpp"
#include "jit/nvrtc.hpp"
#include "shapejit/core.hpp"

namespace {

using namespace shapejit;

int offline_miss() {
  const jit::Program program{"probe", "extern \"C\" __global__ void sj_kernel() {} // deploy_child", {},
                             "rearrange --dtype f32 --shape 8 --perm 0"};
  try {
    jit::obtain_kernel(program, "sm_90");
    std::printf("no error: the kernel was found or compiled\n");
    return 1;
  } catch (const Error& e) {
    const bool expected = e.code() == ErrorCode::offline_miss;
    std::printf("%s nvrtc_loaded=%d\n%s\n", expected ? "offline_miss" : "unexpected error", jit::nvrtc_loaded() ? 1 : 0,
                e.what());
    return expected && !jit::nvrtc_loaded() ? 0 : 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "offline-miss") == 0) return offline_miss();
  std::fprintf(stderr, "usage: deploy_child offline-miss\n");
  return 2;
}
