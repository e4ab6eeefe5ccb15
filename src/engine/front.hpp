#pragma once
// The front of a compile: from the words kache was started with to the Invocation the pipeline runs
// (which compiler, its arguments, environment and directory), with the configuration and the log set up.
#include <string>

namespace kache::engine {

// Whether argv[0] names kache itself (`kache nvcc ...`) rather than a link named like the compiler.
bool named_kache(const std::string& argv0);
// Runs the compile argv describes (argv[0] is kache or a link named like the compiler); returns the exit
// code the user sees. Whatever kache cannot do, the compiler runs unchanged.
int run_front(int argc, char** argv);

}  // namespace kache::engine
