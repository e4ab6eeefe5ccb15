#include "../include/device_common.cuh"

__global__ void motion_kernel(int n, const float* a, const float* b, float* out) {
  const int i = global_index();
  if (i < n) out[i] = clamp01(a[i] - b[i]);
}

void launch_motion(int n, const float* a, const float* b, float* out) {
  motion_kernel<<<(n + 127) / 128, 128>>>(n, a, b, out);
}
