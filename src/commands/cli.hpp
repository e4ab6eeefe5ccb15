#pragma once
// kache's own command line (kache --show-stats, --zero-stats, ...), parsed with CLI11.
// Only used when the first argument is one of kache's options; compiler arguments never reach CLI11.
#include <string>

namespace kache::commands {

// Whether argv is for kache itself (its options, doctor, explain) rather than a compile. A flag where the
// compiler's name belongs means nvcc only where the words are a compile (CMake 3.25's try_compile runs
// `kache -forward-unknown-to-host-compiler ... -c x.cu -o x.o`): they begin with that flag, or name a
// source or object file (or "-", stdin). Anything else is kache's, and a mistyped option gets kache's error.
bool is_kache_invocation(int argc, char** argv);
// Runs kache's own command line; returns the process exit code.
int run_cli(int argc, char** argv);

}  // namespace kache::commands
