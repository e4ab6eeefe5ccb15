#pragma once
// The seam between the compiler-independent pipeline and per-compiler knowledge.
// An adapter decides whether an invocation is cacheable, says what its key contains (beyond the
// dependency closure, which the pipeline records itself), and how to run a miss so the object, the
// dependency list and the path mapping come out the way the pipeline needs them.
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "compiler/argument_facts.hpp"
#include "compiler/stage_store.hpp"
#include "compiler/tool_files.hpp"
#include "core/config.hpp"
#include "core/depfile.hpp"
#include "core/doctor_rows.hpp"
#include "core/invocation.hpp"
#include "core/path_roots.hpp"
#include "util/process.hpp"

namespace kache::compiler {

struct Passthrough {
  std::string reason;  // stable name, counted as passthrough.<reason>
  std::string detail;
};

struct CompileJob {
  std::string source;            // absolute, lexically normal
  std::string output;            // absolute, lexically normal
  std::string output_written;    // the output as the user spelled it
  std::string depfile;           // user's dependency file, absolute; empty when none was asked for
  std::string depfile_written;   // the dependency file as the user spelled it
  // What the command line says beyond the plan (debug info, prefix maps, LTO, ...), read once by
  // read_argument_facts: every later step, the remote-execution glue included, reads it from here.
  ArgumentFacts facts;
  bool depfile_partial = false;  // the user's dependency file omits headers (nvcc -MMD)
  // The depfile's target when the user gave no -MT: the output as written (nvcc's default, and the -MT
  // a miss passes). Stored depfiles hold a placeholder there, so "-o o1/x.o" and "-o o2/x.o" share an
  // entry and each gets its own target. Empty when the user's -MT (keyed) names it.
  std::string depfile_target;
  // How the compiler may wrap the depfile's lines (gcc/clang): the miss stores the first that
  // reproduces its depfile, and a hit re-wraps with it. None (nvcc): restored as stored.
  std::vector<core::DepfileLayout> depfile_layouts;
  // How the compiler escapes paths in the depfile (nvcc: spaces only; GCC and clang differ).
  core::MakeEscaping depfile_escaping = core::MakeEscaping::spaces_only;
  core::PathRoots roots;                                        // empty when paths are keyed literally
  std::vector<std::pair<std::string, std::string>> key_fields;  // named, in order
  std::vector<std::string> search_dirs;  // include search path (absolute), for the absent-path watch
  std::vector<std::string> system_dirs;  // toolchain-owned include directories
  // The compiler reads <dir>/<header>.gch instead of an #include'd header when one exists there (GCC;
  // see first_precompiled_header in core/watch.hpp): watched, and a miss that may have read one is
  // not stored.
  bool precompiled_headers_searched = false;
  // Directories whose absolute paths are part of the key as written (toolchain directories, absolute
  // -I/-isystem values, absolute include-path variables): a file below one is the same file in any
  // checkout with this key. A dependency anywhere else outside the roots ties the entry to this
  // checkout.
  std::vector<std::string> literal_dirs;
  // The object always depends on the source's path (e.g. nvcc -rdc module ids).
  bool path_specific = false;
  // The source's path as path-specific objects are keyed: relative to a [paths] base_dirs root when it
  // lies below one (so two files of one build never share a key, while a moved checkout still does),
  // else the literal absolute path.
  std::string source_identity;
  std::string description;  // toolchain, for logs
  ToolFiles toolchain_files;  // what the key's toolchain id was read from (Pipeline::toolchain_held)
  // The object may name the real paths of some roots where no prefix map reaches (nvcc -lineinfo
  // writes the source's and headers' paths, as resolved, into device code). A root the key names
  // literally (a "root" key field, listed in keyed_roots) may then appear in a stored object; any other
  // root that appears makes the entry specific to this checkout (all roots keyed) instead of unstored.
  bool object_names_roots = false;
  std::vector<std::string> keyed_roots;  // root paths the key names literally
  // The old paths of the user's -fmacro-prefix-map=OLD=NEW and -ffile-prefix-map=OLD=NEW rules (the
  // host compiler's, for nvcc): __FILE__ and its kin name a file below OLD as NEW plus the rest, which
  // the key holds (macro_map_olds in argument_facts.hpp), so such an expansion ties no root.
  std::vector<std::string> macro_map_olds;
  // The command names an execution character set the object scan cannot read (ArgumentFacts::foreign_charset
  // in argument_facts.hpp): no scan can prove the object free of roots, so it is stored per checkout.
  bool foreign_charset = false;
  // The object's file name in the miss's scratch directory (empty: the output's). nvcc -objtemp
  // names intermediates after it, and they reach the symbol table and -g debug info, so a name that
  // does not depend on -o keeps the object independent of the output path.
  std::string scratch_object_name;
  // What the output is when it is not an object: "fatbin", "cubin", "ptx" (nvcc's standalone device
  // outputs), counted per kind in the stats. Empty: an object.
  std::string output_kind;
  // A miss maps every root of kPlaceholderLength or less in debug info to a fixed-length placeholder
  // (PathRoots::debug_map_flags) that an install or restore replaces in place by this checkout's root.
  // Off without roots, with the user's own debug maps (theirs decide what the object names) and with
  // compressed debug sections (no in-place replacement there).
  bool debug_placeholders = false;
  // How files the assembler opens on its own (.incbin/.include in inline asm or a .S file) are found.
  // scanned: by the text markers of core/watch.hpp (nvcc). listed: the miss asks GNU as for their list
  // (-Wa,--MD,MissPaths::assembler_depfile) and the pipeline adds it to the closure. checked: no list
  // can be had (clang's integrated assembler refuses --MD; under -flto GCC records -Wa options in the
  // object), so the compiler's preprocessed output (Adapter::preprocess_command) is checked
  // (core::may_read_assembler_inputs) and a compile that may have read one is not stored.
  enum class AssemblerInputs { scanned, listed, checked };
  AssemblerInputs assembler_inputs = AssemblerInputs::scanned;
};

// The time macros a compile expanded, as its compiler reports them (Adapter::time_macros): __DATE__
// alone, or __TIME__/__TIMESTAMP__ (with or without __DATE__).
enum class TimeMacros { none, date, time };

struct MissPaths {
  std::string scratch_dir;  // private directory next to the output
  std::string object;       // where the compiler must write the object
  std::string depfile;      // where it must write the full dependency list
  std::string seed;         // stable per key: feeds -frandom-seed so misses are byte-identical
  std::string assembler_depfile;  // where GNU as lists the files it opened (AssemblerInputs::listed)
};

// One preprocessing command of a compile, its output on stdout (the preprocessed-mode fallback, issue 39).
struct PreprocessCommand {
  std::string program;            // the executable
  std::vector<std::string> argv;  // argv[0] as the command names the program
  util::Environment env;
  std::string pass;  // what it preprocesses for ("host", "-D__CUDA_ARCH__=800"): the key names it, logs show it
};

// The parts of `kache doctor`'s report an adapter adds rows to, in the order they are printed: its
// toolchain's facts, then the machine's (nvcc: the CUDA driver) after every family's toolchain, then its
// configuration's (the environment its compiles read) after the cache's and the general configuration's.
enum class DoctorSection { toolchain, machine, config };

// What `kache doctor` was asked: the programs named on its command line by the family they are for
// ("nvcc" -> its --nvcc PATH; a family not named looks for its default name on PATH), the host compiler
// named with -ccbin, the bound on a slow probe, the configuration and the environment.
struct DoctorQuery {
  std::map<std::string, std::string> named_programs;
  std::optional<std::string> host_compiler;
  int probe_timeout_ms = 20'000;
  const core::Config* config = nullptr;
  util::Environment env;
};

class Adapter {
 public:
  virtual ~Adapter() = default;
  virtual std::string name() const = 0;
  virtual std::variant<Passthrough, CompileJob> prepare(const core::Invocation& inv, const core::Config& cfg) = 0;
  virtual std::vector<std::string> miss_command(const core::Invocation& inv, const CompileJob& job,
                                                const MissPaths& paths) const = 0;
  virtual void miss_environment(util::Environment& env, const core::Config& cfg) const = 0;
  // A command that prints the full dependency list on stdout, for compiles whose own dependency
  // file cannot serve as the closure (nvcc -MMD omits system headers). Empty: the miss's depfile is it.
  virtual std::vector<std::string> closure_command(const core::Invocation& inv, const CompileJob& job) const = 0;
  // The compile's command with its outputs dropped and -E: the preprocessed source on stdout, for
  // CompileJob::AssemblerInputs::checked. Empty when the adapter has none.
  virtual std::vector<std::string> preprocess_command(const core::Invocation&, const CompileJob&) const { return {}; }
  // Which time macros the compile expanded, read from the run of preprocess_command (its stdout and
  // stderr); nullopt when that run cannot say. Adapters whose misses pin the times (nvcc, through
  // SOURCE_DATE_EPOCH, spec 000) or that have no such run answer none.
  virtual std::optional<TimeMacros> time_macros(const util::ProcessResult&) const { return TimeMacros::none; }
  // Runs the miss's command (argv, in env) as the compiler's own stages, some served from and the others
  // kept in `stages` (nvcc: cicc and ptxas, one per architecture). A string says why it cannot, and
  // the pipeline runs argv whole: "unsupported" where the adapter has no stages.
  virtual std::variant<std::string, util::ProcessResult> run_stages(const core::Invocation&, const CompileJob&,
                                                                    const MissPaths&, const std::vector<std::string>&,
                                                                    const util::Environment&, StageStore&) const {
    return std::string("unsupported");
  }
  // A command printing every file the compile reads (-M, on stdout), for a compile sent whole to a remote
  // worker as one action whose input root is that list (docs/remote-execution.md). Empty: the adapter's
  // compiles do not go out whole.
  virtual std::vector<std::string> remote_listing_command(const core::Invocation&, const CompileJob&) const {
    return {};
  }
  // The program the adapter's commands (miss, closure, preprocess, listing) run: the resolved compiler,
  // or the driver a wrapper script runs in the end (compiler/gcc/wrapper.hpp).
  virtual const std::string& program(const core::Invocation& inv) const { return inv.compiler_path; }
  // Every preprocessing the compile does, as commands printing their output (the preprocessed-mode
  // fallback, issue 39: a compile direct mode cannot record is keyed by these outputs): gcc/clang -E of
  // the compile's own command; nvcc's host pass and each device pass (-D__CUDA_ARCH__) as its dry run
  // lists them. env is the environment the miss runs in. A string says why there are none, and the
  // compile then has no fallback ("unsupported" where the adapter has none).
  virtual std::variant<std::string, std::vector<PreprocessCommand>> fallback_preprocessing(
      const core::Invocation&, const CompileJob&, const util::Environment&) const {
    return std::string("unsupported");
  }
  // Substrings of an object that reveal it depends on the literal source path.
  virtual std::vector<std::string> path_specific_markers() const = 0;
  // `kache doctor`'s rows of this family for one section, read with the adapter's own probe readers, so
  // doctor states the toolchain the key sees. Called once per section in DoctorSection's order on one
  // adapter of registry's families(), which may keep what an earlier section read. Never throws: a
  // failure is a row.
  virtual void doctor_rows(core::DoctorRows&, DoctorSection, const DoctorQuery&) {}
  // The answer to a question `kache doctor` asks itself in a child process (the doctor's hidden option,
  // e.g. "--driver-version"), where the answer may crash the process that asks (nvcc: loading the CUDA
  // driver); nullopt when the question is not this family's.
  virtual std::optional<std::string> doctor_child_answer(std::string_view) const { return std::nullopt; }
  // The toolchain id compiles through this adapter key for `program` (its resolved path), with no memo:
  // what `kache worker` serves (the kache-toolchain platform property). Throws std::runtime_error when
  // the program cannot be probed or the family keys no toolchain of its own.
  virtual std::string toolchain_id(const std::string& program, const util::Environment&) const {
    throw std::runtime_error(name() + " has no toolchain id for " + program);
  }
};

}  // namespace kache::compiler
