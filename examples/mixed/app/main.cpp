#include <cstdio>

#include "mixed.h"

int main() {
  const unsigned char bytes[] = {1, 2, 3};
  std::printf("mixed %s checksum %u table %d\n", mixed_version(), mixed_checksum(bytes, 3), mixed_table_entry(3));
  return 0;
}
