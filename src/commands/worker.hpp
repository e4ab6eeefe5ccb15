#pragma once
// `kache worker` and kache doctor's rows for remote execution (docs/remote-execution.md).
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/doctor_rows.hpp"

namespace kache::commands {

// kache doctor's remote execution facts, rows of its "remote_execution" section: the server answers, its
// capabilities, a worker of this nvcc's toolchain runs a probe action (within 30 s).
std::vector<core::DoctorRow> check_remote_execution(const core::Config& config, const std::string& nvcc_path);

// `kache --version`'s line on remote execution, ending in '\n': whether kache-reapi is beside this kache (a
// build without gRPC, as scripts/setup.sh makes, has none, and every miss runs here).
std::string remote_execution_feature();

// `kache worker [options]`: serves a Remote Execution server's actions (remote_exec/grpc/worker.hpp).
int run_worker_command(const std::vector<std::string>& args);

}  // namespace kache::commands
