// The nvcc planner: reads the effective command line (NVCC_PREPEND_FLAGS + args + NVCC_APPEND_FLAGS,
// the order nvcc itself applies them) through the flag table and decides "cache" or "run unchanged".
//
// When several things refuse, the reason is chosen deterministically: a phase reason (what the
// invocation is: link, -E, -cuda, --optix-ir, --version, a response file, -dlto, an lto_NN target, a
// device output with -c, or neither -c / -dc nor -fatbin / -cubin / -ptx) first, then the first
// refused flag in argument order, then what is missing or extra (the source, -o, -MF).
//
// -fatbin / -cubin / -ptx (nvcc.cache_device_outputs, on by default) plan like -c: one source, one
// file at -o, the same key; the plan names the kind (CompilePlan::device_output).
#include "compiler/nvcc/plan.hpp"

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>

#include "compiler/common.hpp"
#include "compiler/nvcc/flag_table.hpp"

namespace kache::compiler::nvcc {

namespace {

enum class Origin { Prepend, User, Append };

struct Arg {
  std::string_view text;
  Origin origin;
  std::size_t index;  // position in the user's args (Origin::User only)
};

// Reasons that say what the whole invocation is (or that it cannot be known: a response file may hold
// any of them); they win over a refused flag elsewhere on the line.
bool is_phase_reason(std::string_view r) {
  return r == "informational" || r == "link" || r == "device-link" || r == "lib" || r == "output-kind" ||
         r == "device-ir" || r == "preprocess" || r == "dependency-only" || r == "response-file";
}

// Whether one of the words of an -arch/-code/-gencode value ("sm_90", "compute_90,sm_90",
// "arch=compute_90,code=[compute_90,sm_90]") satisfies pred.
template <typename Pred>
bool any_gpu_word(std::string_view v, Pred pred) {
  std::size_t i = 0;
  while (i <= v.size()) {
    // Every whitespace character, as split_option_list splits forwarded values: "native\n..." is native too.
    std::size_t j = v.find_first_of(",=[] \t\n\r\v\f", i);
    if (j == std::string_view::npos) j = v.size();
    if (pred(v.substr(i, j - i))) return true;
    i = j + 1;
  }
  return false;
}

bool gpu_value_is_native(std::string_view v) {
  return any_gpu_word(v, [](std::string_view w) { return w == "native"; });
}

// lto_NN targets: the device code is NVVM IR (see the device-ir reason).
bool gpu_value_is_lto(std::string_view v) {
  return any_gpu_word(v, [](std::string_view w) { return w.starts_with("lto_"); });
}

class Planner {
 public:
  Planner(const std::vector<FlagSpec>& table, const std::vector<std::string>& args, const PlanOptions& options)
      : table_(table), args_(args), options_(options) {}

  Plan run() {
    prepend_ = split_env_flags(options_.prepend_flags);
    append_ = split_env_flags(options_.append_flags);
    for (const auto& a : prepend_) all_.push_back({a, Origin::Prepend, 0});
    for (std::size_t i = 0; i < args_.size(); ++i) all_.push_back({args_[i], Origin::User, i});
    for (const auto& a : append_) all_.push_back({a, Origin::Append, 0});

    // nvcc runs its steps through /bin/sh with every argument in double quotes (measured with nvcc 13:
    // `-D "WHO=\"$VAR\""` in --dryrun), so `$VAR`, `${...}`, `$(...)` and backquotes in a -D value, an
    // -Xcompiler value, an -I path or a file name are expanded from the environment or by running
    // commands: no key can name what the shell reads.
    for (const auto& a : all_) {
      if (a.text.find_first_of("$`") != std::string_view::npos) refuse("shell-expansion", std::string(a.text));
    }
    for (std::size_t i = 0; i < all_.size(); ++i) i = scan(i);
    return decide();
  }

 private:
  void refuse(std::string_view reason, std::string detail) { refusals_.add(reason, std::move(detail)); }

  // The allow-list as the spec defines it: the flag itself or the flag followed by "=value".
  bool allowlisted(std::string_view arg) const { return allowlist_names(options_.extra_allowlist, arg); }

  // A non-built-in table entry is admitted when the allow-list names the argument (above) or any
  // spelling of the same option (nvcc reads "-use_fast_math" and "--use_fast_math" alike), written
  // alone or with "=value".
  bool entry_allowlisted(const FlagMatch& m, std::string_view arg) const {
    if (allowlisted(arg)) return true;
    if (m.form == kAttached) return false;
    for (const auto& e : options_.extra_allowlist) {
      if (std::find(m.spec->names.begin(), m.spec->names.end(), std::string_view(e)) != m.spec->names.end()) {
        return true;
      }
    }
    return false;
  }

