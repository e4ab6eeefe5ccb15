#include <array>
#include <numeric>

#include "mixed.h"
#include "mixed_version.h"

namespace {
constexpr std::array<int, 8> make_table() {
  std::array<int, 8> t{};
  for (int i = 0; i < 8; ++i) t[i] = i * i + MIXED_VERSION_MAJOR;
  return t;
}
constexpr auto kTable = make_table();
}  // namespace

extern "C" int mixed_table_entry(int i) { return kTable[static_cast<std::size_t>(i) % kTable.size()]; }
