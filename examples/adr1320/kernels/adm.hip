#include "../include/adm_params_hip.h"
#include "../include/device_common_hip.h"
#if defined(__gfx90a__)
#include "../include/adm_gfx90a.h"
#else
constexpr float kAdmGfx90aGain = 1.0f;
#endif

extern "C" __global__ void adm_kernel(AdmParams p, const float* in, float* out) {
  const int i = global_index();
  if (i < p.width) out[i] = clamp01(kAdmGfx90aGain * p.scale * in[i] + p.bias);
}
