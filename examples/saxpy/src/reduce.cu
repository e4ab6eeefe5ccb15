#include "../include/saxpy.cuh"

// One partial sum per block in shared memory, then one atomicAdd per block.
__global__ void sum_kernel(int n, const float* x, float* result) {
  __shared__ float partial[256];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  partial[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(result, partial[0]);
}

void launch_sum(int n, const float* x, float* result) {
  sum_kernel<<<(n + 255) / 256, 256>>>(n, x, result);
}
