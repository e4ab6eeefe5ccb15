#pragma once
// Remote execution (docs/remote-execution.md) as the pipeline and the commands use it: the configured
// server's settings, a stage run by a remote worker with its outputs written here (or why it runs here
// instead). `kache worker` and doctor's rows: commands/worker.hpp.
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "compiler/argument_facts.hpp"
#include "compiler/stage_store.hpp"
#include "core/config.hpp"
#include "remote_exec/client.hpp"

namespace kache::engine {

namespace reapi = kache::remote_exec;

// The server, instance, CA file and timeout of `config`; the bearer token from
// KACHE_REMOTE_EXECUTION_BEARER_TOKEN (never from a file, never printed).
remote_exec::ServerSettings remote_execution_settings(const core::Config& config);

// A gcc/clang compile to run whole on a worker (docs/remote-execution.md): the command as it runs here,
// the files it reads (every file -M lists, absolute) and the directories whose files the worker has.
struct RemoteCompile {
  compiler::RemoteCommand cmd;           // argv, env, cwd, outputs (in scratch_dir), platform; inputs unset
  std::string scratch_dir;               // where the outputs go: spelled from cwd on the worker
  std::vector<std::string> closure;      // every file the compile reads
  std::vector<std::string> system_dirs;  // the toolchain's include directories (the worker's, as /usr is)
  compiler::ArgumentFacts facts;         // the job's: whether the object names the working directory
};

// Runs stages remotely for one compile. Thread-safe: a miss sends every cicc and ptxas at once.
class RemoteStages {
 public:
  explicit RemoteStages(const core::Config& config);
  bool enabled() const { return enabled_; }
  // Whether what this compile stores may go to the shared stores: always with remote_execution.trusted;
  // otherwise only while no action ran remotely (the service chose those outputs, and a signed shared
  // store would vouch for them to every other machine).
  bool publishable() const { return trusted_ || !ran_remotely_; }
  // The command's result with its outputs written at their paths here, or nullopt (counted in counts as
  // remote_fallback.<reason>): the caller runs it here. After the server is found unreachable, every
  // later stage of the compile runs here at once.
  std::optional<util::ProcessResult> run(const compiler::RemoteCommand& cmd, std::map<std::string, std::uint64_t>& counts,
                                         std::mutex& counts_mutex);
  // Counts why a command meant for a worker runs here (remote_fallback.<reason>); always nullopt.
  std::optional<util::ProcessResult> runs_here(const std::string& reason, const std::string& detail,
                                            std::map<std::string, std::uint64_t>& counts, std::mutex& counts_mutex) {
    return fallback(reason, detail, counts, counts_mutex);
  }
  // The same for a whole gcc/clang compile (counted as remote_ran.compile); nullopt when it did not run
  // there, counted as remote_fallback.<reason>.
  std::optional<util::ProcessResult> run_compile(const RemoteCompile& compile,
                                                 std::map<std::string, std::uint64_t>& counts, std::mutex& counts_mutex);

 private:
  std::optional<util::ProcessResult> execute(const reapi::ActionSpec& spec,
                                             const std::vector<std::pair<std::string, std::string>>& dirs,
                                             const compiler::RemoteCommand& cmd,
                                             std::map<std::string, std::uint64_t>& counts, std::mutex& counts_mutex);
  std::optional<util::ProcessResult> fallback(const std::string& reason, const std::string& detail,
                                              std::map<std::string, std::uint64_t>& counts, std::mutex& counts_mutex);
  bool enabled_ = false;
  bool trusted_ = false;
  std::atomic<bool> ran_remotely_ = false;
  std::unique_ptr<remote_exec::Client> client_;
  std::mutex mu_;
  bool unreachable_ = false;
};

}  // namespace kache::engine
