#pragma once
// kache's own command line (kache --show-stats, --zero-stats, ...), parsed with CLI11.
// Only used when the first argument is one of kache's options; compiler arguments never reach CLI11.
#include <string>

namespace kache::core {

// True if argv[1] is one of kache's own options (so argv is for kache, not for a compiler).
bool is_kache_option(const std::string& arg);
// Runs kache's own command line; returns the process exit code.
int run_cli(int argc, char** argv);

}  // namespace kache::core
