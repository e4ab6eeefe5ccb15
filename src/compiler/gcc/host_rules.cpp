// nvcc's -Xcompiler values, classified through the gcc/clang flag table (flag_table.cpp): the host
// compiler is a GCC-compatible driver, so the table that decides a direct gcc/clang compile decides
// each flag forwarded to it. The table is closed: an unknown host flag passes through (unknown-flag),
// unless [cc] extra_allowlist_flags names it, as on a direct gcc command line.
#include "compiler/gcc/host_rules.hpp"

#include "compiler/argument_facts.hpp"
#include "compiler/common.hpp"
#include "compiler/gcc/flag_table.hpp"

namespace kache::compiler::gcc {

namespace {

// The direct compile's reasons that -Xcompiler counts under a broader name (the names it had before
// the table decided: stats and logs keep meaning the same).
std::string_view forwarded_reason(std::string_view reason) {
  static constexpr std::pair<std::string_view, std::string_view> kRenamed[] = {
      // Files read that no dependency list names (the spec's "hidden-input").
      {"sysroot", "hidden-input"},
      {"plugin", "hidden-input"},
      {"profile-use", "hidden-input"},
      {"modules", "hidden-input"},
      {"pch", "hidden-input"},
      // Another output kind, or a file beside the object.
      {"preprocess", "output-kind"},
      {"split-dwarf", "output-kind"},
      {"save-temps", "keep-temps"},
      {"coverage", "profiling"},
      // A second dependency file the hit would not restore.
      {"dependency-only", "depfile-modifier"},
  };
  for (const auto& [direct, forwarded] : kRenamed) {
    if (reason == direct) return forwarded;
  }
  return reason;
}

// What one forwarded flag means for the host pass: "" when it is keyed, else the refusal's reason.
std::string_view host_verdict(const GccFlag& f) {
  switch (f.effect) {
    // Include directories, forced includes and macros reach the host pass only, which nvcc's own
    // dependency view does not attribute (spec 000).
    case Effect::IncludeDir:
    case Effect::ForcedInclude:
    case Effect::Define:
      return "hidden-input";
    case Effect::Output:
      return "output-kind";
    case Effect::DepMD:
    case Effect::DepMMD:
    case Effect::DepFile:
    case Effect::DepTarget:
      return "depfile-modifier";
    case Effect::Refuse:
      return forwarded_reason(f.reason);
    // nvcc's toolchain probe asks its host compiler without the forwarded -B.
    case Effect::DriverPrefix:
      return "hidden-input";
    case Effect::Keyed:
    case Effect::Compile:
    case Effect::Language:
    case Effect::Debug:
      return "";
  }
  return "unknown-flag";
}

// Forwarded flags whose meaning inside -Xcompiler differs from a direct compile's, checked before the
// table. Any -M option (-MP, -MJ, -MD...) changes or adds to the dependency output, which nvcc makes in
// its own pass: a host -MP's phony targets or -MJ's JSON would not be what kache stores and restores.
// Lists of functions or files a profile option reads (-fprofile-list=, -fprofile-remapping-file=) are
// inputs no dependency list names.
std::optional<std::string_view> forwarded_only_reason(std::string_view t) {
  if (t.starts_with("-M")) return "depfile-modifier";
  if (t.starts_with("-fprofile-list") || t.starts_with("-fprofile-remapping-file")) return "hidden-input";
  return std::nullopt;
}

// The row for a forwarded token. nvcc passes each comma-separated piece as its own argument, so
// "-Wp,-MD,x" reaches the host compiler as "-Wp": the row of the list option it heads ("-Wp,").
std::optional<FlagMatch> host_row(std::string_view t) {
  const std::string list_head = std::string(t) + ",";
  for (const GccFlag& f : flag_table()) {
    if (f.name == list_head) return FlagMatch{&f, std::nullopt};
  }
  return find_flag(t);
}

}  // namespace

std::optional<FlagRefusal> check_host_options(std::string_view value, bool* has_debug,
                                              const std::vector<std::string>* allowlist) {
  bool value_expected = false;  // the previous flag takes its value as the next token ("-x c++")
  for (std::string_view raw : split_option_list(value)) {
    const std::string_view t = unquote(raw);
    if (value_expected) {
      value_expected = false;
      continue;
    }
    // -march=native / -mtune=native / -mcpu=native: refused even when allow-listed (spec).
    if (is_machine_native(t)) return FlagRefusal{"machine-native", std::string(t)};
    // A host response file, or a bare word: an input the host compiler reads that kache never sees
    // (cl.exe's /I, /D, /FI are such words to GCC).
    if (t.starts_with('@') || !t.starts_with('-')) return FlagRefusal{"hidden-input", std::string(t)};
    if (const auto reason = forwarded_only_reason(t)) return FlagRefusal{std::string(*reason), std::string(t)};
    const std::optional<FlagMatch> m = host_row(t);
    if (!m) {
      if (allowlist && allowlist_names(*allowlist, t)) continue;
      return FlagRefusal{"unknown-flag", std::string(t)};
    }
    if (const std::string_view reason = host_verdict(*m->flag); !reason.empty()) {
      return FlagRefusal{std::string(reason), std::string(t)};
    }
    const Shape shape = m->flag->shape;
    value_expected = (shape == Shape::Value || shape == Shape::Separate) && !m->attached;
    if (has_debug && m->flag->effect == Effect::Debug && debug_option_enables(t)) *has_debug = true;
  }
  return std::nullopt;
}

std::optional<FlagRefusal> hidden_host_input(std::string_view value) {
  for (std::string_view raw : split_option_list(value)) {
    const std::string_view t = unquote(raw);
    if (t.starts_with('@')) return FlagRefusal{"hidden-input", std::string(t)};
    if (forwarded_only_reason(t) == "hidden-input") return FlagRefusal{"hidden-input", std::string(t)};
    const std::optional<FlagMatch> m = host_row(t);
    if (m && host_verdict(*m->flag) == "hidden-input") return FlagRefusal{"hidden-input", std::string(t)};
  }
  return std::nullopt;
}

}  // namespace kache::compiler::gcc
