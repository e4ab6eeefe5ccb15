#include "compiler/gcc/wrapper.hpp"

#include <algorithm>
#include <filesystem>
#include <cctype>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/tool_files.hpp"
#include "core/log.hpp"
#include "util/cache_umask.hpp"
#include "util/fs.hpp"
#include "util/hash.hpp"
#include "util/process.hpp"
#include "util/process_bounded.hpp"
#include "util/serial.hpp"
#include "util/shell_words.hpp"

namespace kache::compiler::gcc {

namespace {

constexpr std::uint32_t kMemoVersion = 2;
// Marks around the compile's own arguments, so the options the wrapper added before and after them
// can be told apart in COLLECT_GCC_OPTIONS. Macros no source tests.
constexpr const char* kBegin = "-D__kache_wrapped_arguments_begin__";
constexpr const char* kEnd = "-D__kache_wrapped_arguments_end__";
// Candidate readings tried before giving up (each is one -### run of the real driver).
constexpr std::size_t kMaxCandidates = 8;

// Variables a build tool sets per job or per run that a compiler wrapper has no business reading; left
// out of the memo key so that `make -j` and Ninja runs share it.
constexpr std::string_view kPerRunVariables[] = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "MAKE_TERMOUT",
                                                 "MAKE_TERMERR", "OLDPWD", "SHLVL", "_", "NINJA_STATUS"};

std::string environment_digest(const util::Environment& env) {
  std::vector<std::string> kept;
  for (const auto& e : env) {
    const std::string_view name = std::string_view(e).substr(0, e.find('='));
    if (name.starts_with("KACHE_")) continue;  // kache's own settings reach kache, not the wrapper's run
    if (std::find(std::begin(kPerRunVariables), std::end(kPerRunVariables), name) != std::end(kPerRunVariables)) {
      continue;
    }
    kept.push_back(e);
  }
  std::sort(kept.begin(), kept.end());
  util::Hasher h;
  for (const auto& e : kept) h.add_field("env", e);
  return h.finish().hex();
}

}  // namespace

std::optional<std::string> compiler_variable(const ScriptChain& chain, EnvRoute route) {
  for (const auto* names : {&chain.variables, &chain.words}) {
    for (const auto& n : *names) {
      // PATH decides only which program runs, which the reading names and keys (a bare driver name
      // is refused where the wrapper sets PATH).
      if (n == "PATH") continue;
      const EnvRule* rule = find_env_rule(n, route);
      if (rule && rule->effect != EnvEffect::Inert) return n;
    }
  }
  return std::nullopt;
}

