#pragma once
// A miss run stage by stage (issue 24): nvcc's own trajectory, as its dry run lists it, replayed
// without a shell, with cicc (preprocessed source -> PTX) and ptxas (PTX -> cubin) served from the
// stage store when the content of their input, their arguments and the toolchain are the same.
// Everything else (preprocessing, cudafe++, fatbinary, the host compile) runs as nvcc runs it, so an
// architecture already built, or device code a host-only edit left alike, costs no cicc or ptxas run.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "compiler/adapter.hpp"
#include "compiler/stage_store.hpp"
#include "util/process.hpp"

namespace kache::compiler::nvcc {

// One command of the trajectory.
struct Stage {
  enum class Kind { run, cicc, ptxas, filter_dependencies, remove };
  Kind kind = Kind::run;
  std::vector<std::string> words;  // the command, variables expanded, quotes removed (run/cicc/ptxas/remove)
  std::string path;                // filter_dependencies: the dependency file nvcc writes
};

struct StagePlan {
  std::vector<std::pair<std::string, std::string>> variables;  // "#$ NAME=value", in nvcc's order
  std::vector<Stage> stages;
};

// A "#$ NAME=value" line of a dry run (the text after "#$ "): nvcc.profile's variables as nvcc expanded
// them, the value as printed. nullopt for a command.
std::optional<std::pair<std::string, std::string>> dry_run_variable(std::string_view body);

// Why a trajectory runs whole (a stable name, counted as stages_whole.<why>), or its plan. `env` is the
// environment nvcc runs in: an unquoted or quoted $NAME takes the dry run's variable, else env's.
std::variant<std::string, StagePlan> parse_dry_run(const std::string& text, const util::Environment& env);

// The dependency file nvcc writes from its preprocessed files (the "-- Filter Dependencies --" step):
// `target : ` and every file their line markers name, in order of first appearance, one per line; with
// without_system_headers (-MMD), none that a marker flags as a system header. nullopt when a name holds
// a character whose spelling nvcc's rule is not known for.
std::optional<std::string> filter_dependencies(const std::string& target, const std::vector<std::string>& preprocessed,
                                               bool without_system_headers = false);

// The preprocessing commands of nvcc's trajectory for argv (the host pass and one -D__CUDA_ARCH__ pass
// per architecture), as its dry run in env lists them, each printing its output (its -o dropped), its
// program resolved along the dry run's PATH and nvcc's variables in its environment. The passes are what
// nvcc compiles (cudafe++ and the host compile read the host pass's output, cicc each device pass's),
// so their outputs together describe every architecture's code (issue 39), where `nvcc -E` alone shows
// one device pass. A string says why there are none (a dry run the replay cannot read).
std::variant<std::string, std::vector<PreprocessCommand>> preprocessing_passes(const std::string& nvcc_path,
                                                                               const std::vector<std::string>& argv,
                                                                               const util::Environment& env,
                                                                               const std::string& cwd);

struct StageRun {
  std::string nvcc_path;                // the nvcc to ask for the dry run
  std::vector<std::string> argv;        // the miss's command (argv[0] the compiler as written)
  util::Environment env;                // the miss's environment
  std::string cwd;                      // absolute
  std::string scratch_dir;              // absolute: where every temporary of the trajectory lies
  std::string depfile_target;           // the rule's target in the dependency file nvcc writes
  bool depfile_without_system_headers = false;  // -MMD
  // What each stage key holds beyond the stage's own command and inputs: the toolchain id and the
  // environment the tools read (env_table's nvcc rows).
  std::vector<std::pair<std::string, std::string>> key_fields;
};

// Runs the trajectory. The result is what nvcc would give (exit 0, the tools' stdout and stderr in
// order); a string says why it ran nothing that counts and the miss must run nvcc whole (a stage
// failed, the dry run holds what the replay does not model).
std::variant<std::string, util::ProcessResult> run_stages(const StageRun& run, StageStore& store);

}  // namespace kache::compiler::nvcc
