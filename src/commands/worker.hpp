#pragma once
// `kache worker` and kache doctor's rows for remote execution (docs/remote-execution.md).
#include <string>
#include <vector>

#include "core/config.hpp"

namespace kache::commands {

// kache doctor's remote execution facts: the server answers, its capabilities, a worker of this nvcc's
// toolchain runs a probe action (within 30 s). One line each; level 0 ok, 1 warn, 2 fail.
struct RemoteCheck {
  std::string name, value, message, fix;
  int level = 0;
};
std::vector<RemoteCheck> check_remote_execution(const core::Config& config, const std::string& nvcc_path);

// `kache worker [options]`: serves a Remote Execution server's actions (remote_exec/grpc/worker.hpp).
int run_worker_command(const std::vector<std::string>& args);

}  // namespace kache::commands
