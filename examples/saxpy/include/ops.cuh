#pragma once
// Element-wise operations shared by the GPU kernels and the host reference, plus the host-only
// reference implementation of the whole computation.
#include <cstddef>
#include <vector>

__host__ __device__ inline float saxpy_op(float a, float x, float y) { return a * x + y; }
__host__ __device__ inline float scale_op(float s, float y) { return s * y; }

// Defined in rdc/device_ops.cu; resolved by the device link (needs -rdc / separable compilation).
extern __device__ float square_op(float v);

struct Results {
  double sum;    // sum(s * (a * x + y))
  double sumsq;  // sum(x * x)
};

#ifndef __CUDA_ARCH__
// Host-only code: only nvcc's host pass sees this body (a device-side `nvcc -E` would not), so a
// cache keyed on device-preprocessed output would miss edits here.
inline Results host_reference(float a, float s, const std::vector<float>& x, std::vector<float> y) {
  Results r{0.0, 0.0};
  for (std::size_t i = 0; i < x.size(); ++i) {
    y[i] = scale_op(s, saxpy_op(a, x[i], y[i]));
    r.sum += y[i];
    r.sumsq += static_cast<double>(x[i]) * x[i];
  }
  return r;
}
#else
// The device passes parse main() too but never generate host code: a declaration is enough.
Results host_reference(float a, float s, const std::vector<float>& x, std::vector<float> y);
#endif
