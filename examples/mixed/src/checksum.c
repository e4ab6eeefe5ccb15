#include "mixed.h"
#include "mixed_version.h"

const char* mixed_version(void) { return MIXED_VERSION; }

unsigned mixed_checksum(const unsigned char* data, size_t n) {
  unsigned sum = MIXED_VERSION_MAJOR;
  for (size_t i = 0; i < n; ++i) sum = sum * 31u + data[i];
  return sum;
}
