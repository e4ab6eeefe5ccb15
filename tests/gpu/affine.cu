// A kernel loaded at run time from a standalone fatbin (nvcc --fatbin), spec 003's shape: the parameter
// struct is passed by value through cuLaunchKernel, so host and device must agree on its layout.
#include "affine_params.h"

extern "C" __global__ void affine(AffineParams p, const float* in, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // The same arithmetic on every architecture; sm_90 takes its own branch so each arch's code is used.
  if (i < p.n) out[i] = fmaf(p.scale, in[i], p.bias);
#else
  if (i < p.n) out[i] = p.scale * in[i] + p.bias;
#endif
}
