#include "../include/adm_params.cuh"

__global__ void vif_kernel(AdmParams p, float* acc) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p.width) atomicAdd(acc, p.scale * static_cast<float>(i) - p.bias);
}

void launch_vif(AdmParams p, float* acc) { vif_kernel<<<(p.width + 127) / 128, 128>>>(p, acc); }
