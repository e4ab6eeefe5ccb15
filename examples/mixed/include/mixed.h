#pragma once
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif
unsigned mixed_checksum(const unsigned char* data, size_t n);
int mixed_table_entry(int i);
int mixed_scale_on_device(float* x, int n, float a);
const char* mixed_version(void);
#ifdef __cplusplus
}
#endif