namespace {

struct DryRunReading {
  std::string text;  // normalized
  std::string collect_gcc;
  std::vector<std::string> options;  // the first COLLECT_GCC_OPTIONS
  std::string installed_dir;         // clang
  std::string clang_program;         // clang: the program of its first job
};

DryRunReading read_dry_run_text(const std::string& err) {
  DryRunReading r;
  r.text = normalized_dry_run(err);
  std::size_t pos = 0;
  while (pos < err.size()) {
    const std::size_t end = std::min(err.find('\n', pos), err.size());
    const std::string_view line = std::string_view(err).substr(pos, end - pos);
    pos = end + 1;
    if (line.starts_with("COLLECT_GCC=") && r.collect_gcc.empty()) r.collect_gcc = line.substr(12);
    if (line.starts_with("COLLECT_GCC_OPTIONS=") && r.options.empty()) r.options = collect_options(line.substr(20));
    if (line.starts_with("InstalledDir: ")) r.installed_dir = line.substr(14);
    if (line.starts_with(" \"") && r.clang_program.empty()) {
      const std::size_t close = line.find('"', 2);
      if (close != std::string_view::npos) r.clang_program = line.substr(2, close - 2);
    }
  }
  return r;
}

// Whether the real driver's -### output is what the wrapper's printed: all of it, in one piece (the
// wrapper's own lines, `set -x` tracing or an echo to stderr, may stand before or after it).
bool same_passes(const std::string& driver_text, const std::string& wrapper_text) {
  return !driver_text.empty() && wrapper_text.find(driver_text) != std::string::npos;
}

std::vector<std::string> marked(const std::vector<std::string>& before, const std::vector<std::string>& args,
                                const std::vector<std::string>& after) {
  std::vector<std::string> out = before;
  out.push_back(kBegin);
  out.insert(out.end(), args.begin(), args.end());
  out.push_back(kEnd);
  out.insert(out.end(), after.begin(), after.end());
  out.push_back("-###");
  return out;
}

// A -### run, bounded: a wrapper that leaves a helper holding its output, or waits, costs the compile
// this long at most and then passes it through.
constexpr int kDryRunTimeoutMs = 30'000;

util::ProcessResult dry_run(const std::string& program, const std::vector<std::string>& args,
                            const util::Environment& env, const std::string& argv0 = "") {
  std::vector<std::string> argv = {argv0.empty() ? program : argv0};
  argv.insert(argv.end(), args.begin(), args.end());
  util::BoundedProcessResult r = util::run_capture_bounded(program, argv, env, kDryRunTimeoutMs);
  if (r.timed_out) r.exit_code = -1;
  return r;
}

// How many times the driver ran: each run prints one COLLECT_GCC= line (a wrapper that runs it twice,
// `gcc "$@"; exec gcc -DSECOND "$@"`, would be read as its first run).
std::size_t driver_runs(const std::string& err) {
  std::size_t n = err.starts_with("COLLECT_GCC=") ? 1 : 0;
  for (std::size_t p = err.find("\nCOLLECT_GCC="); p != std::string::npos; p = err.find("\nCOLLECT_GCC=", p + 1)) ++n;
  return n;
}

// The options around the marks in a COLLECT_GCC_OPTIONS list: (before, after), nullopt without both.
std::optional<std::pair<std::vector<std::string>, std::vector<std::string>>> around_marks(
    const std::vector<std::string>& options) {
  auto find = [&](const char* mark) {
    for (std::size_t i = 0; i + 1 < options.size(); ++i) {
      if (options[i] == "-D" && "-D" + options[i + 1] == mark) return i;
    }
    return options.size();
  };
  const std::size_t b = find(kBegin);
  const std::size_t e = find(kEnd);
  if (b == options.size() || e == options.size() || e < b) return std::nullopt;
  return std::make_pair(std::vector<std::string>(options.begin(), options.begin() + static_cast<std::ptrdiff_t>(b)),
                        std::vector<std::string>(options.begin() + static_cast<std::ptrdiff_t>(e) + 2, options.end()));
}

// GCC: the options the wrapper added after the compile's own, less the driver's own defaults (which
// the real driver adds again): candidates from the most to the fewest, each checked by verify().
std::optional<ResolvedWrapper> resolve_gcc(const core::Invocation& inv, const DryRunReading& wrapped,
                                           const std::string& driver) {
  const std::string& argv0 = wrapped.collect_gcc;
  // Both runs print COLLECT_GCC as run; the wrapper's names the driver as the wrapper spelled it.
  auto around = around_marks(wrapped.options);
  if (!around) return std::nullopt;
  const auto& [before, after] = *around;
  const util::ProcessResult plain = dry_run(driver, marked({}, inv.args, {}), inv.env, argv0);
  const DryRunReading plain_reading = read_dry_run_text(plain.err);
  auto plain_around = around_marks(plain_reading.options);
  std::vector<std::vector<std::string>> candidates;
  if (plain_around && plain_around->second.size() <= after.size() &&
      std::equal(plain_around->second.begin(), plain_around->second.end(), after.end() - static_cast<std::ptrdiff_t>(plain_around->second.size()))) {
    candidates.emplace_back(after.begin(), after.end() - static_cast<std::ptrdiff_t>(plain_around->second.size()));
  }
  for (std::size_t k = after.size() + 1; k-- > 0 && candidates.size() < kMaxCandidates;) {
    candidates.emplace_back(after.begin(), after.begin() + static_cast<std::ptrdiff_t>(k));
  }
  for (const auto& added_after : candidates) {
    const util::ProcessResult r = before.empty() && added_after.empty()
                                      ? plain
                                      : dry_run(driver, marked(before, inv.args, added_after), inv.env, argv0);
    if (!r.ok() || !same_passes(normalized_dry_run(r.err), wrapped.text)) continue;
    ResolvedWrapper w;
    w.driver = driver;
    w.driver_arg = argv0;
    w.args = before;
    w.args.insert(w.args.end(), inv.args.begin(), inv.args.end());
    w.args.insert(w.args.end(), added_after.begin(), added_after.end());
    w.added = before;
    w.added.insert(w.added.end(), added_after.begin(), added_after.end());
    return w;
  }
  return std::nullopt;
}

}  // namespace

