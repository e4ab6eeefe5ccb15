#pragma once
// What a compiler's `-march=native` reads of this machine, as one string: GCC and clang ask the
// processor itself (cpuid on x86: vendor, family/model, feature bits, cache sizes), so a cache dir shared
// between machines (an NFS home, a CI cache restored on another runner) keys their expansions apart.
#include <string>

namespace kache::util {

// The processor's identification and feature leaves (x86: cpuid leaves 0, 1, 4, 7, 0xd, 0x14, 0x19,
// 0x80000000-0x80000008, hex), or the content of /proc/cpuinfo without its per-core frequency lines
// elsewhere. Stable for one machine; costs a few microseconds.
std::string cpu_signature();

}  // namespace kache::util
