#include "commands/explain.hpp"

#include <algorithm>
#include <ctime>
#include <map>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <variant>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "commands/options.hpp"
#include "compiler/registry.hpp"
#include "core/config.hpp"
#include "core/depfile.hpp"
#include "core/invocation.hpp"
#include "engine/explain_record.hpp"
#include "storage/open.hpp"
#include "util/beneath.hpp"
#include "util/fs.hpp"
#include "util/text.hpp"
#include "util/hash.hpp"
#include "util/process.hpp"

namespace kache::commands::explain {
using namespace kache::core;
using namespace kache::engine::explain;
namespace {

using json = nlohmann::ordered_json;

constexpr const char* kOutputSchema = "kache-explain-1";

std::string format_time(std::int64_t ns) {
  const std::time_t t = static_cast<std::time_t>(ns / 1000000000);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string short_value(const std::optional<std::string>& v, const std::string& field) {
  if (!v) return "(absent)";
  // Digests are shown short; values are shown as keyed.
  if ((field == "header" || field == "source-content" || field == "toolchain") && v->size() == 64) {
    return v->substr(0, 12);
  }
  return v->empty() ? "\"\"" : *v;
}

void say_computed_include_with(Verdict& v, bool preprocessed_fallback) {
  v.preprocessed_fallback = preprocessed_fallback;
  const std::string why = fmt::format(
      "no difference, but the entry has no direct-mode record: {} computes an #include or __has_include name "
      "(#include MACRO), which kache cannot watch",
      v.computed_include_in);
  if (preprocessed_fallback) {
    v.message = why +
                ". Such a compile is stored and looked up by its preprocessed output instead "
                "(cache.preprocessed_fallback): each lookup runs the preprocessor (for nvcc every device pass "
                "too) and hits while that output is unchanged, counted as a preprocessed hit (docs/soundness.md).";
  } else {
    v.message = why +
                ", so no lookup finds it and every build of this compile misses; cache.preprocessed_fallback = "
                "true looks it up by its preprocessed output (docs/soundness.md).";
  }
}

// Which paths an entry stored per checkout names, and what shares it (empty when nothing ties it).
std::string stored_for_note(const StoredFor& stored_for) {
  std::string roots, source, every, expanded;
  for (const auto& [what, path] : stored_for) {
    if (what == kExpandedTie) {
      expanded = path;
    } else if (what == "source") {
      source = path;
    } else if (what == "every root") {
      every = path;
    } else {
      roots += fmt::format("{}{} (the root {})", roots.empty() ? "" : ", ", path, what);
    }
  }
  std::string note;
  if (!roots.empty() && !expanded.empty()) {
    note += fmt::format(
        "stored per checkout: the compile expands a path ({}) below {}, which the object may hold as a length "
        "or a hash rather than as text (sizeof(__FILE__), source_location folded to a constant), so it is "
        "found only by builds whose roots have those paths. To share across checkout paths, map the checkout "
        "for macros too: -ffile-prefix-map=<checkout>=. (through -Xcompiler for nvcc) with [paths] base_dirs "
        "set to the checkout (docs/sharing.md, \"Portable paths\").\n",
        expanded, roots);
  } else if (!roots.empty()) {
    note += fmt::format(
        "stored per checkout: the object names {} (__FILE__, assert()), so it is found by every build whose "
        "root has that path: each build directory of this checkout, and any machine with the checkout at the "
        "same path. A checkout at another path misses; to share across checkout paths, pass the compiler's "
        "own -ffile-prefix-map=<checkout>=. (through -Xcompiler for nvcc) and set [paths] base_dirs to the "
        "checkout (docs/sharing.md, \"Portable paths\").\n",
        roots);
  }
  if (!source.empty()) {
    note += fmt::format(
        "stored per source path: the object's ids hash the source's real path {} (nvcc -rdc's module id, "
        "cudafe++'s _INTERNAL_ and anonymous-namespace _GLOBAL__N__ names), so only a compile of the file at "
        "that path finds it; no prefix map changes those ids.\n",
        source);
  }
  if (!every.empty()) {
    note += fmt::format(
        "stored for this checkout's roots ({}): a dependency lies outside every root, or the object has "
        "compressed sections no scan can read.\n",
        every);
  }
  return note;
}

int print(const Verdict& v, bool as_json) {
  if (as_json) {
    json j;
    j["schema"] = kOutputSchema;
    j["status"] = v.status;
    j["source"] = v.source;
    j["output"] = v.output;
    j["message"] = v.message;
    if (v.status == "passthrough")
      j["passthrough"] = {{"reason", v.passthrough.reason}, {"detail", v.passthrough.detail}};
    j["records"] = v.records;
    if (v.closest) {
      j["closest"] = {{"key", v.closest->key},
                      {"output", v.closest->output},
                      {"stored", format_time(v.closest->created_ns)},
                      {"toolchain", v.closest->toolchain}};
    }
    j["toolchain_now"] = v.toolchain_now;
    if (!v.stages.empty()) j["stages"] = v.stages;
    if (!v.stored_for.empty()) j["stored_for"] = stored_for_note(v.stored_for);
    if (v.status == "computed-include") j["preprocessed_fallback"] = v.preprocessed_fallback;
    j["differences"] = json::array();
    for (const auto& d : v.differences) {
      json e = {{"field", d.field}};
      if (!d.path.empty()) e["path"] = d.path;
      e["entry"] = d.was ? json(*d.was) : json(nullptr);
      e["now"] = d.now ? json(*d.now) : json(nullptr);
      j["differences"].push_back(std::move(e));
    }
    fmt::print("{}\n", j.dump(2));
    return v.status == "error" ? 1 : 0;
  }
  // Paths, values and names come from the records and the file system: no escape sequence reaches
  // the terminal.
  auto say = [](std::string_view format, const auto&... args) {
    fmt::print("{}", util::terminal_safe(fmt::format(fmt::runtime(format), args...), true));
  };
  if (!v.source.empty()) say("source   {}\n", v.source);
  if (!v.output.empty()) say("output   {}\n", v.output);
  if (v.closest) {
    say("closest  entry {} of {} recorded for this source, stored {}{}\n", v.closest->key.substr(0, 12), v.records,
        format_time(v.closest->created_ns),
        v.closest->output == v.output ? "" : " (for the output " + v.closest->output + ")");
  }
  say("{}\n", v.message);
  if (!v.stored_for.empty()) say("{}", stored_for_note(v.stored_for));
  if (!v.stages.empty()) {
    // Which of nvcc's device stages the miss reused from the cache and which it ran (nvcc.stages).
    say("stages   {}\n", fmt::join(v.stages, ", "));
  }
  std::size_t width = 12;
  for (const auto& d : v.differences)
    width = std::max(width, d.field.size() + (d.path.empty() ? 0 : d.path.size() + 1));
  for (const auto& d : v.differences) {
    const std::string label = d.path.empty() ? d.field : d.field + " " + d.path;
    say("  {:<{}}  {} -> {}\n", label, width, short_value(d.was, d.field), short_value(d.now, d.field));
    if (d.field == "toolchain" && v.closest) {
      say("  {:<{}}  entry: {}\n", "", width, v.closest->toolchain);
      say("  {:<{}}  now:   {}\n", "", width, v.toolchain_now);
    }
  }
  return v.status == "error" ? 1 : 0;
}

Verdict explain_last(const Config& cfg) {
  Verdict v;
  const std::string root = explain_root(cfg.cache_dir);
  std::string rel;
  try {
    rel = util::Beneath(cfg.cache_dir).read_regular("explain/last", nullptr, 4096).value();
  } catch (const std::exception&) {
    v.status = "no-entry";
    v.message = fmt::format("no miss has been stored in {} since kache started recording them.", cfg.cache_dir);
    return v;
  }
  auto last = read_record(cfg.cache_dir, util::join_path(root, rel));
  if (!last) {
    v.status = "no-entry";
    v.message = fmt::format("the record of the last miss ({}) is gone: it was pruned or the cache was cleared.", rel);
    return v;
  }
  v.source = last->source;
  v.output = last->output;
  v.toolchain_now = last->toolchain;
  v.stages = last->stages;
  v.stored_for = last->stored_for;
  std::vector<Record> others;
  for (auto& r : records_for(cfg.cache_dir, last->source)) {
    if (r.key != last->key) others.push_back(std::move(r));
  }
  if (others.empty() && !last->computed_include_in.empty()) {
    say_computed_include(v, last->computed_include_in);
    return v;
  }
  if (others.empty()) {
    v.status = "no-entry";
    v.message = "no other entry is recorded for this source: the last miss was its first stored compile.";
    return v;
  }
  compare(v, others, last->fields, &last->files, nullptr, last->system_headers,
          [&](const Record&) { return last->stored_for; });
  return v;
}

// With --closure: the files the compile would read now, listed by `nvcc -M` with the same flags.
std::vector<RecordedFile> closure_now(compiler::Adapter& adapter, const Invocation& inv, compiler::CompileJob job) {
  job.depfile_partial = true;  // asks the adapter for its dependency-listing command
  const std::vector<std::string> cmd = adapter.closure_command(inv, job);
  if (cmd.empty()) throw std::runtime_error("this compiler has no dependency listing");
  const auto r = util::run_capture(inv.compiler_path, cmd, inv.env);
  if (!r.ok()) throw std::runtime_error("the dependency listing failed: " + r.err.substr(0, r.err.find('\n')));
  std::vector<RecordedFile> out;
  ClosureSplit split(job.system_dirs);
  const std::string cwd = util::lexically_normal(inv.cwd);
  for (const auto& dep : parse_depfile(r.out, true).deps) {
    const std::string path = util::join_path(cwd, dep);
    std::string digest;
    try {
      digest = util::hash_file(path).hex();
    } catch (const std::exception&) {
      digest = "unreadable";
    }
    RecordedFile f{job.roots.key_form(path), path, digest};
    if (!split.add(f)) out.push_back(std::move(f));
  }
  return out;
}

// The verdict on a compile kache would cache: its key fields against the records of its source.
void explain_job(Verdict& v, const Config& cfg, compiler::Adapter& adapter, const Invocation& inv,
                 const compiler::CompileJob& job, bool closure) {
  v.source = job.source;
  v.output = job.output;
  v.toolchain_now = job.description;
  Fields fields = recorded_fields(job.key_fields);  // as the records hold them: defines without values
  try {
    fields.emplace_back("source-content", util::hash_file(job.source).hex());
  } catch (const std::exception&) {
    fields.emplace_back("source-content", "unreadable");
  }
  const auto records = records_for(cfg.cache_dir, job.source);
  if (records.empty()) {
    v.status = "no-entry";
    v.message = fmt::format(
        "no entry is recorded for this source in {}: it was never stored from this "
        "path (or its records were pruned), so the compile misses.",
        cfg.cache_dir);
    return;
  }
  std::map<std::string, std::optional<std::string>> digests;  // one hash per file however many records
  auto digest_now = [&](const RecordedFile& f) -> std::pair<std::string, std::optional<std::string>> {
    const std::string path = path_now(job.roots, f.key_path);
    auto it = digests.find(path);
    if (it != digests.end()) return {path, it->second};
    std::optional<std::string> d;
    try {
      d = util::hash_file(path).hex();
    } catch (const std::exception&) {
    }
    digests.emplace(path, d);
    return {path, d};
  };
  std::vector<RecordedFile> listed;
  if (closure) listed = closure_now(adapter, inv, job);
  // nvcc -M lists a slightly different set of toolkit headers than the compile's own -MD (186 and
  // 188 files for a small kernel, CUDA 13.0): the two digests are not comparable, so the
  // toolchain's headers are compared by --last only.
  compare(v, records, fields, closure ? &listed : nullptr, digest_now, "",
          [&](const Record& r) { return stored_for_here(r.stored_for, job); });
}

Verdict explain_command(const Config& cfg, const std::vector<std::string>& command, bool closure) {
  Verdict v;
  Invocation inv;
  inv.compiler_arg = command[0];
  inv.args.assign(command.begin() + 1, command.end());
  inv.env = util::current_environment();
  inv.cwd = util::current_dir();
  auto resolved =
      util::find_executable(inv.compiler_arg, util::env_get(inv.env, "PATH").value_or(""), util::self_executable());
  if (!resolved) {
    v.status = "error";
    v.message = fmt::format("cannot find the compiler '{}' on PATH.", inv.compiler_arg);
    return v;
  }
  inv.compiler_path = *resolved;
  if (cfg.disable) {
    v.status = "passthrough";
    v.passthrough = {"disabled", cfg.origins.count("cache.disable") && cfg.origins.at("cache.disable") == "env"
                                     ? "KACHE_DISABLE is set"
                                     : "cache.disable is set in " + cfg.config_file};
  }
  auto adapter = compiler::find_adapter(inv.compiler_arg, inv.args);
  if (v.status.empty() && !adapter) {
    v.status = "passthrough";
    v.passthrough = {"unsupported-compiler", inv.compiler_arg};
  }
  if (v.status.empty()) {
    auto prepared = adapter->prepare(inv, cfg);
    if (auto* job = std::get_if<compiler::CompileJob>(&prepared)) {
      explain_job(v, cfg, *adapter, inv, *job, closure);
      return v;
    }
    v.status = "passthrough";
    v.passthrough = std::get<compiler::Passthrough>(prepared);
  }
  v.message = fmt::format("passthrough ({}){}{}: kache runs the compiler unchanged and stores nothing.",
                          v.passthrough.reason, v.passthrough.detail.empty() ? "" : ": ", v.passthrough.detail);
  return v;
}

// The two forms of the command line and what the command does; the options follow from the table.
constexpr const char* kForms = R"(usage: kache explain [--json] -- nvcc ARGS...   why this compile would miss
       kache explain [--json] --last              why the last stored miss in this cache missed
Compares the compile's key fields (flags, keyed environment variables, toolchain, source and header
digests) with the entries recorded for the same source, and prints what differs from the closest one.
It runs no compile (without --closure): only the toolchain probe every lookup makes (memoized).
)";

std::string usage() { return std::string(kForms) + options_help("explain"); }

// What `kache explain`'s arguments ask for.
struct ExplainRequest {
  bool as_json = false, last = false, closure = false;
  std::vector<std::string> command;  // what follows --
};

// The request, or the exit status when the arguments are answered here (--help, a mistake).
std::variant<ExplainRequest, int> parse_explain_args(const std::vector<std::string>& args) {
  ExplainRequest r;
  const std::string_view rest_marker = find_row("explain", "--").spellings;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == rest_marker) {
      r.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    const auto option = match_option("explain", args, i);
    if (!option) {
      fmt::print(stderr, "kache explain: unknown argument '{}'.\n{}", args[i], usage());
      return 1;
    }
    if (option->is("--help")) {
      fmt::print("{}", usage());
      return 0;
    }
    r.as_json |= option->is("--json");
    r.last |= option->is("--last");
    r.closure |= option->is("--closure");
  }
  if (r.last == !r.command.empty()) {
    fmt::print(stderr, "kache explain: give either --last or -- followed by the compile command.\n{}", usage());
    return 1;
  }
  return r;
}

}  // namespace

int run(const std::vector<std::string>& args) {
  const auto parsed = parse_explain_args(args);
  if (const int* status = std::get_if<int>(&parsed)) return *status;
  const auto& [as_json, last, closure, command] = std::get<ExplainRequest>(parsed);
  const Config cfg = load_config(storage::remote_url_schemes());
  for (const auto& problem : cfg.problems) fmt::print(stderr, "{}\n", problem);
  Verdict v;
  try {
    v = last ? explain_last(cfg) : explain_command(cfg, command, closure);
    if (v.status == "computed-include") say_computed_include_with(v, cfg.preprocessed_fallback);
  } catch (const std::exception& e) {
    v.status = "error";
    v.message = fmt::format("cannot compute the key: {}.", e.what());
  }
  return print(v, as_json);
}

}  // namespace kache::commands::explain