namespace {

// clang prints its jobs, not the options it received: a wrapper is read as the clang it runs only when
// that clang, run with the compile's own arguments, prints the same jobs (it added nothing).
std::optional<ResolvedWrapper> resolve_clang(const core::Invocation& inv, const DryRunReading& wrapped) {
  std::vector<std::string> candidates;
  if (!wrapped.installed_dir.empty()) {
    candidates.push_back(util::join_path(wrapped.installed_dir, util::basename(inv.compiler_arg)));
  }
  if (!wrapped.clang_program.empty()) candidates.push_back(wrapped.clang_program);
  for (const auto& driver : candidates) {
    if (driver.empty() || driver[0] != '/' || is_script(driver) || !util::exists(driver)) continue;
    const util::ProcessResult r = dry_run(driver, marked({}, inv.args, {}), inv.env);
    if (!r.ok() || !same_passes(normalized_dry_run(r.err), wrapped.text)) continue;
    ResolvedWrapper w;
    w.driver = driver;
    w.driver_arg = driver;
    w.args = inv.args;
    return w;
  }
  return std::nullopt;
}

// What the wrapper memo keeps (compiler/tool_files.hpp's write_memo and read_memo walk this list).
struct WrapperMemo {
  ResolvedWrapper w;
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit&& visit) {
    visit(m.w.driver);
    visit(m.w.driver_arg);
    visit(m.w.args);
    visit(m.w.added);
  }
};

// The memo's key: everything the reading depends on that a stat or the environment shows.
std::string memo_key(const core::Invocation& inv, const ScriptChain& chain) {
  util::Hasher h;
  h.add_field("wrapper-memo", std::to_string(kMemoVersion));
  h.add_field("wrapper", inv.compiler_path);
  h.add_field("argc", std::to_string(inv.args.size()));
  for (const auto& a : inv.args) h.add_field("arg", a);
  h.add_field("environment", environment_digest(inv.env));
  for (const auto& s : chain.scripts) add_identity(h, "script", s);
  for (const auto& p : chain.named_paths) add_identity(h, "named", p);
  for (const auto& [name, resolved] : chain.commands) {
    h.add_field("command", name);
    add_identity(h, "resolved", resolved);
  }
  return h.finish().hex();
}

std::variant<Passthrough, ResolvedWrapper> probe(const core::Invocation& inv, const ScriptChain& chain) {
  const util::ProcessResult wrapped_run = dry_run(inv.compiler_path, marked({}, inv.args, {}), inv.env);
  if (!wrapped_run.ok()) {
    return Passthrough{"wrapper-script", inv.compiler_path + " -### failed: " +
                                             wrapped_run.err.substr(0, wrapped_run.err.find('\n'))};
  }
  const DryRunReading wrapped = read_dry_run_text(wrapped_run.err);
  if (driver_runs(wrapped_run.err) > 1) return Passthrough{"wrapper-script", inv.compiler_path + " runs the driver twice"};
  std::optional<ResolvedWrapper> resolved;
  if (!wrapped.collect_gcc.empty()) {
    std::string driver = wrapped.collect_gcc;
    if (driver.find('/') == std::string::npos) {
      // A bare name the wrapper ran is found on its PATH, which must then be the compile's.
      if (std::find(chain.variables.begin(), chain.variables.end(), "PATH") != chain.variables.end()) {
        return Passthrough{"wrapper-script", inv.compiler_path + " sets PATH and runs " + driver};
      }
      driver = util::find_executable(driver, util::env_get(inv.env, "PATH").value_or(""), util::self_executable())
                   .value_or("");
    }
    driver = util::absolute_path(driver, inv.cwd);
    std::error_code ec;
    if (std::filesystem::equivalent(driver, util::self_executable(), ec)) {
      return Passthrough{"wrapper-script", inv.compiler_path + " runs kache itself"};
    }
    if (!driver.empty() && !is_script(driver)) resolved = resolve_gcc(inv, wrapped, driver);
  } else {
    resolved = resolve_clang(inv, wrapped);
  }
  if (!resolved) {
    return Passthrough{"wrapper-script", inv.compiler_path +
                                             ": no driver run with the compile's arguments and the options the wrapper "
                                             "added prints the passes the wrapper runs"};
  }
  return *resolved;
}

}  // namespace

