#include "compiler/argument_facts.hpp"

#include <algorithm>
#include <cctype>
#include <initializer_list>

#include "compiler/gcc/plan.hpp"
#include "util/hash.hpp"

namespace kache::compiler {

namespace {

// Calls each(token) for every token of text split at ',', ' ' and '=' ("-flto=auto" reads as "-flto",
// then "auto"; nvcc's "-Xcompiler=-O2,-g3" as "-Xcompiler", "-O2", "-g3").
template <class Each>
void for_each_token(std::string_view text, Each&& each) {
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t end = std::min(text.find_first_of(", =", start), text.size());
    each(text.substr(start, end - start));
    start = end + 1;
  }
}

// Whether text holds option (a whole token: preceded by a start, ',', '=' or ' ' and followed by the
// end, ',', ' ' or '=') with a value other than "=none" when value_none_is_off.
bool holds_option(std::string_view text, std::string_view option, bool value_none_is_off) {
  for (std::size_t hit = text.find(option); hit != std::string_view::npos; hit = text.find(option, hit + 1)) {
    const char before = hit == 0 ? ',' : text[hit - 1];
    const std::size_t end = hit + option.size();
    const char after = end == text.size() ? ',' : text[end];
    if (std::string_view(", =").find(before) == std::string_view::npos) continue;
    if (std::string_view(", =").find(after) == std::string_view::npos) continue;
    if (value_none_is_off && text.compare(end, 5, "=none") == 0 &&
        (end + 5 == text.size() || text[end + 5] == ',' || text[end + 5] == ' ')) {
      continue;
    }
    return true;
  }
  return false;
}

bool any_holds(const std::vector<std::string_view>& texts, std::initializer_list<std::string_view> options,
               bool value_none_is_off) {
  return std::any_of(options.begin(), options.end(), [&](std::string_view o) {
    return std::any_of(texts.begin(), texts.end(), [&](std::string_view t) { return holds_option(t, o, value_none_is_off); });
  });
}

bool scannable_charset(std::string_view option, std::string value) {
  std::transform(value.begin(), value.end(), value.begin(), [](unsigned char c) { return std::toupper(c); });
  if (option == "-fexec-charset=") return value == "UTF-8" || value == "UTF8";
  for (std::string_view family : {"UTF-16", "UTF-32", "UCS-2", "UCS-4", "UTF16", "UTF32", "UCS2", "UCS4"}) {
    for (std::string_view order : {"", "LE", "BE"}) {
      if (value == std::string(family) + std::string(order)) return true;
    }
  }
  return false;
}

bool names_foreign_charset(std::string_view text) {
  for (std::string_view option : {"-fexec-charset=", "-fwide-exec-charset="}) {
    for (std::size_t hit = text.find(option); hit != std::string_view::npos; hit = text.find(option, hit + 1)) {
      const std::size_t begin = hit + option.size();
      const std::size_t end = std::min(text.find_first_of(", ", begin), text.size());
      if (!scannable_charset(option, std::string(text.substr(begin, end - begin)))) return true;
    }
  }
  return false;
}

// -g3, -ggdb3 and the other level-3 spellings, clang's -fdebug-macro.
bool asks_macro_debug_info(std::string_view token) {
  if (token == "-fdebug-macro") return true;
  if (!token.starts_with("-g") || !token.ends_with('3')) return false;
  const std::string_view kind = token.substr(2, token.size() - 3);  // "" in -g3, "gdb" in -ggdb3
  for (std::string_view k : {"", "gdb", "stabs", "stabs+", "xcoff", "xcoff+", "vms", "coff", "dwarf"}) {
    if (kind == k) return true;
  }
  return false;
}

// One option as the command-line recording reads it (a comma-list element, or the value after '=').
void read_recording_option(std::string_view a, ArgumentFacts& f) {
  if (a == "-frecord-gcc-switches" || a == "-frecord-command-line") f.records_switches = true;
  else if (a == "-fno-record-gcc-switches" || a == "-fno-record-command-line") f.records_switches = false;
  else if (a == "-grecord-gcc-switches" || a == "-grecord-command-line") f.debug_records_switches = true;
  else if (a == "-gno-record-gcc-switches" || a == "-gno-record-command-line") f.debug_records_switches = false;
  else if (a == "-g0") f.debug_info = false;
  // nvcc's -gencode, -gen-opt-lto, -gpu-architecture are no debug options; -gz only compresses.
  else if ((a.starts_with("-g") && !a.starts_with("-gen") && !a.starts_with("-gpu") && !a.starts_with("-gno-") &&
            !a.starts_with("-gz")) ||
           a == "--debug")
    f.debug_info = true;
}

// What the object records of its command line: each argument's comma-list elements, then the value
// after its first '=' (-Xcompiler=-g).
void read_recording(const std::vector<std::string>& args, ArgumentFacts& f) {
  for (const std::string& arg : args) {
    std::string_view rest = arg;
    while (true) {
      const std::size_t comma = rest.find(',');
      read_recording_option(rest.substr(0, comma), f);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    if (const std::size_t eq = arg.find('='); eq != std::string::npos) {
      read_recording_option(std::string_view(arg).substr(eq + 1), f);
    }
  }
}

// The facts read from whole arguments, each as the driver sees it.
void read_whole_arguments(const std::vector<std::string>& args, ArgumentFacts& f) {
  for (const std::string& a : args) {
    if (a.starts_with("-fdiagnostics-color") || a.starts_with("-fno-diagnostics-color") ||
        a == "-fcolor-diagnostics" || a == "-fno-color-diagnostics") {
      f.colour_option = a;
    }
    if (a.find("--MD") != std::string::npos) f.assembler_depfile = true;
    // nvcc's -gencode, -gen-opt-lto, -gpu-architecture are no debug options.
    if (a.starts_with("-g") && !a.starts_with("-gen") && !a.starts_with("-gpu") && debug_option_enables(a)) {
      f.debug_option = true;
    }
    if (a == "--coverage" || a == "-fprofile-arcs" || a == "-ftest-coverage" || a.starts_with("-fprofile-generate") ||
        a.starts_with("-fprofile-instr-generate") || a == "-fcoverage-mapping") {
      f.coverage = true;
    }
  }
}

// The OLD of each -ffile-prefix-map/-fdebug-prefix-map found in the comma-list elements of args.
void read_debug_map_olds(const std::vector<std::string>& args, ArgumentFacts& f) {
  for (const auto& arg : args) {
    for (std::size_t start = 0; start <= arg.size();) {
      const std::size_t end = std::min(arg.find(',', start), arg.size());
      const std::string_view option = std::string_view(arg).substr(start, end - start);
      start = end + 1;
      std::size_t at = std::string_view::npos;
      for (std::string_view kind : {"-ffile-prefix-map=", "-fdebug-prefix-map="}) {
        if (const std::size_t hit = option.find(kind); hit != std::string_view::npos) {
          at = hit + kind.size();
          break;
        }
      }
      if (at == std::string_view::npos) continue;
      const std::size_t eq = option.find('=', at);
      if (eq != std::string_view::npos) f.debug_map_olds.emplace_back(option.substr(at, eq - at));
    }
  }
}

// The facts read token by token (for_each_token) from the arguments and the flag variables.
void read_tokens(const std::vector<std::string_view>& texts, ArgumentFacts& f) {
  for (std::string_view text : texts) {
    for_each_token(text, [&](std::string_view token) {
      if (token == "-flto") f.lto = true;
      if (token == "-fno-lto") f.lto = false;
      if (asks_macro_debug_info(token)) f.macro_debug_info = true;
    });
  }
}

}  // namespace

ArgumentFacts read_argument_facts(const std::vector<std::string>& args, const FlagVariables& variables) {
  ArgumentFacts f;
  // NVCC_PREPEND_FLAGS, the arguments, NVCC_APPEND_FLAGS: the order nvcc reads them in (the last -flto
  // or -fno-lto wins).
  std::vector<std::string_view> texts = {variables.prepended};
  texts.insert(texts.end(), args.begin(), args.end());
  texts.emplace_back(variables.appended);
  read_recording(args, f);
  read_whole_arguments(args, f);
  read_debug_map_olds(args, f);
  read_tokens(texts, f);
  f.user_debug_maps = any_holds(
      texts, {"-ffile-prefix-map", "-fdebug-prefix-map", "-fdebug-compilation-dir", "-ffile-compilation-dir"}, false);
  f.compressed_debug = any_holds(texts, {"-gz", "--compress-debug-sections", "-compress-debug-sections"}, true);
  f.foreign_charset = std::any_of(texts.begin(), texts.end(), [](std::string_view t) { return names_foreign_charset(t); });
  f.prefix_map_prepended = variables.prepended.find("-prefix-map") != std::string::npos;
  return f;
}

bool debug_option_enables(std::string_view option) { return option != "-g0" && !option.starts_with("-gno-"); }

std::optional<PrefixMap> parse_prefix_map(std::string_view arg) {
  for (std::string_view kind : {"-ffile-prefix-map=", "-fmacro-prefix-map=", "-fdebug-prefix-map="}) {
    if (!arg.starts_with(kind)) continue;
    const std::size_t eq = arg.find('=', kind.size());
    if (eq == std::string_view::npos) return std::nullopt;
    return PrefixMap{kind, arg.substr(kind.size(), eq - kind.size()), arg.substr(eq + 1)};
  }
  return std::nullopt;
}

bool is_prefix_map(std::string_view arg) {
  return arg.starts_with("-fdebug-prefix-map=") || arg.starts_with("-ffile-prefix-map=") ||
         arg.starts_with("-fmacro-prefix-map=");
}

std::vector<std::string> macro_map_olds(const std::vector<std::string>& args) {
  std::vector<std::string> olds;
  for (const auto& a : args) {
    if (auto rule = parse_prefix_map(a); rule && rule->maps_macros()) olds.emplace_back(rule->old_path);
  }
  return olds;
}

bool names_cuda_input(const std::vector<std::string>& args) {
  std::string x_language;
  bool cu_source = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-x" && i + 1 < args.size()) {
      x_language = args[++i];
    } else if (a.starts_with("-x") && a.size() > 2) {
      x_language = a.substr(2);
    } else if (!a.starts_with('-') && gcc::language_of(a) == "cuda" && x_language.empty()) {
      cu_source = true;
    }
    if (x_language == "cuda") return true;
  }
  return cu_source;
}

