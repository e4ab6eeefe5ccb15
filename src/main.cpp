// kache: a compiler cache for nvcc. `kache nvcc ARGS...`, `kache /path/to/nvcc ARGS...`, a symlink named
// nvcc pointing at kache, or kache's own options (`kache --show-stats`).
#include <malloc.h>

#include <cstdio>
#include <string>
#include <string_view>

#include "app/cli.hpp"
#include "app/pipeline.hpp"
#include "compiler/gcc/flag_table.hpp"
#include "core/config.hpp"
#include "core/invocation.hpp"
#include "core/log.hpp"
#include "manual.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"

namespace {

bool named_kache(const std::string& argv0) {
  const std::string base = kache::util::basename(argv0);
  return base == "kache" || base.starts_with("kache-") || base.starts_with("kache.");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kache;
  // kache lives for milliseconds: large buffers (a manifest, a restored object) come from the heap and
  // are reused there, not mapped and unmapped one by one (glibc maps blocks from 128 KiB up, and an
  // munmap of a restored thrust+cub object cost more than its decompression's page faults); the process
  // exit returns everything at once.
  ::mallopt(M_MMAP_THRESHOLD, 256 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 512 << 20);
  const std::string argv0 = argc > 0 ? argv[0] : "kache";
  core::Invocation inv;
  int first_arg;
  if (named_kache(argv0)) {
    // Hidden: what the gcc/clang flag table makes of each argument (test_flag_table_coverage.py).
    if (argc >= 2 && std::string_view(argv[1]) == "--classify-gcc-flags")
      return compiler::gcc::print_flag_classes(argc - 2, argv + 2);
    if (argc == 2 && is_manual_table_option(argv[1])) return print_manual_table(argv[1]);
    if (core::is_kache_invocation(argc, argv)) return core::run_cli(argc, argv);
    if (argv[1][0] == '-') {
      // CUDACXX="kache nvcc": CMake 3.25 runs some of its compiler checks without the "nvcc" part,
      // i.e. `kache -forward-unknown-to-host-compiler ...`. A compiler flag where the compiler name
      // belongs means nvcc, the compiler kache fronts.
      inv.compiler_arg = "nvcc";
      first_arg = 1;
    } else {
      inv.compiler_arg = argv[1];
      first_arg = 2;
    }
  } else {
    // Invoked through a link named like the compiler (e.g. nvcc -> kache).
    inv.compiler_arg = util::basename(argv0);
    first_arg = 1;
  }
  for (int i = first_arg; i < argc; ++i) inv.args.emplace_back(argv[i]);
  inv.env = util::current_environment();

  const core::Config cfg = core::load_config();
  core::apply_process_settings(cfg);
  core::init_logging(cfg.log_filter, cfg.log_file, cfg.cache_dir);
  for (const auto& problem : cfg.problems) core::log().warn("{}", problem);

  const std::string self = util::self_executable();
  auto resolved = util::find_executable(inv.compiler_arg, util::env_get(inv.env, "PATH").value_or(""), self);
  if (!resolved) {
    std::fprintf(stderr, "kache: cannot find the compiler '%s' on PATH.\n", inv.compiler_arg.c_str());
    return 127;
  }
  inv.compiler_path = *resolved;
  if (!named_kache(argv0)) {
    // nvcc finds its toolkit from argv[0]; the bare name would lead it back to the link's directory.
    inv.compiler_arg = inv.compiler_path;
  }
  try {
    inv.cwd = util::current_dir();
  } catch (const std::exception&) {
    inv.cwd.clear();
  }
  if (inv.cwd.empty()) {
    core::log().info("no current directory: running the compiler uncached");
    util::exec_replace(inv.compiler_path, inv.argv(), inv.env);
    return 127;
  }
  return core::run_compiler(inv, cfg);
}
