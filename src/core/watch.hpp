#pragma once
// Which paths must stay absent for a recorded dependency closure to still be what the compiler reads.
//
// The compiler picks the first match along its include search path. A recorded header h found in
// search directory S as S/rel would be shadowed if T/rel appeared in another search directory T, or if
// a header named by a __has_include appeared anywhere on the path. For each such candidate the nearest
// missing ancestor is recorded (a missing directory stands for everything below it); a lookup then only
// has to confirm those paths still do not exist, mostly with one stat per directory (AbsentGroup).
// Candidates in every other search directory are taken, not only earlier ones: that over-approximates
// (a harmless extra miss), never under-approximates.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "util/fs.hpp"
#include "util/hash.hpp"

namespace kache::core {

// Targets of literal __has_include(<x>) / __has_include("x") (and _next, and macro wrappers such as
// _CCCL_HAS_INCLUDE(<x>)) in a file's text. Sets `opaque` when no finite watch list is known to be
// complete: a __has_include with a computed argument outside a #define, or a #define that wraps
// __has_include under a name this scan does not search for (`#define HAVE(h) __has_include(h)`: its
// uses `HAVE(<x>)` name headers the scan never sees). A wrapper whose own name ends in has_include /
// HAS_INCLUDE (optionally _next) is fine: its uses are matched like __has_include itself. The text is
// read as written and with its lines spliced (a name split by a backslash-newline). A name built by
// token pasting is no word this scan can see: core/expansion_scan.hpp scan_pastes weighs that risk.
void scan_has_include(std::string_view text, std::vector<std::string>& names, bool& opaque);

// Targets of #include / #include_next directives with a literal <x> or "x" name, whatever
// branch they sit in. GCC opens a #pragma once header and skips it without listing it in -MD when its
// content equals a header already included (measured with GCC 12: b.h identical to a.h is read,
// skipped, unlisted); an edit then makes it included. Such a file is reached only through a name, so
// the names are recorded like __has_include targets (existing ones hashed, missing ones watched).
// Sets `opaque` for a computed #include MACRO: its target cannot be listed.
void scan_include_names(std::string_view text, std::vector<std::string>& names, bool& opaque);

// Inputs some tool reads that no dependency list names, found by their spelling in a file the compile
// read (see kHiddenInputMarkers in watch.cpp). Returns the not-stored reason of the first one found,
// or an empty view. Such a compile is not stored: neither the file nor its identity is keyed.
// `assembler_markers` false leaves out .incbin/.include, for compiles whose assembler inputs are listed
// or checked by the tools (compiler::CompileJob::AssemblerInputs).
std::string_view scan_hidden_inputs(std::string_view text, bool assembler_markers = true);
// Every reason scan_hidden_inputs can return, and kPragmaDependency (each a not_stored row of
// core/reasons.cpp).
std::vector<std::string_view> hidden_input_reasons();

// `#pragma GCC dependency "f"` (or clang's spelling, or inside _Pragma): the compiler compares f's
// time with the source's and warns (or, under -Werror, fails) when f is newer. No dependency list names
// f (measured: gcc 12, clang 14 and 19 leave it out of -MD), so such a compile is not stored.
inline constexpr std::string_view kPragmaDependency = "pragma-dependency";
bool names_pragma_dependency(std::string_view text);

// Whether preprocessed text (the compiler's -E output: token pasting and macros already done) may make
// the assembler open a file of its own: a .incbin or .include directive in any case once adjacent
// string literals are joined, or assembler macro concatenation that could build one. A sound
// over-approximation short of escape sequences spelling the directive ("\x2eincbin"). Used where the
// assembler cannot list what it read (clang's integrated assembler, GCC under -flto).
bool may_read_assembler_inputs(std::string_view preprocessed);

// closure: absolute paths of every file the compile read, as the compiler spelled them.
// search_dirs: absolute directories of the include search path, spelled as given (cwd-joined).
// system_dirs: directories whose content belongs to the toolchain (their files' own directories are
// not added as quote-include directories).
// Returns the paths that must stay absent: for each candidate its nearest missing ancestor (a missing
// directory stands for everything below it). `present` (when given) receives the __has_include
// targets that exist on the search path but are not in the closure: the compiler tested them without
// reading them, so their deletion flips the test; the caller must record them as inputs.
// What watch_set saw of each path it stat'ed, in the order it first did (`order` counts up): a
// directory's identity can guard the names below it only if it was taken before they were checked.
struct Observed {
  std::optional<util::FileIdentity> id;  // nullopt: missing
  std::uint64_t order = 0;
  std::int64_t clock_ns = 0;  // util::file_clock_now_ns() right after the stat (for the racy rule)
};
using Observations = std::unordered_map<std::string, Observed>;

std::vector<std::string> watch_set(const std::vector<std::string>& closure, const std::vector<std::string>& search_dirs,
                                   const std::vector<std::string>& system_dirs,
                                   const std::vector<std::string>& has_include_names, Observations* observed = nullptr,
                                   std::vector<std::string>* present = nullptr, bool precompiled_headers = false);

// GCC looks for <name>.gch in each directory just before it looks there for an #include'd <name>, and
// reads a precompiled header found there instead of the header (without checking the header's
// content, and without naming either in its -MD output). With `precompiled_headers`, watch_set also
// watches <rel>.gch wherever it watches <rel>, and beside every closure file. And a miss must not be
// stored when any *.gch lies in a directory the compile searched: first_precompiled_header returns
// the first such path (a directory that cannot be listed counts as holding one).
std::optional<std::string> first_precompiled_header(const std::vector<std::string>& dirs);

// Absent paths grouped by their directory. A directory's mtime and ctime change whenever an entry is
// created, removed or renamed in it, so an unchanged identity of `dir` proves every name in `names` is
// still missing with one stat instead of one per name. `guard` is set only when that identity was taken
// before the names were confirmed missing and lies outside the current clock tick (else a same-tick
// change could keep it); without a guard, or when it no longer matches, each name is checked. In a
// toolchain directory (which builds do not write into) a guarded group keeps no names: the identity
// alone must hold, which keeps manifests small (a thrust+cub TU has thousands of such candidates).
// Such a group also keeps `listing`, the digest of the directory's names (listing_digest) as they were
// under the guard: on another machine the same toolchain directory has another identity, and an equal
// listing there proves every name that was missing still is (none of them was an entry at all). It is
// left unset when the listing cannot be tied to the guard (the directory changed after it) or when a
// watched name is an entry that does not resolve (a dangling link: its target could appear elsewhere
// with no change to this directory).
struct AbsentGroup {
  std::string dir;
  std::optional<util::FileIdentity> guard;
  std::vector<std::string> names;
  std::optional<util::Digest> listing;
};

// The names of the entries of `dir` (without "." and ".."), sorted bytewise; nullopt when it cannot be
// read as a directory.
std::optional<std::vector<std::string>> directory_names(const std::string& dir);
// SHA-256 over sorted names, each length-prefixed (no two name sets hash alike by concatenation).
util::Digest names_digest(const std::vector<std::string>& sorted_names);
// names_digest(directory_names(dir)), nullopt when the directory cannot be read.
std::optional<util::Digest> listing_digest(const std::string& dir);
// The same, of the directory at `dir` only if it is the one with identity `expected` and it kept that
// identity while it was read (fstat of the open directory before and after): the names belong to that
// identity even if the path was repointed meanwhile.
std::optional<util::Digest> listing_digest_as(const std::string& dir, const util::FileIdentity& expected);

// Groups `absent` by directory. A directory watch_set stat'ed before every one of its names (see
// `observed`) is guarded by that identity as is; any other is stat'ed now and its names confirmed
// missing again after that. trusted(dir, identity, clock) says whether the directory's times lie
// outside the clock-tick margin of `clock`, the file clock read right after that identity was taken. Returns nullopt
// when a path appeared meanwhile (the caller must not record the closure).
std::optional<std::vector<AbsentGroup>> group_absent(
    const std::vector<std::string>& absent, const std::vector<std::string>& system_dirs,
    const std::function<bool(const std::string&, const util::FileIdentity&, std::int64_t)>& trusted,
    const Observations* observed = nullptr);

// Splits "dir/name" at its last slash (no normalization: "a/b/.." stays dir "a/b", name "..").
std::pair<std::string, std::string> split_last(const std::string& path);

}  // namespace kache::core