  // Scans the argument at i; returns the index of the last argument it consumed.
  // An argument that is no flag: a response file, an empty argument or "-", an input file. Returns
  // false for a flag.
  bool scan_non_flag(const Arg& a) {
    const bool from_env = a.origin != Origin::User;
    const std::string_view t = a.text;
    if (t.starts_with('@')) {
      refuse(from_env ? "env-flag" : "response-file", std::string(t));
      return true;
    }
    if (t.empty() || t == "-") {
      // nvcc has no stdin input; an empty argument names no file.
      refuse(from_env ? "env-flag" : "unknown-flag", t.empty() ? "(empty argument)" : "-");
      return true;
    }
    if (t[0] != '-') {
      // An input file. From the environment it would be compiled without being keyed as one.
      if (from_env) {
        refuse("env-flag", std::string(t));
      } else {
        positionals_.push_back(a.index);
      }
      return true;
    }
    return false;
  }

  std::size_t scan(std::size_t i) {
    const Arg& a = all_[i];
    const bool from_env = a.origin != Origin::User;
    const std::string_view t = a.text;
    if (scan_non_flag(a)) return i;

    std::optional<FlagMatch> m = find_flag(table_, t);
    if (!m) {
      scan_unknown(a);
      return i;
    }
    const FlagSpec& spec = *m->spec;

    // Non-built-in entries behave like unknown flags unless allow-listed; their separate value (if
    // any) is then not consumed, exactly as the spec says for allow-listed flags.
    bool vouched = false;
    if (!spec.builtin) {
      vouched = entry_allowlisted(*m, t);
      if (!vouched && !(from_env && spec.env_ok)) {
        refuse(from_env ? "env-flag" : "unknown-flag", std::string(t));
        return i;
      }
    }

    if (!spec.builtin && spec.arity == Arity::Value && m->form == kSeparate && i + 1 < all_.size() &&
        !all_[i + 1].text.empty() && all_[i + 1].text[0] != '-') {
      // Spec: an allow-list entry covers the flag and flag=value; a value given as the next argument
      // counts as another unknown argument.
      refuse(from_env ? "env-flag" : "unknown-flag", std::string(all_[i + 1].text));
      return i + 1;
    }

    std::optional<std::string_view> value = m->inline_value;
    std::size_t last = i;
    std::optional<std::size_t> value_index;  // user index of a separate value
    if (spec.arity == Arity::Value && m->form == kSeparate && spec.builtin) {
      if (i + 1 >= all_.size()) {
        refuse(from_env ? "env-flag" : "unknown-flag", std::string(t) + " (missing value)");
        return i;
      }
      const Arg& v = all_[i + 1];
      if (v.origin != a.origin) {
        // A flag in NVCC_PREPEND_FLAGS taking the user's first argument, or the user's last flag
        // taking NVCC_APPEND_FLAGS' first word: the environment changes what the line means.
        refuse("env-flag", std::string(t) + " " + std::string(v.text));
        return i + 1;
      }
      value = v.text;
      if (v.origin == Origin::User) value_index = v.index;
      last = i + 1;
    }

    std::string shown = std::string(t);
    if (last != i) shown += " " + std::string(*value);

    if (from_env && !spec.env_ok && !vouched) {
      // Outside codegen tuning. Machine-resolved values and device debug keep their own reason.
      if (spec.effect == Effect::Refuse && spec.reason == "device-debug") {
        refuse("device-debug", shown);
      } else if (value && value_is_native(spec, *value)) {
        refuse("machine-native", shown);
      } else {
        refuse("env-flag", shown);
      }
      return last;
    }

    apply(*m, a, value, value_index, shown, vouched);
    return last;
  }

  bool value_is_native(const FlagSpec& spec, std::string_view value) const {
    if (spec.effect == Effect::GpuArch) return gpu_value_is_native(value);
    for (std::string_view tok : split_option_list(value)) {
      if (is_machine_native(tok)) return true;
    }
    return false;
  }

  // A flag outside the table.
  void scan_unknown(const Arg& a) {
    const std::string_view t = a.text;
    // -march=native and friends refuse even when allow-listed (spec): one key, different objects.
    if (is_machine_native(t)) {
      refuse("machine-native", std::string(t));
      return;
    }
    if (allowlisted(t)) {
      // With -forward-unknown-to-host-compiler nvcc hands it to the host compiler; the allow-list
      // never admits a host flag that hides inputs (spec).
      if (auto r = hidden_host_input(t)) {
        refuse(r->reason, std::string(t));
      }
      return;  // keyed verbatim as part of the user's args (or the env string)
    }
    refuse(a.origin != Origin::User ? "env-flag" : "unknown-flag", std::string(t));
  }

