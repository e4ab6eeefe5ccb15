#pragma once
// Every reason kache gives for not caching a compile, in one table: the name counted in the stats
// ("passthrough.<name>", "error.<name>", "not_stored.<name>"), the category, and one sentence that
// says what happened. `kache -s`, `kache --reasons`, the logs and the tests read it from here, so a
// reason a user sees in the stats always has an explanation (NamedReasons.EveryUsedReasonIsInTheTable
// checks that every reason the sources produce is a row).
//
// Names are stable: they are counters in existing stats files and keys in `kache -s --json`. A new
// reason is a new row; a renamed one would split its count.
#include <span>
#include <string>
#include <string_view>

namespace kache::core {

enum class ReasonCategory {
  Passthrough,    // the compile ran unchanged, uncached: "passthrough.<name>"
  Error,          // kache failed (the compile ran, uncached or unstored): "error.<name>"
  NotStored,      // compiled by kache, the object installed, but never stored: "not_stored.<name>"
  CompileFailed,  // the user's code did not compile: counted as "compile_failed", not kache's doing
};

struct Reason {
  ReasonCategory category;
  std::string_view name;      // as counted and as the compiler adapters spell it
  std::string_view sentence;  // what happened, for a user reading `kache -s` or a log
};

// The whole table, passthrough reasons first, then errors, then not-stored reasons.
std::span<const Reason> all_reasons();

// The row for a reason of that category, or nullptr when the table lacks it (a reason added to an
// adapter without its row: still counted under its name, see counter_name).
const Reason* find_reason(ReasonCategory category, std::string_view name);

// "passthrough", "error", "not_stored", "compile_failed".
std::string_view category_name(ReasonCategory category);

// The stats counter a reason is counted under: "passthrough.link", "error.storage-write",
// "not_stored.incbin"; "compile_failed" for the compile-failed reason.
std::string counter_name(ReasonCategory category, std::string_view name);

// The reason's sentence, or a fixed one for a name the table lacks.
std::string_view reason_sentence(ReasonCategory category, std::string_view name);

// Why a miss missed, in words a user acts on (issue 32): `kache report` and `kache doctor` group a
// build's misses by cause, misconfigurations first, each with its fix. A cause comes from a reason the
// compile counted (cause_of_counter) or from comparing the miss with the recorded entries of its
// source (app/explain.cpp miss_cause). Names are stable: they are keys in the event log.
struct MissCause {
  std::string_view name;
  bool misconfiguration;      // the build's setup costs the hits, not the code changing
  std::string_view sentence;  // what happened
  std::string_view fix;       // what to do; empty where nothing is to be done
};
std::span<const MissCause> all_miss_causes();
const MissCause* find_miss_cause(std::string_view name);
// The cause a counter a compile counted points to ("not_stored.unpinned-time" -> "volatile-time",
// "stored_per_checkout.path-in-object" -> "per-checkout-entry", "remote_errors" -> "remote-failed"),
// or nullptr.
const MissCause* cause_of_counter(std::string_view counter);

namespace cause {
inline constexpr std::string_view kPerCheckoutEntry = "per-checkout-entry";
inline constexpr std::string_view kAbsolutePath = "absolute-path";
inline constexpr std::string_view kToolchainChanged = "toolchain-changed";
inline constexpr std::string_view kVolatileDefine = "volatile-define";
inline constexpr std::string_view kVolatileTime = "volatile-time";
inline constexpr std::string_view kRemoteFailed = "remote-failed";
inline constexpr std::string_view kDirectModeOff = "direct-mode-off";
inline constexpr std::string_view kFlagsChanged = "flags-changed";
inline constexpr std::string_view kEnvironmentChanged = "environment-changed";
inline constexpr std::string_view kSourceChanged = "source-changed";
inline constexpr std::string_view kHeaderChanged = "header-changed";
inline constexpr std::string_view kComputedInclude = "computed-include";
inline constexpr std::string_view kExpandedPath = "expanded-path";
inline constexpr std::string_view kEntryGone = "entry-gone";
inline constexpr std::string_view kNewSource = "new-source";
}  // namespace cause

// Names of the reasons produced by kache's core itself (the compiler adapters' reasons live in their
// own tables, and are rows here as well).
namespace reason {
inline constexpr std::string_view kDisabled = "disabled";
inline constexpr std::string_view kCacheDirRefused = "cache-dir-refused";
inline constexpr std::string_view kUnsupportedCompiler = "unsupported-compiler";
inline constexpr std::string_view kOutputDirMissing = "output-dir-missing";
inline constexpr std::string_view kOutputDirUnwritable = "output-dir-unwritable";
inline constexpr std::string_view kOutputSpecial = "output-special";
inline constexpr std::string_view kCompileFailed = "compile-failed";
inline constexpr std::string_view kStorageRead = "storage-read";
inline constexpr std::string_view kStorageWrite = "storage-write";
inline constexpr std::string_view kRemoteFailed = "remote-failed";
inline constexpr std::string_view kInternal = "internal";
inline constexpr std::string_view kClosureUnreadable = "closure-unreadable";
inline constexpr std::string_view kInputChanged = "input-changed";
inline constexpr std::string_view kPathInObject = "path-in-object";
inline constexpr std::string_view kPathExpanded = "path-expanded";
inline constexpr std::string_view kCompressedDebug = "compressed-debug";
inline constexpr std::string_view kLtoObject = "lto-object";
inline constexpr std::string_view kCompressedFatbin = "compressed-fatbin";
inline constexpr std::string_view kDepfileTarget = "depfile-target";
inline constexpr std::string_view kPrecompiledHeader = "precompiled-header";
inline constexpr std::string_view kLockTimeout = "lock-timeout";
inline constexpr std::string_view kCacheWorldWritable = "cache-world-writable";
inline constexpr std::string_view kWrapperScript = "wrapper-script";
inline constexpr std::string_view kSourceSpecial = "source-special";
inline constexpr std::string_view kOutputPathThroughLink = "output-path-through-link";
inline constexpr std::string_view kAssemblerInputs = "assembler-inputs";
inline constexpr std::string_view kUnpinnedTime = "unpinned-time";
inline constexpr std::string_view kTimeMacro = "time-macro";
}  // namespace reason

}  // namespace kache::core
