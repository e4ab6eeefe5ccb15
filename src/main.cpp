// kache: a compiler cache for nvcc, gcc/clang and hipcc (clang's HIP offload). `kache nvcc ARGS...`,
// `kache /path/to/g++ ARGS...`, a symlink named like the compiler (nvcc, g++, hipcc...) pointing at kache,
// or kache's own options (`kache --show-stats`).
// main only dispatches: kache's own words to the CLI (commands/cli.hpp), a compile to the front (engine/front.hpp).
#include <malloc.h>

#include <string>
#include <string_view>

#include "commands/cli.hpp"
#include "engine/front.hpp"
#include "compiler/registry.hpp"
#include "manual.hpp"

int main(int argc, char** argv) {
  using namespace kache;
  // kache lives for milliseconds: large buffers (a manifest, a restored object) come from the heap and
  // are reused there, not mapped and unmapped one by one (glibc maps blocks from 128 KiB up, and an
  // munmap of a restored thrust+cub object cost more than its decompression's page faults); the process
  // exit returns everything at once.
  ::mallopt(M_MMAP_THRESHOLD, 256 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 512 << 20);
  if (engine::named_kache(argc > 0 ? argv[0] : "kache")) {
    // Hidden: what the gcc/clang flag table makes of each argument (test_flag_table_coverage.py).
    if (argc >= 2 && std::string_view(argv[1]) == "--classify-gcc-flags")
      return compiler::print_gcc_flag_classes(argc - 2, argv + 2);
    if (argc == 2 && is_manual_table_option(argv[1])) return print_manual_table(argv[1]);
    if (commands::is_kache_invocation(argc, argv)) return commands::run_cli(argc, argv);
  }
  return engine::run_front(argc, argv);
}