std::vector<std::string> cuda_paths(const std::vector<std::string>& args) {
  std::vector<std::string> dirs;
  for (const auto& a : args) {
    if (a.starts_with("--cuda-path=")) dirs.push_back(a.substr(12));
  }
  return dirs;
}

bool skips_cuda_wrapper_headers(const std::vector<std::string>& args) {
  return std::find(args.begin(), args.end(), "-nocudainc") != args.end();
}

bool names_hip_input(const std::vector<std::string>& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-xhip" || (a == "-x" && i + 1 < args.size() && args[i + 1] == "hip")) return true;
    if (a.starts_with("--offload-arch=") || (!a.starts_with('-') && a.ends_with(".hip"))) return true;
  }
  return false;
}

std::string macro_definitions(const std::vector<std::string>& keyed_words) {
  std::string out;
  bool next = false;
  for (const std::string& value : keyed_words) {
    if (next) out += "#define " + value + "\n";
    next = value == "-D" || value == "--define-macro";
    for (std::string_view flag : {"-D", "--define-macro="}) {
      for (std::size_t at = value.find(flag); at != std::string::npos; at = value.find(flag, at + 1)) {
        if (at > 0 && std::string_view(" ,=").find(value[at - 1]) == std::string_view::npos) continue;
        out += "#define " + value.substr(at + flag.size()) + "\n";
      }
    }
  }
  return out;
}

