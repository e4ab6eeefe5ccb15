#include "compiler/gcc/host_rules.hpp"

namespace kache::compiler::gcc {

namespace {

// GCC-compatible compiler flags that kache refuses when they reach the compiler from another driver
// (nvcc -Xcompiler). Everything else is keyed verbatim. First match wins.
constexpr ForwardRule kHostFlagRules[] = {
    // Preprocessor inputs and macros nvcc's own dependency view does not attribute (spec).
    {"-I", Match::Prefix, "hidden-input"},
    {"-D", Match::Prefix, "hidden-input"},
    // Files read before the source, or directories searched, outside nvcc's own flags.
    {"-include", Match::Prefix, "hidden-input"},  // also -include-pch
    {"-imacros", Match::Prefix, "hidden-input"},
    {"-isystem", Match::Prefix, "hidden-input"},
    {"-iquote", Match::Prefix, "hidden-input"},
    {"-idirafter", Match::Prefix, "hidden-input"},
    {"-isysroot", Match::Prefix, "hidden-input"},
    {"-iprefix", Match::Prefix, "hidden-input"},
    {"-iwithprefix", Match::Prefix, "hidden-input"},  // also -iwithprefixbefore
    {"-imultilib", Match::Prefix, "hidden-input"},
    {"-iframework", Match::Prefix, "hidden-input"},
    {"-cxx-isystem", Match::Prefix, "hidden-input"},
    {"--include", Match::Prefix, "hidden-input"},  // --include, --include-directory, --include-prefix...
    {"--imacros", Match::Prefix, "hidden-input"},
    {"--define-macro", Match::Prefix, "hidden-input"},
    {"--sysroot", Match::Prefix, "hidden-input"},
    // Another toolchain prefix or spec file: different programs and headers.
    {"-B", Match::Prefix, "hidden-input"},
    {"-specs", Match::Prefix, "hidden-input"},
    {"--specs", Match::Prefix, "hidden-input"},
    // Plugins and profiles are files read by the compiler that no dependency list names.
    {"-fplugin", Match::Prefix, "hidden-input"},
    {"-fpass-plugin", Match::Prefix, "hidden-input"},
    {"-fprofile-use", Match::Prefix, "hidden-input"},
    {"-fprofile-sample-use", Match::Prefix, "hidden-input"},
    {"-fprofile-instr-use", Match::Prefix, "hidden-input"},
    {"-fauto-profile", Match::Prefix, "hidden-input"},
    {"-fprofile-list", Match::Prefix, "hidden-input"},
    {"-fsanitize-blacklist", Match::Prefix, "hidden-input"},
    {"-fsanitize-ignorelist", Match::Prefix, "hidden-input"},
    {"-fsanitize-coverage-allowlist", Match::Prefix, "hidden-input"},
    {"-fsanitize-coverage-ignorelist", Match::Prefix, "hidden-input"},
    {"-fxray-attr-list", Match::Prefix, "hidden-input"},
    {"-fmodule", Match::Prefix, "hidden-input"},  // -fmodules, -fmodule-file, -fmodule-map-file
    // The same for cl.exe as the host compiler (include dirs, macros, forced includes, PCH).
    {"/I", Match::Prefix, "hidden-input"},
    {"/D", Match::Prefix, "hidden-input"},
    {"/FI", Match::Prefix, "hidden-input"},
    {"/FU", Match::Prefix, "hidden-input"},
    {"/Yu", Match::Prefix, "hidden-input"},
    {"/external:I", Match::Prefix, "hidden-input"},
    // Raw pass-through to the preprocessor / frontend: anything could be inside ("-Wp,-MD,x" is split
    // on the comma, so the flag itself arrives alone).
    {"-Wp", Match::Exact, "hidden-input"},
    {"-Xpreprocessor", Match::Exact, "hidden-input"},
    {"-Xclang", Match::Exact, "hidden-input"},
    // A host response file: arguments kache never sees.
    {"@", Match::Prefix, "hidden-input"},
    // Host dependency output: a second dependency file the hit would not restore.
    {"-M", Match::Prefix, "depfile-modifier"},
    // Changes the host pass's output kind (or redirects it).
    {"-E", Match::Exact, "output-kind"},
    {"-S", Match::Exact, "output-kind"},
    {"-fsyntax-only", Match::Exact, "output-kind"},
    {"-o", Match::Prefix, "output-kind"},
    {"-gsplit-dwarf", Match::Prefix, "output-kind"},  // a .dwo beside the object
    // Intermediate or dump files beside the output.
    {"-save-temps", Match::Prefix, "keep-temps"},
    {"-fdump-", Match::Prefix, "keep-temps"},
    // Coverage and profiling instrumentation write notes files at compile time and embed paths.
    {"--coverage", Match::Exact, "profiling"},
    {"-ftest-coverage", Match::Prefix, "profiling"},
    {"-fprofile-arcs", Match::Prefix, "profiling"},
    {"-fprofile-generate", Match::Prefix, "profiling"},
    {"-fprofile-instr-generate", Match::Prefix, "profiling"},
    {"-ftime-trace", Match::Prefix, "profiling"},
};

}  // namespace

std::optional<FlagRefusal> check_host_options(std::string_view value, bool* has_debug) {
  for (std::string_view raw : split_option_list(value)) {
    std::string_view t = unquote(raw);
    // -march=native / -mtune=native / -mcpu=native: refused even when allow-listed (spec).
    if (is_machine_native(t)) return FlagRefusal{"machine-native", std::string(t)};
    for (const auto& r : kHostFlagRules) {
      if (rule_matches(r, t)) return FlagRefusal{std::string(r.reason), std::string(t)};
    }
    if (has_debug && t.starts_with("-g") && !t.starts_with("-gno-")) *has_debug = true;
  }
  return std::nullopt;
}

}  // namespace kache::compiler::gcc
