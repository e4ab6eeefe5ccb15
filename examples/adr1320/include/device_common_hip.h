#pragma once
// Device helpers shared by several HIP kernels.
#include <hip/hip_runtime.h>
__device__ inline float clamp01(float v) { return v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v); }
__device__ inline int global_index() { return blockIdx.x * blockDim.x + threadIdx.x; }
