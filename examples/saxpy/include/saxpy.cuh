#pragma once
// Host-callable launchers for the example's kernels. Pointers are device pointers; each launcher
// only enqueues work on the default stream, the caller synchronizes and checks errors.

// libsaxpy_kernels (whole-program compilation)
void launch_saxpy(int n, float a, const float* x, float* y);  // y = a * x + y
void launch_scale(int n, float s, float* y);                  // y = s * y
void launch_sum(int n, const float* x, float* result);        // *result += sum(x)

// libsaxpy_rdc (separable compilation: sumsq.cu calls a __device__ function from device_ops.cu)
void launch_sum_of_squares(int n, const float* x, float* result);  // *result += sum(x * x)