bool defines_macro(std::string_view arg) {
  return arg.starts_with("-D") || arg.starts_with("--define-macro") || arg.find(",-D") != std::string_view::npos ||
         arg.find("=-D") != std::string_view::npos;
}

namespace {

// Where the macro name of a definition inside `arg` starts (after "-D", "--define-macro" and any '='
// or space), or npos when arg defines none.
std::size_t defined_name_at(std::string_view arg) {
  std::size_t at = std::string_view::npos;
  if (arg.starts_with("--define-macro")) {
    at = 14;
  } else if (arg.starts_with("-D")) {
    at = 2;
  } else {
    for (const std::string_view glue : {"=-D", ",-D", " -D"}) {
      const std::size_t found = arg.find(glue);
      if (found != std::string_view::npos && (at == std::string_view::npos || found + 3 < at)) at = found + 3;
    }
  }
  while (at != std::string_view::npos && at < arg.size() && (arg[at] == '=' || arg[at] == ' ')) ++at;
  return at;
}

bool is_identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

}  // namespace

std::string argument_name(std::string_view arg) {
  if (const std::size_t at = defined_name_at(arg); at != std::string_view::npos) {
    std::size_t end = at;
    while (end < arg.size() && is_identifier_char(arg[end])) ++end;
    return "-D" + std::string(arg.substr(at, end - at));
  }
  if (!arg.starts_with('-')) return "a value";
  // Flags that take their value glued on ("-Isecret_dir"), longest spelling first.
  static constexpr std::string_view kGlued[] = {"-iwithprefixbefore", "-iwithprefix", "-idirafter", "-isysroot",
                                                "-isystem", "-iprefix", "-imacros", "-include", "-iquote",
                                                "-MF", "-MT", "-MQ", "-I", "-L", "-l", "-U", "-B", "-o"};
  for (const std::string_view flag : kGlued) {
    if (arg.starts_with(flag)) return std::string(flag);
  }
  return std::string(arg.substr(0, arg.find_first_of("=,/ ")));
}

std::string without_define_values(std::string_view arg) {
  const std::size_t at = defined_name_at(arg);
  if (at == std::string_view::npos) return std::string(arg);
  std::size_t end = at;
  while (end < arg.size() && is_identifier_char(arg[end])) ++end;
  if (end == arg.size()) return std::string(arg);  // -DNAME: no value
  // Everything after the name may be the value or hold another definition: one digest for all of it.
  return std::string(arg.substr(0, end)) + "=#" + util::sha256(arg.substr(end)).hex().substr(0, 16);
}

}  // namespace kache::compiler
