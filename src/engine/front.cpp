#include "engine/front.hpp"

#include <cstdio>
#include <exception>
#include <string>
#include <string_view>

#include "core/config.hpp"
#include "core/invocation.hpp"
#include "core/log.hpp"
#include "engine/pipeline.hpp"
#include "storage/open.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"

namespace kache::engine {
// app/ speaks core's vocabulary (Config, Invocation, reasons, entries...) unqualified.
using namespace kache::core;

namespace {

// Set in the environment of every compiler kache runs (and so of everything that compiler runs). A kache
// started with it is a compiler driver's own step under a compile kache already serves: nvcc running
// its host compiler through a masquerade link (`g++ -> kache` on PATH). Such a step is part of the
// outer compile, whose result kache keys and stores whole; caching it again would only add kache's
// lines to the outer compiler's stderr (a debug log's times there make every outer result unstorable)
// and count each inner compile as a passthrough. So it steps aside: no config, no log, no count.
constexpr std::string_view kServingMarker = "KACHE_SERVING";

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

// A step of a compile kache already serves: the real compiler runs in kache's place, as if kache were
// not on PATH.
int step_aside(Invocation& inv, bool named_kache, const std::string& self) {
  auto real = util::find_executable(inv.compiler_arg, util::env_get(inv.env, "PATH").value_or(""), self);
  if (real) {
    if (!named_kache) inv.compiler_arg = *real;  // as run_front does: the real path, never the link's
    util::exec_replace(*real, inv.argv(), inv.env);
  }
  std::fprintf(stderr, "kache: cannot run the compiler '%s' from PATH.\n", inv.compiler_arg.c_str());
  return 127;
}

}  // namespace

bool named_kache(const std::string& argv0) {
  const std::string base = util::basename(argv0);
  return base == "kache" || base.starts_with("kache-") || base.starts_with("kache.");
}

int run_front(int argc, char** argv) {
  const std::string argv0 = argc > 0 ? argv[0] : "kache";
  Invocation inv = invocation_from_argv(argc, argv);
  const std::string self = util::self_executable();
  if (util::env_get(inv.env, kServingMarker)) return step_aside(inv, named_kache(argv0), self);
  util::env_set(inv.env, kServingMarker, "1");

  const Config cfg = load_config(storage::remote_url_schemes());
  apply_process_settings(cfg);
  try {
    inv.cwd = util::current_dir();
  } catch (const std::exception&) {
    inv.cwd.clear();
  }
  // A configure check's stderr is its verdict: kache's warnings stay in the log there.
  init_logging(cfg.log_filter, cfg.log_file, cfg.cache_dir,
               cfg.warnings_to_stderr && !is_configure_check(inv.args, inv.cwd));
  for (const auto& problem : cfg.problems) log().warn("{}", problem);

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
  if (inv.cwd.empty()) {
    log().info("no current directory: running the compiler uncached");
    util::exec_replace(inv.compiler_path, inv.argv(), inv.env);
    return 127;
  }
  return run_compiler(inv, cfg);
}

}  // namespace kache::engine
