#pragma once
// Rules every adapter applies the same way (nvcc's and gcc/clang's), kept in one place.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/adapter.hpp"
#include "compiler/argument_facts.hpp"
#include "core/config.hpp"
#include "util/process.hpp"

namespace kache::compiler {

// A planner's refusals, so the reason is chosen deterministically whatever the argument order: the
// first one that says what the whole invocation is (a phase reason: link, -E, a response file...)
// wins over the first refused flag elsewhere on the line.
struct Refusals {
  bool (*is_phase_reason)(std::string_view reason);
  std::optional<Passthrough> phase, flag;  // the first of each kind

  void add(std::string_view reason, std::string detail) {
    auto& slot = is_phase_reason(reason) ? phase : flag;
    if (!slot) slot = Passthrough{std::string(reason), std::move(detail)};
  }
};

// The allow-list ([cc] extra_allowlist_flags) names arg: the flag itself, or the flag followed by "=value".
bool allowlist_names(const std::vector<std::string>& allowlist, std::string_view arg);

// An nvcc (and hipcc) miss runs with SOURCE_DATE_EPOCH pinned (nvcc.source_date_epoch, "0" by default),
// so __DATE__ and __TIME__ give identical rebuilds. A build's own value wins; the value is deliberately
// not keyed (spec 000): a hit keeps the date it was built with. gcc and clang misses are not pinned
// (gcc/adapter.cpp: a plain build's date, the build's own value keyed).
void pin_source_date_epoch(util::Environment& env, const core::Config& cfg);

// kache reads the compiler's stderr through a pipe, where GCC and clang do not colour (their default is
// -fdiagnostics-color=auto: colour when stderr is a terminal). When kache's own stderr is a terminal and
// the plain compiler would colour there, a miss asks for colour explicitly and the key says so, so that
// a hit replays what the plain compiler prints on that terminal. Measured (GCC 12, clang 14 and 19 in a
// pty): no colour with TERM unset or "dumb"; GCC none with GCC_COLORS set empty (clang ignores it);
// clang 19 none with NO_COLOR set (GCC 12 and clang 14 ignore it). Returns the flag to append to the
// miss command, "" when none (not a terminal, or the user's own -f[no-]diagnostics-color other than
// =auto decides, or clang would record the flag in the object under -frecord-gcc-switches).
std::string diagnostics_colour_flag(const ArgumentFacts& facts, const util::Environment& env, bool clang,
                                    bool stderr_is_terminal);

}  // namespace kache::compiler
