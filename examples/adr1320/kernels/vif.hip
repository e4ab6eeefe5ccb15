#include <hip/hip_runtime.h>

#include "../include/adm_params_hip.h"

extern "C" __global__ void vif_kernel(AdmParams p, float* acc) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p.width) atomicAdd(acc, p.scale * static_cast<float>(i) - p.bias);
}
