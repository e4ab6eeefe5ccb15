#pragma once
// `kache doctor`: the machine's facts before the first compile. Each row is ok, warn or fail; a fail is
// a pairing that cannot work and says, in one sentence, what to change. Exit status 1 on any fail.
// Each room supplies its own rows: the adapters' toolchain facts come from compiler/*/doctor.hpp (nvcc,
// its host compiler and the driver; hipcc and ROCm; gcc and clang); this file adds the cache's and the
// configuration's and prints them.
#include <string>
#include <vector>

namespace kache::commands {

// `kache doctor [--json] [--nvcc PATH] [-ccbin DIR|COMPILER]`; args are the words after "doctor".
int run_doctor(const std::vector<std::string>& args);

}  // namespace kache::commands
