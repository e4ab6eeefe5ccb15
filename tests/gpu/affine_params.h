#pragma once
// Shared by the kernel (affine.cu) and the host loader (load_fatbin.cpp): passed by value.
struct AffineParams {
  float scale;
  float bias;
  int n;
};
