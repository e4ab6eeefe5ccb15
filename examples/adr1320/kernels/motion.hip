#include "../include/device_common_hip.h"

extern "C" __global__ void motion_kernel(int n, const float* a, const float* b, float* out) {
  const int i = global_index();
  if (i < n) out[i] = clamp01(a[i] - b[i]);
}
