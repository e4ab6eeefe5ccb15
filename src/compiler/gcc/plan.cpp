#include "compiler/gcc/plan.hpp"

#include <algorithm>
#include <cctype>

#include "compiler/argument_facts.hpp"
#include "compiler/common.hpp"
#include "compiler/gcc/flag_table.hpp"
#include "compiler/gcc/host_rules.hpp"
#include "util/fs.hpp"

namespace kache::compiler::gcc {

namespace {

// Reasons that say what the whole invocation is; they win over a refused flag elsewhere on the line.
bool is_phase_reason(std::string_view r) {
  return r == "informational" || r == "link" || r == "output-kind" || r == "preprocess" || r == "dependency-only" ||
         r == "response-file";
}

std::string suffix_of(const std::string& path) {
  const std::string base = util::basename(path);
  const auto dot = base.rfind('.');
  return dot == std::string::npos || dot == 0 ? "" : base.substr(dot + 1);
}

// "dir/x.cpp" -> "x.o" (the driver's %b.o), "out/x.o" -> "out/x.d" (its %.d for -MD).
std::string replace_suffix(const std::string& path, const std::string& suffix) {
  const std::size_t slash = path.rfind('/');
  const std::size_t dot = path.rfind('.');
  const bool has_suffix = dot != std::string::npos && (slash == std::string::npos || dot > slash + 1);
  return (has_suffix ? path.substr(0, dot) : path) + suffix;
}

class Planner {
 public:
  Planner(const std::vector<std::string>& args, const std::vector<std::string>& allowlist, PlanExtension* extension)
      : args_(args), allowlist_(allowlist), extension_(extension) {}

  Plan run() {
    for (std::size_t i = 0; i < args_.size(); ++i) i = scan(i);
    return decide();
  }

 private:
  void refuse(std::string_view reason, std::string detail) { refusals_.add(reason, std::move(detail)); }

  bool allowlisted(std::string_view arg) const { return allowlist_names(allowlist_, arg); }

  std::size_t scan(std::size_t i) {
    const std::string& t = args_[i];
    if (t.starts_with('@')) {
      refuse("response-file", t);
      return i;
    }
    if (t == "-") {
      refuse("stdin", t);
      return i;
    }
    // An empty argument is an input file named "" to the driver (it fails to open it); not a source
    // kache can name (found by fuzz_gcc_plan: `-x c++ -c ""` planned a compile of "").
    if (t.empty()) {
      refuse("no-source", "empty argument");
      return i;
    }
    if (t[0] != '-') {
      inputs_.push_back({i, language_});
      return i;
    }
    // The extending driver's rows first (its --offload-arch=native is its own reason).
    if (extension_) {
      if (auto c = extension_->scan(args_, i)) {
        if (c->refusal) refuse(c->refusal->reason, c->refusal->detail);
        return c->last;
      }
    }
    // -march=native / -mtune=native / -mcpu=native: objects that depend on the machine. A plain gcc or
    // clang compile keys what the driver expands them to here (the adapter asks it, per processor:
    // gcc::native_expansion); a driver that extends GCC's (hipcc, clang's offload) refuses them.
    if (is_machine_native(t)) {
      if (extension_) refuse("machine-native", t);
      machine_native_.push_back(t);
      return i;
    }
    std::optional<FlagMatch> m = find_flag(t);
    if (!m) {
      if (!allowlisted(t)) refuse("unknown-flag", t);
      return i;
    }
    const GccFlag& f = *m->flag;
    std::string value;
    std::size_t last = i;
    bool separate = false;
    if (f.shape == Shape::Value || f.shape == Shape::Separate) {
      if (m->attached) {
        value = std::string(*m->attached);
      } else {
        if (i + 1 >= args_.size()) {
          refuse("unknown-flag", t + " (missing value)");
          return i;
        }
        value = args_[i + 1];
        last = i + 1;
        separate = true;
      }
    }
    apply(f, t, i, value, separate);
    return last;
  }