  void apply(const FlagMatch& m, const Arg& a, std::optional<std::string_view> value,
             std::optional<std::size_t> value_index, const std::string& shown, bool vouched) {
    const FlagSpec& spec = *m.spec;
    const bool user = a.origin == Origin::User;
    if (spec.path_value && user && value) {
      const std::size_t offset = value_index ? 0 : a.text.size() - value->size();
      found_.path_args.push_back(
          {value_index ? *value_index : a.index, offset, std::string(m.name), path_kind(spec.effect)});
    }
    const CompilePlan::ArgRef ref{a.index, std::string(m.name), value_index.has_value()};
    switch (spec.effect) {
      case Effect::Keyed:
      case Effect::LinkOptions:
        break;
      case Effect::Compile:
      case Effect::DeviceCompile:
      case Effect::DeviceOutput:
      case Effect::LinkTimeOpt:
      case Effect::Rdc:
      case Effect::Output:
      case Effect::Language:
      case Effect::HostCompiler:
        apply_what_is_built(m, a, value, ref, shown);
        break;
      case Effect::GpuArch:
      case Effect::HostOptions:
      case Effect::PtxasOptions:
      case Effect::CudafeOptions:
        apply_forwarded(m, a, value, value_index, shown, vouched);
        break;
      case Effect::IncludeDir:
        // nvcc accepts comma-separated lists in one value.
        if (value) split_include_dirs(*value);
        break;
      case Effect::ForcedInclude:
        found_.has_forced_include = true;
        break;
      case Effect::ObjTemp:
        if (user) found_.has_objtemp = true;
        break;
      case Effect::HostDebug:
        has_debug_ = true;
        break;
      case Effect::LineInfo:
        has_lineinfo_ = true;
        path_literal_ = true;
        break;
      case Effect::DepWithCompile:
      case Effect::DepNonSystem:
      case Effect::DepOutput:
      case Effect::DepTarget:
        apply_depfile(m, a, value, ref);
        break;
      case Effect::Refuse:
        refuse(spec.reason, shown);
        break;
    }
  }

  // -c, -dc, the device outputs, -dlto, -rdc, -o, -x, -ccbin: what the compile builds, and from what.
  void apply_what_is_built(const FlagMatch& m, const Arg& a, std::optional<std::string_view> value,
                           const CompilePlan::ArgRef& ref, const std::string& shown) {
    const bool user = a.origin == Origin::User;
    switch (m.spec->effect) {
      case Effect::Compile:
        has_compile_ = true;
        if (user) found_.mode_args.push_back(a.index);
        break;
      case Effect::DeviceCompile:
        has_device_compile_ = true;
        if (user) found_.mode_args.push_back(a.index);
        break;
      case Effect::DeviceOutput:
        apply_device_output(m, shown);
        break;
      case Effect::LinkTimeOpt:
        if (!lto_flag_) lto_flag_ = shown;
        break;
      case Effect::Rdc:
        if (value != "true" && value != "false") {
          refuse("unknown-flag", shown);  // nvcc accepts only true/false
        } else {
          rdc_ = *value;
        }
        break;
      case Effect::Output:
        if (!user || !value) break;  // never env_ok: an env -o is refused earlier
        found_.output_args.push_back(ref);
        output_ = std::string(*value);
        output_index_ = ref.separate ? ref.index + 1 : a.index;
        output_prefix_.reset();
        if (!ref.separate) output_prefix_ = std::string(m.name) + "=";
        break;
      case Effect::Language:
        if (value) language_ = std::string(*value);
        break;
      case Effect::HostCompiler:
        if (value) ccbin_ = std::string(*value);
        break;
      default:
        break;
    }
  }

  void apply_device_output(const FlagMatch& m, const std::string& shown) {
    if (!options_.cache_device_outputs) {
      refuse("output-kind", shown);  // spec 000's behaviour, kept behind nvcc.cache_device_outputs
      return;
    }
    const DeviceOutput kind = m.name.ends_with("fatbin")  ? DeviceOutput::Fatbin
                              : m.name.ends_with("cubin") ? DeviceOutput::Cubin
                                                          : DeviceOutput::Ptx;
    // Two kinds on one line: nvcc picks one of them (no error); not modeled.
    if (device_output_ != DeviceOutput::None && device_output_ != kind) refuse("output-kind", shown);
    device_output_ = kind;
    if (!device_output_flag_) device_output_flag_ = shown;
  }

