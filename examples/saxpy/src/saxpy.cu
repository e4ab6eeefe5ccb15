#include "../include/ops.cuh"
#include "../include/saxpy.cuh"

__global__ void saxpy_kernel(int n, float a, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = saxpy_op(a, x[i], y[i]);
}

void launch_saxpy(int n, float a, const float* x, float* y) {
  saxpy_kernel<<<(n + 255) / 256, 256>>>(n, a, x, y);
}
