#pragma once
// Path handling both adapters need for a CompileJob: the standard path roots (build, source and
// output directories, [paths] base_dirs), the roots a keyed value names, and the include search path
// GCC's environment variables add. Both adapters use these.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/adapter.hpp"
#include "core/path_roots.hpp"
#include "util/process.hpp"

namespace kache::compiler {

// /kache/build (cwd), /kache/src (the source's directory), /kache/out (the output's), then the
// base dirs (/kache/base<i>). *source_identity gets the source keyed against the base dirs only.
// pwd: the working directory as the compiler writes it (compiler_pwd); when it differs from cwd the
// build root is spelled as pwd (what DW_AT_comp_dir names), cwd kept as another spelling of it.
core::PathRoots standard_roots(const std::string& cwd, const std::string& source, const std::string& output,
                               const std::vector<std::string>& base_dirs, std::string* source_identity,
                               const std::string& pwd = "");

// The working directory as GCC names it in debug info (libiberty's getpwd): $PWD when it is absolute and
// names the same directory as "." (same device and inode), else cwd. Taken as spelled, however it is
// spelled ("/a/tools/../build", "/a/./b", "/a/b/"): GCC 12 and clang 14/19 write such a $PWD verbatim
// as DW_AT_comp_dir (measured with readelf), and only a root spelled the same is mapped to a
// placeholder; left unmapped, the spelling is no root's text, so the scan would not see it either.
std::string compiler_pwd(const std::string& cwd, const util::Environment& env);

// Sets the job's source, output and (when depfile_written is not empty) depfile: absolute (joined to
// cwd, for kache's own use) and as written on the command line (what the compiler itself names).
void place_files(CompileJob& job, const std::string& cwd, const std::string& source_written,
                 const std::string& output_written, const std::string& depfile_written);

// Appends ("root", "<name>=<path>") for each root one of fields[0, keyed) names, so equal keys map
// such values alike. Returns the real paths of the roots so keyed.
std::vector<std::string> add_root_key_fields(std::vector<std::pair<std::string, std::string>>& fields,
                                             std::size_t keyed, const core::PathRoots& roots);

// A user's -ffile-prefix-map=OLD=NEW (or -fmacro-/-fdebug-prefix-map) with OLD keyed as the roots map it:
// OLD a root ("-ffile-prefix-map=<checkout>=." with the checkout a base dir) is keyed by the root's
// name, so two checkouts given the same recipe key alike. The user's rules come after kache's and win
// (GCC and clang apply the last matching rule), so the object names NEW + the rest below OLD: the
// same bytes in every checkout that keys alike. nullopt for any other argument.
std::optional<core::PathRoots::KeyedValue> key_prefix_map_rule(const std::string& arg, const core::PathRoots& roots);

// With debug info, the compile's working directory below a user's -ffile-prefix-map/-fdebug-prefix-map
// OLD reaches the object mapped (DW_AT_comp_dir `./build-release` under the portable-path recipe with
// the build dir inside the checkout), which no root rewrites: keyed as ("debug-cwd", the part of the
// working directory below OLD) for each such OLD (ArgumentFacts::debug_map_olds), so build dirs of other
// names key apart.
void add_debug_cwd_fields(std::vector<std::pair<std::string, std::string>>& fields, const ArgumentFacts& facts,
                          const std::string& cwd);

// A path-valued option's value inside the keyed command line: args[index].substr(offset) (-I<dir>, the
// argument after -MF, spec 003's -Xclang -dependency-file value).
struct PathValue {
  std::size_t index;
  std::size_t offset;
};

// The command line as keyed: each path value that is absolute and below a root by the root's name
// (-I/w/one/build/gen -> -I/kache/build/gen), so another build directory or checkout keys alike; the
// miss's prefix maps and the depfile's templating give the same outputs there. Paths outside every
// root, and relative ones, stay as written.
std::vector<std::string> keyed_args(std::vector<std::string> args, const std::vector<PathValue>& values,
                                    const core::PathRoots& roots);

// The job's path roots (standard_roots, unless KACHE_NVCC_PATH_NORMALIZE=0 keys paths literally), its
// source_identity and whether the miss writes debug placeholders (not with the user's own debug maps
// or compressed debug sections). job.source and job.output must be placed (place_files), job.facts read.
void set_job_roots(CompileJob& job, const std::string& cwd, const core::Config& cfg, const util::Environment& env);

// The key fields saying how the job's paths are keyed: "normalize", "debug-names", then the working
// directory, the source (a relative one as spelled: it reaches __FILE__ and the depfile so) and the
// output by their roots' names.
void add_path_key_fields(std::vector<std::pair<std::string, std::string>>& fields, const CompileJob& job,
                         const std::string& cwd, const std::string& source_written);

// The -ffile-prefix-map a miss adds last so the scratch directory it writes into names the output's
// directory (through its placeholder when the job has them), as a plain compile names it.
std::string scratch_prefix_map(const CompileJob& job, const std::string& scratch_dir);

// Appends an absolute include dir to job.literal_dirs as spelled (trailing slashes dropped) and as its
// lexical normal form. A path the compiler names below the spelling ("<d>/../inc", a header or a watched
// absent candidate climbing out of d with "..") is as literal as d itself: the key holds d as written,
// so it names the same file in every compile with this key (CMake keeps include_directories(../x) as
// "<source dir>/../x"). A relative dir adds nothing.
void add_literal_dir(CompileJob& job, const std::string& dir);

// The directories an include-path variable (CPATH, C_INCLUDE_PATH, ...) adds, as GCC reads it: unset
// or empty adds nothing; an empty element (":x", "x:", "a::b") is the cwd (".").
std::vector<std::string> include_path_dirs(const util::Environment& env, const char* variable);

// Appends dir to job.search_dirs (the absent-path watch) once: joined to cwd and spelled as given, not
// normalized (the compiler names a header found there dir + "/" + name, and the path roots must see the
// same spelling), trailing slashes dropped. An empty dir adds nothing.
void add_search_dir(CompileJob& job, const std::string& cwd, const std::string& dir);

// A toolchain's own include directories with every other spelling of each that names the same
// directory: lexically normal ("/usr/local/cuda/bin/../targets/..." as nvcc.profile writes it becomes
// "/usr/local/cuda/targets/...", kept only when it resolves to the same directory, so a `bin` that is a
// link is never read past) and fully resolved (links followed). A header's path in a depfile uses
// whichever spelling found it: the toolchain's own flag, a build system's -isystem of the same
// directory (CMake adds CUDA's include/cccl), or GCC's canonical system-header names, and only a
// header known to be the toolchain's is exempt from the project's computed-include scan. Resolves
// paths: for a miss and explain, never a hit.
std::vector<std::string> system_dir_spellings(const std::vector<std::string>& include_dirs);

}  // namespace kache::compiler
