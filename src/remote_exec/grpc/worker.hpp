#pragma once
// `kache worker`: a Remote Workers API (bots) worker for any REAPI server that hands work to bots
// (BuildGrid's Bots service). It runs each leased action's command in a private directory built from the
// action's input root (posix_spawn, no shell; the environment exactly the command's), and uploads the
// outputs. The programs an action runs (nvcc's cicc and ptxas, a host compiler) and the system headers are
// the worker's own: the worker advertises its toolchain id as a platform property, the server matches
// actions to it, and an action that pins another toolchain is refused (FAILED_PRECONDITION), so the client
// falls back to running it locally.
#include "remote_exec/client.hpp"

namespace kache::remote_exec {

// Serves leases until max_actions have run (or forever); returns the process's exit status. Each action
// run is logged as one line on stdout: "kache-worker: ran <program name> exit <code> action <hash>/<size>"
// (tests count them).
int run_worker(const WorkerSettings& settings);

}  // namespace kache::remote_exec