  // -arch/-code/-gencode and the option lists nvcc hands to the host compiler, ptxas and cudafe++.
  void apply_forwarded(const FlagMatch& m, const Arg& a, std::optional<std::string_view> value,
                       std::optional<std::size_t> value_index, const std::string& shown, bool vouched) {
    if (!value) return;
    auto forwarded_refusal = [&](const std::optional<FlagRefusal>& r) {
      if (r) refuse(r->reason, std::string(m.name) + " " + r->flag);
    };
    switch (m.spec->effect) {
      case Effect::GpuArch:
        if (gpu_value_is_native(*value)) {
          refuse("machine-native", shown);
          break;
        }
        if (gpu_value_is_lto(*value) && !lto_arch_) lto_arch_ = shown;
        // The user's own arch flags; NVCC_*_FLAGS ones reach every nvcc run through the environment.
        if (a.origin == Origin::User) {
          gpu_arch_args_.emplace_back(a.text);
          if (value_index) gpu_arch_args_.emplace_back(*value);
        }
        break;
      case Effect::HostOptions:
        forwarded_refusal(check_host_options(*value, &has_debug_, &options_.extra_allowlist));
        break;
      case Effect::PtxasOptions:
        forwarded_refusal(check_ptxas_options(*value));
        break;
      case Effect::CudafeOptions:
        if (value_is_native(*m.spec, *value)) {
          refuse("machine-native", shown);
        } else if (!vouched) {
          forwarded_refusal(check_cudafe_options(*value));
        }
        break;
      default:
        break;
    }
  }

  // -MD, -MMD, -MF, -MT.
  void apply_depfile(const FlagMatch& m, const Arg& a, std::optional<std::string_view> value,
                     const CompilePlan::ArgRef& ref) {
    const bool user = a.origin == Origin::User;
    switch (m.spec->effect) {
      case Effect::DepWithCompile:
        if (!dep_flag_) dep_flag_ = std::string(m.name);
        if (user) found_.mode_args.push_back(a.index);
        break;
      case Effect::DepNonSystem:
        nonsystem_ = true;
        dep_flag_ = std::string(m.name);
        if (user) found_.mode_args.push_back(a.index);
        break;
      case Effect::DepOutput:
        if (!value) break;
        depfile_path_ = std::string(*value);
        depfile_flag_ = std::string(m.name);
        if (user) found_.depfile_args.push_back(ref);
        break;
      case Effect::DepTarget:
        if (value) depfile_targets_.emplace_back(*value);
        if (value && user) found_.dep_target_args.push_back(ref);
        break;
      default:
        break;
    }
  }

  static CompilePlan::PathKind path_kind(Effect e) {
    switch (e) {
      case Effect::IncludeDir: return CompilePlan::PathKind::List;
      case Effect::DepOutput: return CompilePlan::PathKind::Depfile;
      case Effect::DepTarget: return CompilePlan::PathKind::Target;
      case Effect::HostOptions: return CompilePlan::PathKind::HostOptions;
      default: return CompilePlan::PathKind::Path;
    }
  }

