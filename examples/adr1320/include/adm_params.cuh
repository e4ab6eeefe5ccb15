#pragma once
// Passed BY VALUE from the host launchers to the kernels (ADR-1320's AdmFixedParametersCuda shape):
// the host stub copies sizeof(AdmParams) bytes and the kernel reads fields at the offsets it was
// compiled with, so a layout change here must rebuild every object that includes this header.
struct AdmParams {
  float scale;
  float bias;
  int width;
};
