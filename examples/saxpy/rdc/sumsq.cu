#include "../include/ops.cuh"
#include "../include/saxpy.cuh"

__global__ void sum_of_squares_kernel(int n, const float* x, float* result) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(result, square_op(x[i]));  // square_op lives in device_ops.cu
}

void launch_sum_of_squares(int n, const float* x, float* result) {
  sum_of_squares_kernel<<<(n + 255) / 256, 256>>>(n, x, result);
}
