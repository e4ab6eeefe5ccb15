#include "../include/ops.cuh"
#include "../include/saxpy.cuh"

__global__ void scale_kernel(int n, float s, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = scale_op(s, y[i]);
}

void launch_scale(int n, float s, float* y) {
  scale_kernel<<<(n + 255) / 256, 256>>>(n, s, y);
}