  // What the flag at i means for the plan: f its row, value its value (the next argument when separate).
  void apply(const GccFlag& f, const std::string& t, std::size_t i, const std::string& value, bool separate) {
    const std::size_t last = separate ? i + 1 : i;
    // Where the value sits: the next argument, or the tail of this one.
    const CompilePlan::PathValue value_at{separate ? last : i, separate ? 0 : t.size() - value.size()};
    switch (f.effect) {
      case Effect::Keyed:
        if (t == "-MP") {
          dep_flag_args_.push_back(i);
          has_phony_targets_ = true;
        }
        break;
      case Effect::Define:
        break;
      case Effect::Compile:
        has_compile_ = true;
        break;
      case Effect::Output:
        ++outputs_;
        output_ = value;
        output_index_ = separate ? last : i;
        output_attached_ = !separate;
        output_arg_ = CompilePlan::ArgRef{i, !separate};
        break;
      case Effect::Language:
        language_ = value == "none" ? "" : value;
        break;
      case Effect::IncludeDir:
        include_dirs_.push_back(value);
        path_values_.push_back(value_at);
        break;
      case Effect::ForcedInclude:
        forced_includes_.push_back(value);
        path_values_.push_back(value_at);
        break;
      case Effect::Debug:
        if (debug_option_enables(t)) has_debug_ = true;
        break;
      case Effect::DepMD:
        if (depfile_ == Depfile::None) depfile_ = Depfile::MD;
        dep_flag_args_.push_back(i);
        break;
      case Effect::DepMMD:
        depfile_ = Depfile::MMD;  // wins over -MD in either order, as for nvcc and cc1
        dep_flag_args_.push_back(i);
        break;
      case Effect::DepFile:
        depfile_path_ = value;
        path_values_.push_back(value_at);
        depfile_arg_ = CompilePlan::ArgRef{i, !separate};
        break;
      case Effect::DepTarget:
        has_dep_target_ = true;
        path_values_.push_back(value_at);
        dep_target_args_.push_back({i, !separate});
        break;
      case Effect::DriverPrefix:
        driver_prefixes_.push_back(value);
        path_values_.push_back(value_at);
        break;
      case Effect::Refuse:
        refuse(f.reason, separate ? t + " " + value : t);
        break;
    }
  }

  Plan decide() {
    if (refusals_.phase) return *refusals_.phase;
    if (!has_compile_ && !(extension_ && extension_->compiles())) return Passthrough{"link", "no -c"};
    if (refusals_.flag) return *refusals_.flag;
    if (inputs_.empty()) return Passthrough{"no-source", "no input file"};
    if (inputs_.size() > 1) return Passthrough{"multiple-sources", args_[inputs_[1].index]};
    if (outputs_ > 1) return Passthrough{"multiple-outputs", "-o given twice"};
    const Input& in = inputs_[0];
    const std::string& source = args_[in.index];
    std::string language = in.language.empty() ? language_of(source) : in.language;
    // The extending driver's own language (hip, clang's cuda); the output and depfile rules below are
    // GCC's for it too.
    bool extension_language = false;
    if (extension_) {
      if (std::string own = extension_->language(source, in.language, language_of(source)); !own.empty()) {
        language = own;
        extension_language = true;
      }
    }
    if (!extension_language && (language == "cuda" || (in.language.empty() && suffix_of(source) == "cu"))) {
      return Passthrough{"clang-cuda", source};
    }
    if (language == "c-header" || language == "c++-header") return Passthrough{"pch", source};
    if (!extension_language && language != "c" && language != "c++" && language != "assembler-with-cpp") {
      return Passthrough{"language", source + (language.empty() ? "" : " (" + language + ")")};
    }
    if (output_ && (output_->empty() || *output_ == "-")) return Passthrough{"output-kind", "-o " + *output_};
    if (depfile_ == Depfile::None && depfile_path_) return Passthrough{"depfile-modifier", "-MF without -MD/-MMD"};
    // gcc 12 fails ("to generate dependencies you must specify either '-M' or '-MM'") where clang ignores
    // them: the compiler decides, uncached (found by test_differential_cc.py).
    if (depfile_ == Depfile::None && (has_phony_targets_ || has_dep_target_)) {
      return Passthrough{"depfile-modifier", "-MP/-MT/-MQ without -MD/-MMD"};
    }
    if (depfile_path_ && depfile_path_->empty()) return Passthrough{"depfile-modifier", "-MF \"\""};
    // GCC and clang write "-MF -" to stdout (measured with gcc 12); a stored result would be a file "-".
    if (depfile_path_ && *depfile_path_ == "-") return Passthrough{"output-kind", "-MF -"};

    CompilePlan p;
    p.source = source;
    p.source_index = in.index;
    p.language = language;
    p.output_implied = !output_;
    // The driver's %b.o: the source's base name, suffix replaced, in the working directory.
    p.output = output_ ? *output_ : replace_suffix(util::basename(source), ".o");
    p.depfile = depfile_;
    if (depfile_ != Depfile::None) {
      p.depfile_implied = !depfile_path_;
      // gcc and clang name it after the output, suffix replaced by .d (measured: -o sub.o -> sub.d).
      p.depfile_path = depfile_path_ ? *depfile_path_ : replace_suffix(p.output, ".d");
    }
    p.has_dep_target = has_dep_target_;
    p.output_arg = output_arg_;
    p.depfile_arg = depfile_arg_;
    p.dep_target_args = dep_target_args_;
    p.dep_flag_args = dep_flag_args_;
    p.keyed_args = args_;
    p.keyed_args[in.index] = "<source>";
    if (output_) p.keyed_args[output_index_] = output_attached_ ? "-o<output>" : "<output>";
    p.include_dirs = include_dirs_;
    p.forced_includes = forced_includes_;
    p.driver_prefixes = driver_prefixes_;
    p.machine_native = machine_native_;
    p.path_values = path_values_;
    p.has_debug = has_debug_;
    return p;
  }

