#pragma once
// Where a compiler's intermediate stages are kept between misses (nvcc's cicc and ptxas, one per
// architecture): the pipeline's stores behind a narrow seam, so that adapters never see storage.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/process.hpp"

namespace kache::compiler {

// A stage to run on another machine (remote execution, docs/remote-execution.md): the command as it runs
// here, the files it reads that the other machine lacks and the files it writes (absolute paths here).
// The programs and the toolkit's own files are the other machine's: the toolchain id pins them.
struct RemoteCommand {
  std::vector<std::string> argv;  // argv[0] the program, an absolute path
  util::Environment env;          // only what the tools read (env_table's rows, nvcc's variables)
  std::string cwd;                // absolute
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::string what;               // "ptx compute_80", for the log and explain
  std::vector<std::pair<std::string, std::string>> platform;  // what pins the worker ("kache-toolchain")
};

// Every method may be called from several threads at once (stages run remotely in parallel).
class StageStore {
 public:
  virtual ~StageStore() = default;
  // The value stored under key; nullopt when there is none or it cannot be read (a stage miss).
  virtual std::optional<std::string> load(std::string_view key) = 0;
  // Stores value under key (local store, then the remotes); a failure costs only the store.
  virtual void save(std::string_view key, std::string_view value) = 0;
  // Adds n to a statistics counter ("stage_hits.ptx").
  virtual void count(const std::string& counter, std::uint64_t n = 1) = 0;
  // One line for `kache explain --last`: a stage reused or run.
  virtual void note(std::string line) = 0;
  // Whether stages may run remotely at all (remote_execution.server is set).
  virtual bool remote_enabled() const { return false; }
  // Runs the command remotely, its outputs written at their paths here; nullopt: it did not run there
  // (no server, an error, a timeout, a worker with another toolchain), counted with the reason, and the
  // caller runs it here. Called from several threads at once.
  virtual std::optional<util::ProcessResult> run_remote(const RemoteCommand&) { return std::nullopt; }
};

}  // namespace kache::compiler
