#pragma once
// HIP half of adm_params.cuh (ADR-1320's integer_adm_hip.h): passed BY VALUE from the host (through
// hipModuleLaunchKernel's argument buffer) to the kernels of the HSACO, which read its fields at the
// offsets they were compiled with. A layout change here must rebuild every HSACO that includes it.
struct AdmParams {
  float scale;
  float bias;
  int width;
};
