#pragma once
// `kache explain`: which key field made a compile miss, as the engine's records say
// (engine/explain_record.hpp: what a storing miss records and how a compile is compared with it).
//
// `kache explain -- nvcc ARGS...` computes the same fields for a command as a lookup would (planning
// and the memoized toolchain probe; no compile) and compares them with the records of the same
// source, field by field, against the closest one. `kache explain --last` does the same for the last
// stored miss against the other records of its source.
#include <string>
#include <vector>

namespace kache::commands::explain {

// The `kache explain` command; args are the words after "explain". Returns the exit status.
int run(const std::vector<std::string>& args);

}  // namespace kache::commands::explain