  void split_include_dirs(std::string_view value) {
    std::size_t start = 0;
    while (true) {
      const std::size_t comma = value.find(',', start);
      const std::size_t end = comma == std::string_view::npos ? value.size() : comma;
      found_.include_dirs.emplace_back(value.substr(start, end - start));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
  }

  Plan decide() {
    if (refusals_.phase) return *refusals_.phase;
    const bool device_output = device_output_ != DeviceOutput::None;
    if (lto_flag_) return Passthrough{device_output ? "device-ir" : "output-kind", *lto_flag_};
    // -c or -dc with a device output: the device file comes out (measured), not an object; not modeled.
    if (device_output && (has_compile_ || has_device_compile_)) return Passthrough{"output-kind", *device_output_flag_};
    // lto_NN device code is NVVM IR, in a device output or inside an object's .nv_fatbin (measured: two
    // build directories give objects that differ there).
    if (lto_arch_) return Passthrough{"device-ir", *lto_arch_};
    if (!device_output && !has_compile_ && !has_device_compile_) {
      return Passthrough{"link", "no -c or -dc"};
    }
    if (refusals_.flag) return *refusals_.flag;
    if (positionals_.empty()) return Passthrough{"no-source", "no input file"};
    if (positionals_.size() > 1) return Passthrough{"multiple-sources", args_[positionals_[1]]};
    const std::size_t source_index = positionals_[0];
    const std::string& source = args_[source_index];
    const bool cuda = language_ ? *language_ == "cu" : source.ends_with(".cu");
    if (!cuda) return Passthrough{"non-cuda-source", language_ ? source + " (-x " + *language_ + ")" : source};
    // An empty -o / -MF value names no file (nvcc's host compiler rejects it): nothing to store.
    if (!output_ || output_->empty()) return Passthrough{"no-output", output_ ? "-o \"\"" : "no -o"};
    // "-" is stdout to nvcc (-o -, -o=-, --output-file=-, measured with nvcc 13), not a file to store.
    if (*output_ == "-") return Passthrough{"output-kind", output_prefix_.value_or("-o ") + "-"};
    if (dep_flag_ && (!depfile_path_ || depfile_path_->empty())) return Passthrough{"depfile-without-mf", *dep_flag_};
    // nvcc itself rejects -MF without -M/-MM/-MD/-MMD; a miss that adds kache's own -MD would not.
    if (!dep_flag_ && depfile_path_) return Passthrough{"depfile-modifier", *depfile_flag_};

    CompilePlan p = std::move(found_);
    p.mode = has_device_compile_ ? Mode::DeviceCompile : (rdc_ == "true" ? Mode::CompileRdc : Mode::Compile);
    p.device_output = device_output_;
    p.source = source;
    p.output = *output_;
    if (dep_flag_) {
      p.depfile = nonsystem_ ? Depfile::MMD : Depfile::MD;
      p.depfile_path = *depfile_path_;
    }
    p.depfile_targets = depfile_targets_;
    p.args = args_;
    p.keyed_args = args_;
    p.keyed_args[source_index] = "<source>";
    p.keyed_args[output_index_] = output_prefix_ ? *output_prefix_ + "<output>" : "<output>";
    p.prepend_flags = options_.prepend_flags;
    p.append_flags = options_.append_flags;
    p.ccbin = ccbin_;
    p.gpu_arch_args = gpu_arch_args_;
    p.path_literal = path_literal_;
    p.has_lineinfo = has_lineinfo_;
    p.has_debug = has_debug_;
    return p;
  }

  const std::vector<FlagSpec>& table_;
  const std::vector<std::string>& args_;
  const PlanOptions& options_;
  std::vector<std::string> prepend_, append_;
  std::vector<Arg> all_;

  Refusals refusals_{is_phase_reason, std::nullopt, std::nullopt};
  bool has_compile_ = false, has_device_compile_ = false;
  DeviceOutput device_output_ = DeviceOutput::None;
  std::optional<std::string> device_output_flag_;   // the first device output flag, as written
  std::optional<std::string> lto_flag_, lto_arch_;  // -dlto (or a spelling), an lto_NN target
  std::string_view rdc_;
  std::optional<std::string> language_, output_, ccbin_;
  std::size_t output_index_ = 0;
  std::optional<std::string> output_prefix_;  // "--output-file=" when the value was attached by '='
  std::vector<std::size_t> positionals_;
  std::optional<std::string> dep_flag_, depfile_path_, depfile_flag_;
  bool nonsystem_ = false;  // -MMD wins over -MD whatever the order (measured)
  std::vector<std::string> depfile_targets_;
  std::vector<std::string> gpu_arch_args_;
  // What the scan records straight into the plan: positions, include dirs, path values.
  CompilePlan found_;
  bool path_literal_ = false, has_lineinfo_ = false, has_debug_ = false;
};

}  // namespace

Plan plan_with_table(const std::vector<FlagSpec>& table, const std::vector<std::string>& args,
                     const PlanOptions& options) {
  return Planner(table, args, options).run();
}

Plan plan(const std::vector<std::string>& args, const PlanOptions& options) {
  return plan_with_table(flag_table(), args, options);
}

const char* device_output_name(DeviceOutput kind) {
  switch (kind) {
    case DeviceOutput::Fatbin:
      return "fatbin";
    case DeviceOutput::Cubin:
      return "cubin";
    case DeviceOutput::Ptx:
      return "ptx";
    case DeviceOutput::None:
      break;
  }
  return "";
}

bool is_nvcc(const std::string& argv0) {
  std::string_view name = argv0;
  if (auto slash = name.find_last_of("/\\"); slash != std::string_view::npos) name.remove_prefix(slash + 1);
  if (name == "nvcc") return true;
  // Windows file names ignore case.
  if (name.size() != 8) return false;
  std::string lower;
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower == "nvcc.exe";
}

std::vector<std::string> split_env_flags(const std::string& value) {
  std::vector<std::string> out;
  std::size_t i = 0;
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; };
  while (i < value.size()) {
    while (i < value.size() && space(value[i])) ++i;
    std::size_t start = i;
    while (i < value.size() && !space(value[i])) ++i;
    if (i > start) out.push_back(value.substr(start, i - start));
  }
  return out;
}

}  // namespace kache::compiler::nvcc
