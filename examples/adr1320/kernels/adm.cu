#include "../include/adm_params.cuh"
#include "../include/device_common.cuh"

__global__ void adm_kernel(AdmParams p, const float* in, float* out) {
  const int i = global_index();
  if (i < p.width) out[i] = clamp01(p.scale * in[i] + p.bias);
}

void launch_adm(AdmParams p, const float* in, float* out) {
  adm_kernel<<<(p.width + 127) / 128, 128>>>(p, in, out);
}
