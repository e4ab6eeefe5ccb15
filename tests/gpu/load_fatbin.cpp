// Loads a fatbin file with the CUDA driver API (cuModuleLoadData), runs its `affine` kernel on 4096
// values and compares every result with the host's own computation. Prints a checksum of the results
// (exact: hex floats) and "OK: GPU and host agree" on success; exits 1 on any mismatch or error.
//   load_fatbin FILE.fatbin
#include <cuda.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

#include "affine_params.h"

namespace {

bool check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return true;
  const char* name = nullptr;
  cuGetErrorName(r, &name);
  std::fprintf(stderr, "%s failed: %s\n", what, name ? name : "?");
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s FILE.fatbin\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::vector<char> image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (image.empty()) {
    std::fprintf(stderr, "cannot read %s\n", argv[1]);
    return 1;
  }
  CUdevice dev;
  CUcontext ctx;
  CUmodule module;
  CUfunction fn;
  if (!check(cuInit(0), "cuInit") || !check(cuDeviceGet(&dev, 0), "cuDeviceGet") ||
      !check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain") ||
      !check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent") ||
      !check(cuModuleLoadData(&module, image.data()), "cuModuleLoadData") ||
      !check(cuModuleGetFunction(&fn, module, "affine"), "cuModuleGetFunction")) {
    return 1;
  }
  AffineParams p{1.5f, -0.25f, 4096};
  std::vector<float> x(p.n), y(p.n);
  for (int i = 0; i < p.n; ++i) x[i] = static_cast<float>(i % 97) * 0.125f - 3.0f;
  CUdeviceptr dx, dy;
  const size_t bytes = sizeof(float) * p.n;
  if (!check(cuMemAlloc(&dx, bytes), "cuMemAlloc") || !check(cuMemAlloc(&dy, bytes), "cuMemAlloc") ||
      !check(cuMemcpyHtoD(dx, x.data(), bytes), "cuMemcpyHtoD")) {
    return 1;
  }
  void* params[] = {&p, &dx, &dy};
  if (!check(cuLaunchKernel(fn, (p.n + 127) / 128, 1, 1, 128, 1, 1, 0, nullptr, params, nullptr), "cuLaunchKernel") ||
      !check(cuCtxSynchronize(), "cuCtxSynchronize") || !check(cuMemcpyDtoH(y.data(), dy, bytes), "cuMemcpyDtoH")) {
    return 1;
  }
  int wrong = 0;
  double sum = 0;
  for (int i = 0; i < p.n; ++i) {
    const float want = std::fma(p.scale, x[i], p.bias);
    if (y[i] != want) ++wrong;
    sum += y[i];
  }
  std::printf("affine: n=%d y[0]=%a y[100]=%a y[4095]=%a sum=%a\n", p.n, y[0], y[100], y[4095], sum);
  cuMemFree(dx);
  cuMemFree(dy);
  cuModuleUnload(module);
  cuDevicePrimaryCtxRelease(dev);
  if (wrong) {
    std::printf("MISMATCH: %d values differ from the host's\n", wrong);
    return 1;
  }
  std::printf("OK: GPU and host agree\n");
  return 0;
}
