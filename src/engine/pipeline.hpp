#pragma once
#include "core/config.hpp"
#include "core/invocation.hpp"

namespace kache::engine {
// app/ speaks core's vocabulary (Config, Invocation, reasons, entries...) unqualified.
using namespace kache::core;

// Runs one compiler invocation through the cache: parse → plan → key → look up → restore | run →
// verify → store. Returns the exit code the user sees. Whatever fails inside kache, the compiler runs.
int run_compiler(const Invocation& inv, const Config& cfg);

}  // namespace kache::engine
