#include "util/cpu.hpp"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace kache::util {

namespace {

#if defined(__x86_64__) || defined(__i386__)
// Leaves GCC's and LLVM's host detection read (driver-i386.cc, Host.cpp), with the subleaves they use.
void add_leaf(std::string& out, unsigned leaf, unsigned subleaf) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(leaf, subleaf, &a, &b, &c, &d) == 0) return;
  // The initial APIC id (leaf 1, ebx bits 24-31) differs per core: left out.
  if (leaf == 1) b &= 0x00ffffffu;
  if (leaf == 4) a &= 0x03ffffffu;  // cores sharing the cache vary with the topology only
  out += fmt::format("{:x}.{:x}:{:08x}{:08x}{:08x}{:08x};", leaf, subleaf, a, b, c, d);
}
#endif

}  // namespace

std::string cpu_signature() {
  std::string out;
#if defined(__x86_64__) || defined(__i386__)
  for (unsigned leaf : {0u, 1u}) add_leaf(out, leaf, 0);
  for (unsigned sub = 0; sub < 4; ++sub) add_leaf(out, 4, sub);
  for (unsigned sub = 0; sub < 2; ++sub) add_leaf(out, 7, sub);
  add_leaf(out, 0xd, 1);
  add_leaf(out, 0x14, 0);
  add_leaf(out, 0x19, 0);
  add_leaf(out, 0x24, 0);  // AVX10's version (GCC 14's host detection)
  for (unsigned leaf = 0x80000000u; leaf <= 0x80000008u; ++leaf) add_leaf(out, leaf, 0);
#else
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("cpu MHz") || line.starts_with("BogoMIPS") || line.starts_with("processor")) continue;
    out += line;
    out += '\n';
  }
#endif
  return out;
}

}  // namespace kache::util