  struct Input {
    std::size_t index;
    std::string language;  // -x in force where it stood ("" = by suffix)
  };

  const std::vector<std::string>& args_;
  const std::vector<std::string>& allowlist_;
  PlanExtension* extension_;
  Refusals refusals_{is_phase_reason, std::nullopt, std::nullopt};
  std::vector<CompilePlan::PathValue> path_values_;
  bool has_compile_ = false, has_debug_ = false, has_dep_target_ = false, has_phony_targets_ = false;
  std::string language_;
  std::vector<Input> inputs_;
  std::optional<std::string> output_, depfile_path_;
  std::size_t output_index_ = 0, outputs_ = 0;
  bool output_attached_ = false;
  Depfile depfile_ = Depfile::None;
  std::vector<std::string> include_dirs_, forced_includes_, driver_prefixes_, machine_native_;
  std::optional<CompilePlan::ArgRef> output_arg_, depfile_arg_;
  std::vector<CompilePlan::ArgRef> dep_target_args_;
  std::vector<std::size_t> dep_flag_args_;
};

}  // namespace

Plan plan(const std::vector<std::string>& args, const std::vector<std::string>& extra_allowlist,
          PlanExtension* extension) {
  return Planner(args, extra_allowlist, extension).run();
}

std::string language_of(const std::string& path) {
  const std::string s = suffix_of(path);
  if (s == "c") return "c";
  if (s == "cc" || s == "cp" || s == "cxx" || s == "cpp" || s == "CPP" || s == "c++" || s == "C") return "c++";
  if (s == "S" || s == "sx") return "assembler-with-cpp";
  if (s == "s") return "assembler";
  if (s == "i") return "cpp-output";
  if (s == "ii") return "c++-cpp-output";
  if (s == "h") return "c-header";
  if (s == "hh" || s == "hpp" || s == "hxx" || s == "H" || s == "h++" || s == "tcc" || s == "HPP") return "c++-header";
  if (s == "m") return "objective-c";
  if (s == "mm" || s == "M") return "objective-c++";
  if (s == "cu") return "cuda";
  return "";
}

bool is_gcc_driver(const std::string& argv0) {
  std::string_view name = argv0;
  if (auto slash = name.rfind('/'); slash != std::string_view::npos) name.remove_prefix(slash + 1);
  // A version suffix: "-12", "-19", "-12.2".
  if (auto dash = name.rfind('-');
      dash != std::string_view::npos && dash + 1 < name.size() &&
      std::all_of(name.begin() + static_cast<std::ptrdiff_t>(dash) + 1, name.end(),
                  [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '.'; })) {
    name = name.substr(0, dash);
  }
  for (std::string_view driver : {"gcc", "g++", "cc", "c++", "clang", "clang++"}) {
    if (name == driver) return true;
    // A target triple before it: x86_64-linux-gnu-gcc, aarch64-linux-gnu-g++.
    if (name.size() > driver.size() + 1 && name.ends_with(driver) && name[name.size() - driver.size() - 1] == '-') {
      return true;
    }
  }
  return false;
}

}  // namespace kache::compiler::gcc
