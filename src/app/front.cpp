#include "app/front.hpp"

#include <cstdio>
#include <exception>

#include "app/pipeline.hpp"
#include "core/config.hpp"
#include "core/invocation.hpp"
#include "core/log.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"

namespace kache::app {
// app/ speaks core's vocabulary (Config, Invocation, reasons, entries...) unqualified.
using namespace kache::core;

namespace {

// The compiler and its arguments as argv names them.
Invocation invocation_from_argv(int argc, char** argv) {
  const std::string argv0 = argc > 0 ? argv[0] : "kache";
  Invocation inv;
  int first_arg;
  if (named_kache(argv0)) {
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
  return inv;
}

}  // namespace

bool named_kache(const std::string& argv0) {
  const std::string base = util::basename(argv0);
  return base == "kache" || base.starts_with("kache-") || base.starts_with("kache.");
}

int run_front(int argc, char** argv) {
  const std::string argv0 = argc > 0 ? argv[0] : "kache";
  Invocation inv = invocation_from_argv(argc, argv);

  const Config cfg = load_config();
  apply_process_settings(cfg);
  init_logging(cfg.log_filter, cfg.log_file, cfg.cache_dir);
  for (const auto& problem : cfg.problems) log().warn("{}", problem);

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
    log().info("no current directory: running the compiler uncached");
    util::exec_replace(inv.compiler_path, inv.argv(), inv.env);
    return 127;
  }
  return run_compiler(inv, cfg);
}

}  // namespace kache::app
