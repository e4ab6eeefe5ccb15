// Runs saxpy, scale and two reductions on the GPU, computes the same on the host and compares.
// Exit status: 0 when they agree, 1 when they differ, 2 when the GPU part could not run.
#include <cstdio>
#include <vector>

#include "../include/ops.cuh"
#include "../include/saxpy.cuh"

#define CHECK(call)                                                                   \
  do {                                                                                \
    const cudaError_t err_ = (call);                                                  \
    if (err_ != cudaSuccess) {                                                        \
      std::fprintf(stderr, "saxpy: %s failed: %s\n", #call, cudaGetErrorString(err_)); \
      return 2;                                                                       \
    }                                                                                 \
  } while (0)

int main() {
  const int n = 1 << 16;
  const float a = 2.0f, s = 3.0f;
  // Small integers keep every float sum exact, so GPU and host must agree bit for bit.
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 17);
    y[i] = static_cast<float>(i % 5);
  }

  float *dx = nullptr, *dy = nullptr, *dsums = nullptr;
  CHECK(cudaMalloc(&dx, n * sizeof(float)));
  CHECK(cudaMalloc(&dy, n * sizeof(float)));
  CHECK(cudaMalloc(&dsums, 2 * sizeof(float)));
  CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(dsums, 0, 2 * sizeof(float)));

  launch_saxpy(n, a, dx, dy);
  launch_scale(n, s, dy);
  launch_sum(n, dy, &dsums[0]);
  launch_sum_of_squares(n, dx, &dsums[1]);
  CHECK(cudaGetLastError());
  float sums[2] = {0.0f, 0.0f};
  CHECK(cudaMemcpy(sums, dsums, sizeof(sums), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(dx));
  CHECK(cudaFree(dy));
  CHECK(cudaFree(dsums));

  const Results host = host_reference(a, s, x, y);
  std::printf("sum(s*(a*x+y)): gpu %.1f host %.1f\n", sums[0], host.sum);
  std::printf("sum(x*x):       gpu %.1f host %.1f\n", sums[1], host.sumsq);
  const bool agree = sums[0] == host.sum && sums[1] == host.sumsq;
  std::printf("%s\n", agree ? "OK: GPU and host agree" : "MISMATCH: GPU and host differ");
  return agree ? 0 : 1;
}
