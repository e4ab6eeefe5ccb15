// The preprocessed-mode fallback (issue 39). A compile whose closure direct mode cannot record (a
// computed #include or __has_include name, a directive spelling the scan does not read: core/watch.hpp)
// gets no direct-mode record. Such a miss is stored under a result key made from the direct key and the
// outputs of the compile's own preprocessing (gcc/clang -E; nvcc's host pass and every device pass, as
// its dry run lists them), and a preprocessed entry in the manifest says so; each next lookup of the same
// direct key, finding no direct entry that holds, runs that preprocessing and looks for its key. Line
// markers are keyed by the path roots' names (core/preprocessed.hpp), so the entry is shared wherever a
// direct entry would be, and restored through the same restore() (this checkout's paths written in).

#include <cstddef>
#include <exception>
#include <string>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include <fmt/format.h>

#include "engine/pipeline_steps.hpp"
#include "core/log.hpp"
#include "core/preprocessed.hpp"
#include "util/fs.hpp"
#include "util/hash.hpp"
#include "util/parallel.hpp"
#include "util/process.hpp"

namespace kache::engine::pipeline_steps {
using namespace kache::core;

namespace {

// Runs every command at once (nvcc's passes are independent); a command that cannot start fails.
std::vector<util::ProcessResult> run_all(const std::vector<compiler::PreprocessCommand>& cmds) {
  std::vector<util::ProcessResult> results(cmds.size());
  util::for_each_slice(cmds.size(), cmds.size(), [&](std::size_t, std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      try {
        results[i] = util::run_capture(cmds[i].program, cmds[i].argv, cmds[i].env);
      } catch (const std::exception& e) {
        results[i] = util::ProcessResult{127, 0, {}, e.what()};
      }
    }
  });
  return results;
}

}  // namespace

// The compile's preprocessing, run as its miss would run (the miss's environment: nvcc's pinned
// SOURCE_DATE_EPOCH), and the result key of its outputs: the direct key (toolchain, flags, keyed
// environment, source), then per pass its name, its output with the line markers' paths keyed by the
// roots' names, and its diagnostics (a #warning is no part of the output) with the roots as
// placeholders. An error says why there is none.
util::Result<Pipeline::Preprocessed, std::string> Pipeline::preprocess() {
  util::Environment env = inv_.env;
  adapter_.miss_environment(env, cfg_);
  auto listed = adapter_.fallback_preprocessing(inv_, job_, env);
  if (const auto* why = std::get_if<std::string>(&listed)) return "no preprocessing commands: " + *why;
  const auto& cmds = std::get<std::vector<compiler::PreprocessCommand>>(listed);
  const std::vector<util::ProcessResult> results = run_all(cmds);
  const std::string cwd = util::lexically_normal(inv_.cwd);
  util::Hasher h;
  h.add_field("kache-key", "preprocessed-v1");
  h.add_field("direct", direct_.hex());
  Preprocessed p;
  std::unordered_set<std::string> seen;
  for (std::size_t i = 0; i < cmds.size(); ++i) {
    const util::ProcessResult& r = results[i];
    if (!r.ok())
      return fmt::format("the {} preprocessing failed (exit {}, signal {})", cmds[i].pass, r.exit_code, r.term_signal);
    // GCC reads a precompiled header there: not what the output shows (see GccAdapter).
    if (r.out.find("#pragma GCC pch_preprocess") != std::string::npos)
      return std::string("a precompiled header is read");
    const auto files = line_marker_files(r.out);
    if (!files) return std::string("a line marker names a file with an escaped character");
    for (const auto& f : *files) {
      std::string path = util::lexically_normal(util::join_path(cwd, f));
      if (seen.insert(path).second) p.files.push_back(std::move(path));
    }
    h.add_field("pass", cmds[i].pass);
    h.add_field("output", util::sha256(keyed_line_markers(r.out, job_.roots)).hex());
    h.add_field("diagnostics", util::sha256(job_.roots.templatize_text(r.err)).hex());
    core::log().trace("preprocessed pass {}: {} bytes", cmds[i].pass, r.out.size());
  }
  p.key = h.finish();
  core::log().debug("preprocessed key {} ({} passes)", p.key.hex().substr(0, 16), cmds.size());
  return p;
}

// A miss's preprocessed entry. Run after the compile (or by the lookup, before the compile's start), the
// preprocessing must have seen what the compile read: the files its line markers name are exactly the closure (a header
// that appeared since, shadowing one the compile read, is named by the markers and not by the closure; a file the
// closure names that no marker names, an assembler's .incbin or an -imacros file, is content the output does not hold),
// and every closure file still has the identity it had when hashed, unmodified since before the compile (a file edited
// or removed since would give the entry a key of content it was not built from).
bool Pipeline::record_preprocessed(ManifestEntry& entry, const std::vector<std::string>& closure) {
  auto& log = core::log();
  // The lookup's, when it ran one: the compile's start was moved before it (Pipeline::compile).
  auto preprocessed = preprocessed_ ? util::Result<Preprocessed, std::string>(*preprocessed_) : preprocess();
  if (!preprocessed) {
    log.debug("no preprocessed entry: {}", preprocessed.error());
    return false;
  }
  std::unordered_set<std::string> read;
  for (const auto& c : closure) read.insert(util::lexically_normal(c));
  const std::unordered_set<std::string> named(preprocessed->files.begin(), preprocessed->files.end());
  if (read != named) {
    for (const auto& n : named) {
      if (!read.count(n)) log.debug("no preprocessed entry: {} is preprocessed but was not compiled", n);
    }
    for (const auto& c : read) {
      if (!named.count(c)) log.debug("no preprocessed entry: {} was compiled but is not preprocessed", c);
    }
    return false;
  }
  for (const auto& f : entry.files) {
    const std::string path = job_.roots.join(f.path);
    const auto id = util::stat_identity(path);
    if (!id || !(*id == f.identity)) {
      log.debug("no preprocessed entry: {} changed since the compile", path);
      return false;
    }
  }
  entry.result_key = preprocessed->key;
  entry.preprocessed = true;
  return true;
}

}  // namespace kache::engine::pipeline_steps
