#include "engine/remote_exec.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <set>
#include <variant>
#include <fmt/format.h>

#include "core/log.hpp"
#include "core/stats.hpp"
#include "remote_exec/wire.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"
#include "util/text.hpp"

namespace kache::engine {

reapi::ServerSettings remote_execution_settings(const core::Config& config) {
  reapi::ServerSettings s;
  s.url = config.remote_execution_server;
  s.instance = config.remote_execution_instance;
  s.ca_file = config.remote_execution_ca_file;
  s.timeout_s = config.remote_execution_timeout_s;
  s.trusted = config.remote_execution_trusted;
  if (const char* token = std::getenv("KACHE_REMOTE_EXECUTION_BEARER_TOKEN")) s.bearer_token = token;
  return s;
}

namespace {

// An absolute path as a path of the input root, which mirrors this machine's tree ("/a/b" -> "a/b").
std::string root_path(const std::string& abs) { return abs.substr(1); }

// How the command names a directory from its working directory, on the worker ("../.kache-x").
std::string relative_spelling(const std::string& dir, const std::string& cwd) {
  return std::filesystem::path(dir).lexically_relative(cwd).string();
}

// The directories of the command's temporaries, each with its spelling on the worker.
std::vector<std::pair<std::string, std::string>> moved_dirs(const compiler::RemoteCommand& cmd) {
  std::vector<std::pair<std::string, std::string>> dirs;
  auto add = [&](const std::string& path) {
    const std::string dir = util::dirname(path);
    for (const auto& d : dirs) {
      if (d.first == dir) return;
    }
    dirs.emplace_back(dir, relative_spelling(dir, cmd.cwd));
  };
  for (const auto& p : cmd.inputs) add(p);
  for (const auto& p : cmd.outputs) add(p);
  // Longest first, so that no directory is replaced inside a longer one.
  std::sort(dirs.begin(), dirs.end(), [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  return dirs;
}

// What every action carries besides its arguments: the command's environment, working directory and
// outputs, the files that go up (by content, at their paths), the platform that pins the worker.
void complete_action(reapi::ActionSpec& spec, const compiler::RemoteCommand& cmd, const std::vector<std::string>& inputs) {
  for (const std::string& entry : cmd.env) {
    const std::size_t eq = entry.find('=');
    if (eq != std::string::npos) spec.environment.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
  }
  spec.working_directory = root_path(cmd.cwd);
  for (const auto& out : cmd.outputs) spec.output_files.push_back(relative_spelling(out, cmd.cwd));
  for (const auto& in : inputs) spec.inputs.push_back({root_path(in), util::read_file(in), false});
  spec.platform = cmd.platform;
  spec.platform.emplace_back("OSFamily", "Linux");
}

std::optional<reapi::ActionSpec> action_of(const compiler::RemoteCommand& cmd,
                                           const std::vector<std::pair<std::string, std::string>>& dirs) {
  reapi::ActionSpec spec;
  for (const auto& [dir, spelled] : dirs) {
    // A temporary in the working directory itself would be spelled "." in every output: not told apart.
    if (spelled.empty() || spelled == "." || !dir.starts_with('/')) return std::nullopt;
  }
  for (std::string arg : cmd.argv) {
    for (const auto& [dir, spelled] : dirs) util::replace_all(arg, dir + "/", spelled + "/");
    spec.arguments.push_back(std::move(arg));
  }
  complete_action(spec, cmd, cmd.inputs);
  return spec;
}

// Text the worker wrote with its spelling of the temporaries' directories, in this machine's spelling;
// false when the bytes are not text (a binary naming a path cannot be respelled in place).
bool respell(std::string& bytes, const std::vector<std::pair<std::string, std::string>>& dirs) {
  bool named = false;
  for (const auto& [dir, spelled] : dirs) named |= bytes.find(spelled + "/") != std::string::npos;
  if (!named) return true;
  if (bytes.find('\0') != std::string::npos) return false;
  for (const auto& [dir, spelled] : dirs) util::replace_all(bytes, spelled + "/", dir + "/");
  return true;
}

}  // namespace

RemoteStages::RemoteStages(const core::Config& config) {
  if (config.remote_execution_server.empty()) return;
  client_ = reapi::open_client(remote_execution_settings(config));
  enabled_ = true;
  trusted_ = config.remote_execution_trusted;
}

std::optional<util::ProcessResult> RemoteStages::fallback(const std::string& reason, const std::string& detail,
                                                          std::map<std::string, std::uint64_t>& counts,
                                                          std::mutex& counts_mutex) {
  core::log().info("remote execution: runs here ({}): {}", reason, detail);
  std::lock_guard lock(counts_mutex);
  counts[core::counter::kRemoteFallbackPrefix + reason]++;
  return std::nullopt;
}

std::optional<util::ProcessResult> RemoteStages::run(const compiler::RemoteCommand& cmd,
                                                     std::map<std::string, std::uint64_t>& counts,
                                                     std::mutex& counts_mutex) {
  {
    std::lock_guard lock(mu_);
    if (unreachable_) return fallback("unreachable", "the server did not answer earlier in this compile", counts,
                                      counts_mutex);
  }
  const auto dirs = moved_dirs(cmd);
  std::optional<reapi::ActionSpec> spec;
  try {
    spec = action_of(cmd, dirs);
  } catch (const std::exception& e) {
    return fallback("inputs", e.what(), counts, counts_mutex);
  }
  if (!spec) return fallback("paths", "a temporary lies in the working directory", counts, counts_mutex);
  return execute(*spec, dirs, cmd, counts, counts_mutex);
}

std::optional<util::ProcessResult> RemoteStages::execute(const reapi::ActionSpec& spec,
                                                         const std::vector<std::pair<std::string, std::string>>& dirs,
                                                         const compiler::RemoteCommand& cmd,
                                                         std::map<std::string, std::uint64_t>& counts,
                                                         std::mutex& counts_mutex) {
  auto done = client_->execute(spec);
  if (auto* f = std::get_if<reapi::Failure>(&done)) {
    if (f->reason == "unreachable") {
      std::lock_guard lock(mu_);
      unreachable_ = true;
    }
    return fallback(f->reason, f->detail, counts, counts_mutex);
  }
  auto& outcome = std::get<reapi::ActionOutcome>(done);
  util::ProcessResult r{outcome.exit_code, 0, std::move(outcome.out), std::move(outcome.err)};
  if (!respell(r.out, dirs) || !respell(r.err, dirs)) return fallback("output-paths", cmd.what, counts, counts_mutex);
  for (auto& file : outcome.outputs) {
    const std::string local = util::lexically_normal(util::join_path(cmd.cwd, file.path));
    if (std::find(cmd.outputs.begin(), cmd.outputs.end(), local) == cmd.outputs.end()) {
      return fallback("outputs", file.path + " was not asked for", counts, counts_mutex);
    }
    if (!respell(file.bytes, dirs)) return fallback("output-paths", file.path, counts, counts_mutex);
    util::write_file(local, file.bytes);
  }
  ran_remotely_ = true;
  std::lock_guard lock(counts_mutex);
  counts[core::counter::kRemoteRanPrefix + cmd.what.substr(0, cmd.what.find(' '))]++;
  core::log().debug("remote execution: {} ran on {}{}", cmd.what, outcome.worker, outcome.cached ? " (cached)" : "");
  return r;
}

namespace {

bool below(const std::string& path, const std::string& dir) {
  return path.size() > dir.size() && path.starts_with(dir) && (dir.ends_with('/') || path[dir.size()] == '/');
}

// The action of a whole gcc/clang compile, or why it cannot go: {reason, detail}. The files the compile
// reads that are not the worker's (below /usr or a system include directory) go up by content at their
// paths; the scratch directory (the outputs) is spelled from the working directory. An argument naming an
// uploaded file's directory absolutely would reach another directory on the worker: that compile runs here.
std::variant<std::pair<std::string, std::string>, reapi::ActionSpec> compile_action_of(
    const RemoteCompile& c, std::vector<std::string>& uploads, std::vector<std::pair<std::string, std::string>>& dirs) {
  const compiler::RemoteCommand& cmd = c.cmd;
  // Debug info's DW_AT_comp_dir, coverage notes: on the worker that is another directory.
  if (c.facts.names_working_directory()) {
    return std::pair{"directory", "the object would name the working directory"};
  }
  const std::string spelled = relative_spelling(c.scratch_dir, cmd.cwd);
  if (spelled.empty() || spelled == "." || !c.scratch_dir.starts_with('/')) return std::pair{"paths", c.scratch_dir};
  dirs = {{c.scratch_dir, spelled}};
  std::set<std::string> ancestors;
  for (const std::string& file : c.closure) {
    const std::string path = util::lexically_normal(file);
    const bool workers = below(path, "/usr") || std::any_of(c.system_dirs.begin(), c.system_dirs.end(), [&](const auto& d) {
                           return below(path, util::lexically_normal(d));
                         });
    if (workers || std::find(uploads.begin(), uploads.end(), path) != uploads.end()) continue;
    uploads.push_back(path);
    for (std::string d = util::dirname(path); d.size() > 1; d = util::dirname(d)) ancestors.insert(d);
  }
  reapi::ActionSpec spec;
  for (std::size_t i = 0; i < cmd.argv.size(); ++i) {
    std::string arg = cmd.argv[i];
    // A prefix map only rewrites the paths the compiler writes: without debug info (checked above) those
    // are __FILE__'s, spelled as the compile found the file, relative for every uploaded file (no other
    // argument names one absolutely) and absolute for the worker's own, the same there as here.
    const bool scratch = arg.find(c.scratch_dir + "/") != std::string::npos || compiler::is_prefix_map(arg);
    util::replace_all(arg, c.scratch_dir + "/", spelled + "/");
    for (const auto& a : ancestors) {
      if (i > 0 && !scratch && arg.find(a) != std::string::npos) return std::pair{"paths", "the command names " + a};
    }
    spec.arguments.push_back(std::move(arg));
  }
  complete_action(spec, cmd, uploads);
  return spec;
}

}  // namespace

std::optional<util::ProcessResult> RemoteStages::run_compile(const RemoteCompile& compile,
                                                             std::map<std::string, std::uint64_t>& counts,
                                                             std::mutex& counts_mutex) {
  std::vector<std::string> uploads;
  std::vector<std::pair<std::string, std::string>> dirs;
  std::variant<std::pair<std::string, std::string>, reapi::ActionSpec> built;
  try {
    built = compile_action_of(compile, uploads, dirs);
  } catch (const std::exception& e) {
    return fallback("inputs", e.what(), counts, counts_mutex);
  }
  if (auto* why = std::get_if<std::pair<std::string, std::string>>(&built)) {
    return fallback(why->first, why->second, counts, counts_mutex);
  }
  compiler::RemoteCommand cmd = compile.cmd;
  cmd.inputs = std::move(uploads);
  return execute(std::get<reapi::ActionSpec>(built), dirs, cmd, counts, counts_mutex);
}

}  // namespace kache::engine