std::variant<Passthrough, ResolvedWrapper> resolve_wrapper(const core::Invocation& inv, EnvRoute route,
                                                           const std::string& memo_dir) {
  const std::string search_path = util::env_get(inv.env, "PATH").value_or("");
  ScriptChain chain = read_script_chain(inv.compiler_path, search_path);
  // Startup files and exported functions a bash wrapper runs before its first line.
  if (auto bash_env = util::env_get(inv.env, "BASH_ENV"); bash_env && !bash_env->empty()) {
    chain.named_paths.push_back(util::absolute_path(*bash_env, inv.cwd));
    chain.unpinned = chain.unpinned.empty() ? "BASH_ENV is set" : chain.unpinned;
    add_script_body(chain, regular_file_head(util::absolute_path(*bash_env, inv.cwd), 64 * 1024), search_path);
  }
  for (const auto& e : inv.env) {
    if (e.starts_with("BASH_FUNC_")) add_script_body(chain, e.substr(e.find('=') + 1), search_path);
  }
  // A relative PATH entry finds programs in the working directory, which the memo does not key.
  for (std::size_t start = 0; start <= search_path.size();) {
    const std::size_t end = std::min(search_path.find(':', start), search_path.size());
    if (end == start || search_path[start] != '/') chain.unpinned = chain.unpinned.empty() ? "a relative PATH entry" : chain.unpinned;
    start = end + 1;
  }
  if (!chain.changes_environment.empty()) {
    return Passthrough{"wrapper-environment", inv.compiler_path + " may change the driver's environment or working "
                                                  "directory unseen (" + chain.changes_environment + ")"};
  }
  if (auto name = compiler_variable(chain, route)) {
    return Passthrough{"wrapper-environment", inv.compiler_path + " mentions " + *name +
                                                  ", which the compiler reads and kache cannot see it set"};
  }
  const std::string path = !memo_dir.empty() && chain.unpinned.empty()
                               ? util::join_path(memo_dir, "wrapper-" + memo_key(inv, chain))
                               : "";
  if (const std::optional<std::string> bytes = read_memo_file(memo_dir, path)) {
    try {
      ResolvedWrapper w = read_memo<WrapperMemo>(kMemoVersion, *bytes).w;
      w.from_memo = true;
      return w;
    } catch (const std::exception& e) {
      core::log().debug("wrapper memo {}: {}", path, e.what());
    }
  }
  const std::int64_t began = util::file_clock_now_ns();
  auto answer = probe(inv, chain);
  if (const auto* w = std::get_if<ResolvedWrapper>(&answer)) {
    core::log().debug("wrapper {} runs {} (added: {})", inv.compiler_path, w->driver, fmt::join(w->added, " "));
    bool settled = true;
    for (const auto& s : chain.scripts) {
      if (auto id = util::stat_identity(s); id && identity_is_racy(s, *id, began)) settled = false;
    }
    if (!path.empty() && settled) write_memo_file(memo_dir, path, write_memo(kMemoVersion, WrapperMemo{*w}));
  } else {
    core::log().debug("wrapper {}: {}", inv.compiler_path, std::get<Passthrough>(answer).detail);
  }
  return answer;
}

std::optional<WrapperDryRun> wrapper_dry_run(const std::string& wrapper, const std::vector<std::string>& args,
                                             const util::Environment& env, const std::string& cwd) {
  const util::ProcessResult r = dry_run(wrapper, marked({}, args, {}), env);
  if (!r.ok()) return std::nullopt;
  const DryRunReading reading = read_dry_run_text(r.err);
  WrapperDryRun w;
  w.text = reading.text;
  w.driver = reading.collect_gcc.empty() ? reading.clang_program : reading.collect_gcc;
  if (w.driver.empty()) return std::nullopt;
  if (w.driver.find('/') == std::string::npos) {
    w.driver = util::find_executable(w.driver, util::env_get(env, "PATH").value_or("")).value_or("");
    if (w.driver.empty()) return std::nullopt;
  }
  w.driver = util::absolute_path(w.driver, cwd);
  if (auto around = around_marks(reading.options)) {
    w.added = around->first;
    w.added.insert(w.added.end(), around->second.begin(), around->second.end());
  }
  return w;
}

std::string normalized_dry_run(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    // <dir>/ccXXXXXX.<suffix>: GCC's make_temp_file.
    if (text[i] == '/' && i + 10 < text.size() && text[i + 1] == 'c' && text[i + 2] == 'c' &&
        std::all_of(text.begin() + static_cast<std::ptrdiff_t>(i) + 3, text.begin() + static_cast<std::ptrdiff_t>(i) + 9,
                    [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }) &&
        text[i + 9] == '.') {
      out += "/cc<temp>";
      i += 8;
      continue;
    }
    out += text[i];
  }
  return out;
}

std::vector<std::string> collect_options(std::string_view value) {
  return util::split_shell_words(value).texts();
}

}  // namespace kache::compiler::gcc
