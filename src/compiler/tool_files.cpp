#include "compiler/tool_files.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "core/log.hpp"
#include "core/manifest.hpp"
#include "util/beneath.hpp"
#include "util/clock.hpp"
#include "util/lock.hpp"
#include "util/parallel.hpp"
#include "util/process.hpp"
#include "util/shell_words.hpp"

namespace kache::compiler {

void ToolFiles::write(util::Writer& w) const {
  w.u32(static_cast<std::uint32_t>(files.size()));
  for (const auto& f : files) {
    w.str(f.path);
    util::write_identity(w, f.identity, false);
  }
  w.u32(static_cast<std::uint32_t>(bare.size()));
  for (const auto& b : bare) {
    w.str(b.name);
    w.str(b.resolved);
    w.u8(b.past_kache ? 1 : 0);
  }
  w.str(search_path);
  w.u32(static_cast<std::uint32_t>(watched.size()));
  for (const auto& [path, identity] : watched) {
    w.str(path);
    w.str(identity);
  }
}

ToolFiles ToolFiles::read(util::Reader& r) {
  ToolFiles t;
  for (std::uint32_t i = 0, n = r.u32(); i < n; ++i) {
    ToolFile f;
    f.path = r.str();
    f.identity = util::read_identity(r, false);
    t.files.push_back(std::move(f));
  }
  for (std::uint32_t i = 0, n = r.u32(); i < n; ++i) {
    BareName b;
    b.name = r.str();
    b.resolved = r.str();
    b.past_kache = r.u8() != 0;
    t.bare.push_back(std::move(b));
  }
  t.search_path = r.str();
  for (std::uint32_t i = 0, n = r.u32(); i < n; ++i) {
    std::string path = r.str();
    t.watched.emplace_back(std::move(path), r.str());
  }
  return t;
}

namespace {

std::string watched_identity(const std::string& path) {
  auto id = util::stat_identity(path);
  return id ? util::identity_text(*id) : "absent";
}

}  // namespace

bool ToolFiles::still_valid() const {
  // A few stats: every hashed file keeps its identity ...
  for (const auto& f : files) {
    auto id = util::stat_identity(f.path);
    if (!id || !(*id == f.identity)) return false;
  }
  // ... and every bare name still resolves to the same file (a new ptxas or as earlier on the PATH
  // would now be the one the driver runs).
  const std::string cwd = util::current_dir();
  for (const auto& b : bare) {
    auto found = util::find_executable(b.name, search_path, b.past_kache ? util::self_executable() : "");
    if (!found || util::absolute_path(*found, cwd) != b.resolved) return false;
  }
  for (const auto& [path, identity] : watched) {
    if (watched_identity(path) != identity) {
      core::log().debug("toolchain: {} is no longer {}", path, identity);
      return false;
    }
  }
  return true;
}

bool identity_is_racy(const std::string& path, const util::FileIdentity& id, std::int64_t clock) {
  return core::is_racy(id, clock, util::file_time_margin_ns(path));
}

bool ToolFiles::settled(std::int64_t clock) const {
  return std::none_of(files.begin(), files.end(),
                      [&](const ToolFile& f) { return identity_is_racy(f.path, f.identity, clock); });
}

void add_identity(util::Hasher& h, std::string_view name, const std::string& path) {
  auto id = util::stat_identity(path);
  h.add_field(name, id ? util::identity_text(*id) : "absent");
}

namespace {

// "content/" memos written before a given format hold another digest: the format is in their key.
constexpr std::string_view kContentDigestFormat = "xxh3-128";
constexpr std::size_t kContentDigestHexSize = 32;
// Hashing threads: toolchain files are few and large (cicc 76 MB, ptxas 38, cc1plus 35, nvcc 30).
constexpr std::size_t kMaxHashThreads = 4;

std::string content_memo_path(const std::string& memo_dir, const std::string& path, const util::FileIdentity& id) {
  util::Hasher k;
  k.add_field("digest", kContentDigestFormat);
  k.add_field("path", path);
  k.add_field("identity", util::identity_text(id));
  return util::join_path(util::join_path(memo_dir, "content"), k.finish().hex());
}

std::int64_t monotonic_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

}  // namespace

std::string ProbeFiles::resolve(const std::string& word) {
  if (word.find('/') != std::string::npos) return util::absolute_path(word, cwd_);
  auto found = util::find_executable(word, t_.search_path);
  if (!found) return "";
  std::string abs = util::absolute_path(*found, cwd_);
  if (std::none_of(t_.bare.begin(), t_.bare.end(), [&](const BareName& b) { return b.name == word; })) {
    t_.bare.push_back({word, abs});
  }
  return abs;
}

std::string ProbeFiles::resolve_past_kache(const std::string& name) {
  auto found = util::find_executable(name, t_.search_path, util::self_executable());
  if (!found) return "";
  std::string abs = util::absolute_path(*found, cwd_);
  t_.bare.push_back({name, abs, true});
  return abs;
}

void ProbeFiles::watch(const std::string& path) {
  for (const auto& w : t_.watched) {
    if (w.first == path) return;
  }
  t_.watched.emplace_back(path, watched_identity(path));
}

void ProbeFiles::add(const std::string& role, const std::string& path) {
  if (std::any_of(t_.files.begin(), t_.files.end(), [&](const ToolFile& f) { return f.path == path; })) return;
  auto id = util::stat_identity(path);
  if (!id || id->is_dir) return;
  t_.files.push_back({path, *id});
  recorded_.push_back({role, path, *id, ""});
  // The input audits (tests/integration/test_gcc_input_audit.py) read what the toolchain id covers here.
  core::log().trace("toolchain file {} {}", role, path);
}

namespace {

// Wrapper scripts kache reads for the programs they run are small; a larger script is not understood.
constexpr std::size_t kMaxScriptBytes = 64 * 1024;
constexpr int kMaxScriptDepth = 4;

}  // namespace

std::string regular_file_head(const std::string& path, std::size_t n) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat st {};
  std::string head;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    head.resize(std::min<std::size_t>(n, static_cast<std::size_t>(st.st_size)));
    const ssize_t got = ::read(fd, head.data(), head.size());
    head.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
  }
  ::close(fd);
  return head;
}

namespace {

std::vector<std::string> words_of(std::string_view line) {
  std::vector<std::string> words;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    std::size_t end = i;
    while (end < line.size() && line[end] != ' ' && line[end] != '\t') ++end;
    if (end > i) words.emplace_back(line.substr(i, end - i));
    i = end;
  }
  return words;
}

std::string unquoted(std::string word) {
  if (word.size() >= 2 && (word.front() == '"' || word.front() == '\'') && word.back() == word.front()) {
    return word.substr(1, word.size() - 2);
  }
  return word;
}

// Inside a quote at text[i]: appends the character (a backslash and what it escapes, in double quotes)
// to out and ends the quote at its closing character.
void take_quoted(std::string_view text, std::size_t& i, char& quote, std::string& out) {
  const char c = text[i];
  if (c == '\\' && quote == '"' && i + 1 < text.size()) {
    out += c;
    out += text[++i];
    return;
  }
  if (c == quote) quote = 0;
  out += c;
}

// A wrapper's logical lines: backslash-newlines joined, comments dropped (a `#` that starts a word
// outside quotes), blank lines skipped. *open_quote is set when a quote runs past the end.
std::vector<std::string> logical_lines(std::string_view body, bool* open_quote) {
  std::vector<std::string> lines;
  std::string current;
  char quote = 0;
  for (std::size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (quote) {
      take_quoted(body, i, quote, current);
      continue;
    }
    if (c == '\\' && i + 1 < body.size()) {
      if (body[i + 1] != '\n') current += c, current += body[i + 1];
      ++i;
      continue;
    }
    if (c == '\'' || c == '"') quote = c;
    if (c == '#' && (current.empty() || current.back() == ' ' || current.back() == '\t')) {
      while (i + 1 < body.size() && body[i + 1] != '\n') ++i;
      continue;
    }
    if (c == '\n' || c == '\r') {
      if (!words_of(current).empty()) lines.push_back(current);
      current.clear();
      continue;
    }
    current += c;
  }
  if (!words_of(current).empty()) lines.push_back(current);
  *open_quote = quote != 0;
  return lines;
}

// The words of a logical line as the line spells them (quotes kept; util/shell_words.hpp splits them).
// *special gets the first character outside quotes that makes the line more than one simple command or
// redirects it (; | & ( ) < > { }), or 0.
std::vector<std::string> shell_words(std::string_view line, char* special) {
  const util::ShellWords words = util::split_shell_words(line, {.specials = ";|&()<>{}", .expand = {}});
  *special = words.special;
  std::vector<std::string> spelled;
  for (const auto& w : words.words) spelled.push_back(w.raw);
  return spelled;
}

bool is_name(std::string_view s) {
  return !s.empty() && !std::isdigit(static_cast<unsigned char>(s[0])) &&
         std::all_of(s.begin(), s.end(), [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; });
}

// NAME=VALUE: the name, or "" when the word is no assignment.
std::string assigned_name(const std::string& word) {
  const std::size_t eq = word.find('=');
  if (eq == std::string::npos || !is_name(std::string_view(word).substr(0, eq))) return "";
  return word.substr(0, eq);
}

// Whether every expansion in `text` is a name in `own` ($NAME or ${NAME}); a command substitution, a
// backquote, a special or positional parameter or any other name is not. *what names the first that
// is not.
bool expands_only(std::string_view text, const std::vector<std::string>& own, std::string* what) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '`') {
      *what = "a backquote";
      return false;
    }
    if (text[i] != '$') continue;
    const char next = i + 1 < text.size() ? text[i + 1] : '\0';
    if (next == '(') {
      *what = "a command substitution";
      return false;
    }
    std::size_t n = i + 1 + (next == '{' ? 1 : 0);
    std::size_t e = n;
    while (e < text.size() && (std::isalnum(static_cast<unsigned char>(text[e])) || text[e] == '_')) ++e;
    const std::string name(text.substr(n, e - n));
    const bool plain = next != '{' || (e < text.size() && text[e] == '}');
    if (!is_name(name) || !plain || std::find(own.begin(), own.end(), name) == own.end()) {
      *what = "an expansion of " + (name.empty() ? std::string("$") + next : name);
      return false;
    }
  }
  return true;
}

// Arguments a wrapper may add to the program it runs: ones that change no output file and read no
// file kache would not see, since kache plans the compile from the command line it was given, not from
// the wrapper's (a -MD, -save-temps, -gsplit-dwarf, @file or -B there would go unseen). *takes_value is
// set for an option whose value is the next word.
bool harmless_added_argument(const std::string& arg, bool* takes_value) {
  *takes_value = false;
  if (arg == "-ccbin" || arg == "--compiler-bindir") {
    *takes_value = true;  // nvcc's host compiler: the value must be a program kache follows
    return true;
  }
  if (arg.starts_with("-ccbin=") || arg.starts_with("--compiler-bindir=")) return true;
  if (arg.starts_with("-D") || arg.starts_with("-U") || arg.starts_with("-std=") || arg.starts_with("-m")) return true;
  if (arg == "-O" || arg == "-O0" || arg == "-O1" || arg == "-O2" || arg == "-O3" || arg == "-Os" || arg == "-Og" ||
      arg == "-Oz" || arg == "-Ofast" || arg == "-w") {
    return true;
  }
  return arg.starts_with("-W") && !arg.starts_with("-Wa,") && !arg.starts_with("-Wl,") && !arg.starts_with("-Wp,");
}

// The words of a builtin that runs nothing: fine unless a command substitution could run a program or
// the line does more than redirect to stderr or /dev/null.
bool builtin_line_ok(const std::vector<std::string>& words, const std::string& line, std::string* why) {
  for (const auto& w : words) {
    if (w.find("$(") != std::string::npos || w.find('`') != std::string::npos) {
      *why = "a command substitution";
      return false;
    }
    std::string bare;  // the word outside its quotes
    char q = 0;
    for (const char ch : w) {
      if (q == 0 && (ch == '"' || ch == '\'')) {
        q = ch;
      } else if (q != 0 && ch == q) {
        q = 0;
      } else if (q == 0) {
        bare += ch;
      }
    }
    if (bare.find_first_of(";|&()<>{}") != std::string::npos && w != ">&2" && w != "1>&2" && w != ">/dev/null" &&
        w != "2>/dev/null") {
      *why = "`" + line + "`";
      return false;
    }
  }
  return true;
}

// `set` with shell options only: `set -- ...` or `set a b` would change the arguments.
bool set_line_ok(const std::vector<std::string>& words, const std::string& line, std::string* why) {
  static constexpr std::string_view kSetWords[] = {"pipefail", "errexit", "nounset", "xtrace", "noglob"};
  for (std::size_t i = 1; i < words.size(); ++i) {
    const std::string& s = words[i];
    const bool option = s.size() > 1 && (s[0] == '-' || s[0] == '+') && s != "--" &&
                        std::all_of(s.begin() + 1, s.end(), [](char ch) { return std::isalpha(static_cast<unsigned char>(ch)); });
    if (!option && std::find(std::begin(kSetWords), std::end(kSetWords), s) == std::end(kSetWords)) {
      *why = "`" + line + "` (set changes the arguments)";
      return false;
    }
  }
  return true;
}

// One line of a wrapper kache can read (see shell_commands), and what it learnt so far.
class WrapperLines {
 public:
  bool read(const std::string& line) {
    char special = 0;
    const std::vector<std::string> words = shell_words(line, &special);
    const std::string first = unquoted(words[0]);
    static constexpr std::string_view kBuiltins[] = {":", "true", "false", "exit", "echo", "printf", "test", "[", "unset", "umask"};
    if (std::find(std::begin(kBuiltins), std::end(kBuiltins), first) != std::end(kBuiltins)) {
      return builtin_line_ok(words, line, &why);
    }
    if (special) {
      why = std::string("`") + special + "` in `" + line + "` (lists, pipes, redirections, compound commands)";
      return false;
    }
    if (first == "set") return set_line_ok(words, line, &why);
    const bool declaration = first == "export" || first == "readonly";
    std::size_t w = declaration ? 1 : 0;
    std::vector<std::string> assigned;
    if (!assignments(words, w, assigned)) return false;
    if (w < words.size() && !declaration) return command(words, w, line);  // its assignments are its environment
    for (; w < words.size(); ++w) {
      if (!is_name(words[w])) {
        why = "`" + line + "`";
        return false;
      }
    }
    own_.insert(own_.end(), assigned.begin(), assigned.end());
    if (std::find(own_.begin(), own_.end(), "PATH") != own_.end()) {
      why = "it sets PATH";  // bare names are looked up on the probe's PATH
      return false;
    }
    return true;
  }

  std::vector<std::string> commands;
  std::string why;

 private:
  // NAME=VALUE words from w on, each VALUE expanding only names set on earlier lines.
  bool assignments(const std::vector<std::string>& words, std::size_t& w, std::vector<std::string>& assigned) {
    for (; w < words.size(); ++w) {
      const std::string name = assigned_name(words[w]);
      if (name.empty()) break;
      if (!expands_only(words[w].substr(name.size() + 1), own_, &why)) return false;
      assigned.push_back(name);
    }
    return true;
  }

  // [exec] PROGRAM [ARG ...]: a literal program, and arguments that are "$@" or harmless.
  bool command(const std::vector<std::string>& words, std::size_t w, const std::string& line) {
    constexpr const char* kNotLiteral = "$`\"'\\*?[~";
    if (unquoted(words[w]) == "exec" && (++w == words.size() || words[w].starts_with('-'))) {
      why = "`" + line + "`";
      return false;
    }
    const std::string program = unquoted(words[w]);  // a quoted literal ("/opt/cuda/bin/nvcc") is that name
    if (program.find_first_of(kNotLiteral) != std::string::npos) {
      why = "the program " + program + " is not a literal name";
      return false;
    }
    for (++w; w < words.size(); ++w) {
      const std::string& arg = words[w];
      if (arg == "\"$@\"" || arg == "$@") continue;  // the compile's own arguments, as given
      bool takes_value = false;
      if (arg.find_first_of(kNotLiteral) != std::string::npos || !harmless_added_argument(arg, &takes_value)) {
        why = "it passes " + arg + " to " + program + ", which kache would not see";
        return false;
      }
      if (takes_value && (++w == words.size() || !words[w].starts_with('/') ||
                          words[w].find_first_of(kNotLiteral) != std::string::npos)) {
        why = "`" + line + "`";
        return false;
      }
    }
    commands.push_back(program);
    return true;
  }

  std::vector<std::string> own_;  // names the script set on earlier lines, before any use
};

// The programs a shell wrapper runs, read off its text line by line. kache understands a wrapper
// made of lines of these forms only, and names why otherwise (*why; nothing is returned), so that the
// compile passes through rather than be keyed without something the wrapper runs or reads:
//   NAME=VALUE ... / export NAME[=VALUE] / readonly ...   VALUE expanding only names set above;
//   set -e / -u / -x / -o pipefail ..., unset, umask, :, true, false, exit, echo, printf, test, [
//                                                          (builtins that run nothing; only these
//                                                          may redirect, to stderr or /dev/null);
//   [NAME=VALUE ...] [exec] PROGRAM [ARG ...] ["$@"]       PROGRAM a literal path or a bare name (found
//                                                          on the PATH the wrapper inherits, as the
//                                                          probe looks it up); each ARG one that writes
//                                                          and reads nothing (harmless_added_argument).
// if/case/for/while, functions, pipes, lists (; && ||), subshells, redirections of a program,
// here-documents, eval, source, cd, shift, set --, read, trap and any expansion of the environment
// ($EXTRA_FLAGS, ${REAL:-..}, $0, a name set only later or only under a condition) are not understood.
std::vector<std::string> shell_commands(std::string_view body, std::string* why) {
  bool open_quote = false;
  const std::vector<std::string> lines = logical_lines(body, &open_quote);
  if (open_quote) {
    *why = "a quote that does not end";
    return {};
  }
  WrapperLines reader;
  for (const std::string& line : lines) {
    if (!reader.read(line)) {
      *why = reader.why;
      return {};
    }
  }
  return reader.commands;
}

// Each word of `text` that starts with '/', up to the first character a shell would end it at.
std::vector<std::string> absolute_words(const std::string& text) {
  std::vector<std::string> words;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '/' || (i > 0 && std::strchr(" \t\n=\"'(:;|&@", text[i - 1]) == nullptr)) continue;
    std::size_t end = i;
    while (end < text.size() && std::strchr(" \t\n\"'();|&<>$", text[end]) == nullptr) ++end;
    words.push_back(text.substr(i, end - i));
    i = end;
  }
  return words;
}

bool is_shell(const std::string& interpreter) {
  const std::string name = util::basename(interpreter);
  return name == "sh" || name == "bash" || name == "dash";
}

}  // namespace

void ProbeFiles::add_program(const std::string& role, const std::string& path, int depth) {
  std::error_code ec;
  const auto real = std::filesystem::canonical(path, ec);
  const std::string program = ec ? path : real.string();
  add(role, path);  // the name as run (its links' own identities), and what it resolves to
  add(role, program);
  if (std::find(followed_.begin(), followed_.end(), program) != followed_.end()) return;
  followed_.push_back(program);
  // A script: kache keys what it runs only where it can read that off its text.
  const auto refuse = [&](const std::string& why) {
    throw UnreadableWrapper("the wrapper script " + path + " runs a program kache cannot name (" + why + ")");
  };
  const std::string head = regular_file_head(program, 4);
  if (head.starts_with("\x7f" "ELF")) return;
  // Anything else the kernel cannot run (no #!, a byte-order mark before it) a shell runs as a script.
  if (!head.starts_with("#!")) {
    if (std::filesystem::is_regular_file(program, ec)) refuse("neither an ELF program nor a #! script");
    return;
  }
  if (depth >= kMaxScriptDepth) refuse("wrappers nested more than " + std::to_string(kMaxScriptDepth) + " deep");
  const std::string text = regular_file_head(program, kMaxScriptBytes + 1);
  if (text.size() > kMaxScriptBytes) refuse("over " + std::to_string(kMaxScriptBytes / 1024) + " KiB");
  const std::size_t line_end = std::min(text.find('\n'), text.size());
  auto shebang = words_of(std::string_view(text).substr(2, line_end - 2));
  if (shebang.empty() || !shebang[0].starts_with('/')) refuse("no absolute interpreter");
  add_program(role + ":interpreter", shebang[0], depth + 1);
  std::string interpreter = shebang[0];
  if (util::basename(interpreter) == "env") {
    // `#!/usr/bin/env sh`: env finds the interpreter on PATH.
    if (shebang.size() < 2 || shebang[1].starts_with('-')) refuse("env with options");
    interpreter = resolve(shebang[1]);
    if (interpreter.empty()) refuse(shebang[1] + " is not on PATH");
    add_program(role + ":interpreter", interpreter, depth + 1);
  }
  if (!is_shell(interpreter)) refuse("a " + util::basename(interpreter) + " script");
  const std::string_view body = std::string_view(text).substr(line_end);
  std::string why;
  const std::vector<std::string> commands = shell_commands(body, &why);
  if (!why.empty()) refuse(why);
  for (const auto& command : commands) {
    // A bare name is found on the PATH the wrapper inherits, the probe's: recorded as nvcc's tools are
    // (a program earlier on PATH later misses).
    const std::string program_run = command.find('/') == std::string::npos ? resolve(command) : command;
    if (program_run.empty()) refuse(command + " is not on PATH");
    if (!program_run.starts_with('/')) refuse("the relative name " + command);
    // An interpreter or a launcher (sh, python, nice, timeout, xargs) would run what its arguments name:
    // shell_commands refuses every argument but "$@" and harmless flags, so none gets here with one.
    add_program(role + ":runs", program_run, depth + 1);
  }
  for (const auto& word : absolute_words(std::string(body))) {
    // Each program named, as written (a link on the way may be retargeted) and followed a few levels;
    // any other file it names (a -specs file, a config) keyed by content. A path that is no regular
    // file (absent now, a directory, a FIFO) could be tested for or come into being later: not keyed.
    static constexpr std::string_view kDevices[] = {"/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr"};
    if (std::find(std::begin(kDevices), std::end(kDevices), word) != std::end(kDevices)) continue;
    if (!std::filesystem::is_regular_file(word, ec)) refuse("it names " + word + ", which is not a regular file");
    if (::access(word.c_str(), X_OK) == 0) {
      add_program(role + ":runs", word, depth + 1);
    } else {
      add(role + ":names", word);
    }
  }
}

bool is_script(const std::string& path) { return regular_file_head(path, 2) == "#!"; }

namespace {

void add_unique(std::vector<std::string>& list, std::string value) {
  if (std::find(list.begin(), list.end(), value) == list.end()) list.push_back(std::move(value));
}

// Every variable a script's text mentions: $NAME, ${NAME...}, NAME=, and the names after export,
// readonly, local, declare, unset and read.
void collect_variables(std::string_view text, std::vector<std::string>& out) {
  auto name_at = [&](std::size_t i) {
    std::size_t e = i;
    while (e < text.size() && (std::isalnum(static_cast<unsigned char>(text[e])) || text[e] == '_')) ++e;
    return std::string(text.substr(i, e - i));
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '$') {
      const std::string name = name_at(i + 1 + (i + 1 < text.size() && text[i + 1] == '{' ? 1 : 0));
      if (is_name(name)) add_unique(out, name);
    } else if (text[i] == '=' && i > 0) {
      std::size_t b = i;
      while (b > 0 && (std::isalnum(static_cast<unsigned char>(text[b - 1])) || text[b - 1] == '_')) --b;
      const std::string name(text.substr(b, i - b));
      if (is_name(name)) add_unique(out, name);
    }
  }
}

// Why a line lets the script read something no list names, or "".
std::string unpinned_construct(const std::vector<std::string>& words, const std::string& line) {
  static constexpr std::string_view kReaders[] = {"source", ".", "eval", "read", "cd", "pushd", "popd", "mapfile",
                                                  "readarray", "pwd"};
  for (std::size_t w = 0; w < words.size(); ++w) {
    const std::string word = unquoted(words[w]);
    if (std::find(std::begin(kReaders), std::end(kReaders), word) != std::end(kReaders)) return "`" + word + "`";
  }
  if (line.find("$(") != std::string::npos || line.find('`') != std::string::npos) return "a command substitution";
  if (line.find("<(") != std::string::npos || line.find(" <") != std::string::npos || line.find("\t<") != std::string::npos) {
    return "a redirected input";
  }
  return "";
}

struct ChainReader {
  ScriptChain chain;
  std::string search_path;

  void read(const std::string& script, int depth) {
    if (std::find(chain.scripts.begin(), chain.scripts.end(), script) != chain.scripts.end()) return;
    chain.scripts.push_back(script);
    if (depth >= kMaxScriptDepth) return set_unpinned("wrappers nested more than 4 deep");
    const std::string text = regular_file_head(script, kMaxScriptBytes + 1);
    if (text.size() > kMaxScriptBytes) return set_unpinned(script + " is over 64 KiB");
    const std::size_t line_end = std::min(text.find('\n'), text.size());
    const auto shebang = words_of(std::string_view(text).substr(2, line_end - 2));
    std::string interpreter = shebang.empty() ? "" : shebang[0];
    if (util::basename(interpreter) == "env" && shebang.size() > 1) interpreter = shebang[1];
    if (!is_shell(interpreter)) return set_unpinned("a " + util::basename(interpreter) + " script");
    if (std::find(shebang.begin(), shebang.end(), "-x") != shebang.end()) chain.traces = true;
    read_body(std::string_view(text).substr(line_end), depth);
  }

  void read_body(std::string_view body, int depth) {
    collect_variables(body, chain.variables);
    bool open_quote = false;
    for (const std::string& line : logical_lines(body, &open_quote)) {
      char special = 0;
      const std::vector<std::string> words = shell_words(line, &special);
      for (const auto& w : words) {
        add_unique(chain.words, unquoted(w));
        note_program_name(unquoted(w));
        // Programs it names without a directory are then found on a PATH of its own.
        if (assigned_name(w) == "PATH") set_unpinned("it sets PATH");
        // A relative path (./tools/gcc, ../cfg) names another file in each working directory; a
        // response file (@flags) or a path built from a variable names what no list does.
        const std::string bare = unquoted(w);
        if (bare.size() > 1 && bare[0] == '@') set_unpinned("a response file " + bare);
        if (bare.find('$') != std::string::npos && bare.find('/') != std::string::npos) set_unpinned("the path " + bare);
        if (!bare.empty() && bare[0] != '/' && bare[0] != '-' && bare[0] != '$' && bare.find('/') != std::string::npos &&
            bare.find_first_of("$`\"'") == std::string::npos) {
          set_unpinned("the relative path " + bare);
        }
      }
      if (std::string why = unpinned_construct(words, line); !why.empty()) set_unpinned(why);
      note_environment_changes(words);
      if (line.find(">&2") != std::string::npos || line.find("xtrace") != std::string::npos ||
          std::find(words.begin(), words.end(), "-x") != words.end()) {
        chain.traces = true;
      }
      follow_commands(words, depth);
    }
    for (const auto& word : absolute_words(std::string(body))) {
      add_unique(chain.named_paths, word);
      if (is_script(word)) read(word, depth + 1);
    }
  }

  // Programs in command position (the first word after assignments and exec/command/env): a script
  // found on PATH is read too.
  void follow_commands(const std::vector<std::string>& words, int depth) {
    std::size_t w = 0;
    while (w < words.size() && (!assigned_name(words[w]).empty() || unquoted(words[w]) == "exec" ||
                                unquoted(words[w]) == "command" || unquoted(words[w]) == "env")) {
      ++w;
    }
    if (w == words.size()) return;
    const std::string program = unquoted(words[w]);
    if (program.empty() || program.find_first_of("/$`\"'\\*?[~") != std::string::npos) return;
    const auto found = util::find_executable(program, search_path);
    if (std::none_of(chain.commands.begin(), chain.commands.end(), [&](const auto& c) { return c.first == program; })) {
      chain.commands.emplace_back(program, found.value_or(""));
    }
    if (found && is_script(*found)) read(*found, depth + 1);
  }

  // Every word that could name a program on PATH (a launcher's argument, `nice mygcc`, as well as a
  // command), found or not: one appearing earlier on PATH later may be what the script runs then.
  void note_program_name(const std::string& word) {
    // Shell keywords and builtins run no program.
    static constexpr std::string_view kShellWords[] = {
        "exec", "set", "export", "readonly", "local", "unset", "echo", "printf", "test", "if", "then", "else",
        "elif", "fi", "case", "esac", "in", "for", "while", "until", "do", "done", "return", "shift", "true",
        "false", "exit", "trap", "command", "umask", "declare", "typeset", "break", "continue", "wait"};
    if (std::find(std::begin(kShellWords), std::end(kShellWords), word) != std::end(kShellWords)) return;
    if (word.empty() || word[0] == '-' || word.find_first_of("/$`\"'\\*?[~=(){};|&<>") != std::string::npos) return;
    if (std::any_of(chain.commands.begin(), chain.commands.end(), [&](const auto& c) { return c.first == word; })) return;
    chain.commands.emplace_back(word, util::find_executable(word, search_path).value_or(""));
  }

  void note_environment_changes(const std::vector<std::string>& words) {
    static constexpr std::string_view kChangers[] = {"source", ".", "eval", "cd", "pushd", "popd"};
    for (std::size_t i = 0; i < words.size() && chain.changes_environment.empty(); ++i) {
      const std::string w = unquoted(words[i]);
      const std::string next = i + 1 < words.size() ? unquoted(words[i + 1]) : "";
      if (std::find(std::begin(kChangers), std::end(kChangers), w) != std::end(kChangers)) {
        chain.changes_environment = "`" + w + "`";
      } else if ((w == "env" || w == "exec") && next.starts_with('-')) {
        chain.changes_environment = "`" + w + " " + next + "`";
      } else if ((w == "export" || w == "declare" || w == "typeset") && i + 1 < words.size()) {
        const std::string& value = words[i + 1];
        if (value.find('$') != std::string::npos && value.find('$') < value.find('=')) {
          chain.changes_environment = "`" + w + " " + next + "`";
        }
      }
    }
  }

  void set_unpinned(const std::string& why) {
    if (chain.unpinned.empty()) chain.unpinned = why;
  }
};

}  // namespace

void add_script_body(ScriptChain& chain, std::string_view body, const std::string& search_path) {
  ChainReader reader;
  reader.chain = std::move(chain);
  reader.search_path = search_path;
  try {
    reader.read_body(body, 1);
  } catch (const std::exception& e) {
    reader.set_unpinned(e.what());
  }
  chain = std::move(reader.chain);
}

ScriptChain read_script_chain(const std::string& script, const std::string& search_path) {
  ChainReader reader;
  reader.search_path = search_path;
  try {
    reader.read(script, 0);
  } catch (const std::exception& e) {
    reader.set_unpinned(e.what());
  }
  return std::move(reader.chain);
}

void ProbeFiles::digest_pending() {
  std::vector<Recorded*> to_hash;
  for (auto& r : recorded_) {
    if (!r.digest.empty()) continue;
    // One file under two names (a toolkit's bin/ of links, nvcc named through a link) is hashed once.
    auto known = std::find_if(recorded_.begin(), recorded_.end(),
                              [&](const Recorded& d) { return !d.digest.empty() && d.identity == r.identity; });
    if (known != recorded_.end()) {
      r.digest = known->digest;
      continue;
    }
    if (!memo_dir_.empty()) {
      try {
        std::optional<std::string> hex = read_memo_file(memo_dir_, content_memo_path(memo_dir_, r.path, r.identity));
        if (hex && hex->size() == kContentDigestHexSize) {
          r.digest = std::move(*hex);
          continue;
        }
      } catch (const std::exception&) {
      }
    }
    to_hash.push_back(&r);
  }
  if (to_hash.empty()) return;
  // Names of one file in this pass: the first is hashed, the others take its digest.
  std::vector<std::pair<Recorded*, const Recorded*>> same_file;  // (copy to, copy from)
  {
    std::vector<Recorded*> distinct;
    for (Recorded* r : to_hash) {
      auto it =
          std::find_if(distinct.begin(), distinct.end(), [&](const Recorded* d) { return d->identity == r->identity; });
      if (it == distinct.end())
        distinct.push_back(r);
      else
        same_file.emplace_back(r, *it);
    }
    to_hash = std::move(distinct);
  }
  std::sort(to_hash.begin(), to_hash.end(),
            [](const Recorded* a, const Recorded* b) { return a->identity.size > b->identity.size; });
  // Each thread takes the next largest file left: the slices only say how many threads run.
  std::atomic<std::size_t> next{0};
  const std::int64_t hashing_began = util::file_clock_now_ns();  // before any of them is read
  std::vector<std::exception_ptr> failures(to_hash.size());
  const std::size_t threads = util::slice_count(to_hash.size(), kMaxHashThreads, 1);
  util::for_each_slice(threads, threads, [&](std::size_t, std::size_t, std::size_t) {
    for (std::size_t i; (i = next.fetch_add(1)) < to_hash.size();) {
      try {
        auto hex = util::xxh128_file_hex_as(to_hash[i]->path, to_hash[i]->identity);
        // The path reaches another file than the one stat'ed: its content is not this identity's.
        if (!hex) throw std::runtime_error("toolchain file changed while it was probed: " + to_hash[i]->path);
        to_hash[i]->digest = std::move(*hex);
      } catch (...) {
        failures[i] = std::current_exception();
      }
    }
  });
  for (const auto& f : failures) {
    if (f) std::rethrow_exception(f);
  }
  for (auto& [to, from] : same_file) {
    to->digest = from->digest;
    to_hash.push_back(to);
  }
  if (memo_dir_.empty()) return;
  for (const Recorded* r : to_hash) {
    // Hashed as the file of this identity (xxh128_file_hex_as): this identity's content, unless the
    // file was within its clock tick when the reads began (a rewrite after the read could keep it).
    if (identity_is_racy(r->path, r->identity, hashing_began)) continue;
    write_memo_file(memo_dir_, content_memo_path(memo_dir_, r->path, r->identity), r->digest);
  }
}

void ProbeFiles::hash_into(util::Hasher& h) {
  digest_pending();
  std::vector<std::pair<std::string, std::string>> roles;
  for (const auto& r : recorded_) roles.emplace_back(r.role, r.digest);
  std::sort(roles.begin(), roles.end());
  for (const auto& [role, digest] : roles) h.add_field("file:" + role, digest);
}

std::future<util::ProcessResult> start_capture(std::string exe, std::vector<std::string> argv, util::Environment env) {
  auto run = [exe = std::move(exe), argv = std::move(argv), env = std::move(env)] {
    return util::run_capture(exe, argv, env);
  };
  try {
    return std::async(std::launch::async, run);
  } catch (const std::system_error&) {
    // No thread to be had (resource limits): the command runs when its answer is read.
    return std::async(std::launch::deferred, run);
  }
}

namespace {

// Memos are small; a larger file in their place is no memo.
constexpr std::size_t kMaxMemoBytes = 16 << 20;

// The cache dir holding memo_dir, opened (created first when `create`: a new cache dir's first compile
// probes before anything else is stored), and path's place below it ("toolchains/..."); nullopt when
// there is no memo dir, path lies elsewhere, or the cache dir cannot be opened.
std::optional<std::pair<util::Beneath, std::string>> below_cache_dir(const std::string& memo_dir,
                                                                     const std::string& path, bool create = false) {
  if (memo_dir.empty() || !(path == memo_dir || path.starts_with(memo_dir + "/"))) return std::nullopt;
  try {
    if (create) util::create_directories(util::dirname(memo_dir));  // the user's own choice of place
    return std::pair{util::Beneath(util::dirname(memo_dir)), util::basename(memo_dir) + path.substr(memo_dir.size())};
  } catch (const std::exception& e) {
    core::log().debug("cannot open the cache dir of {}: {}", memo_dir, e.what());
    return std::nullopt;
  }
}

}  // namespace

std::optional<std::string> read_memo_file(const std::string& memo_dir, const std::string& path) {
  auto at = below_cache_dir(memo_dir, path);
  if (!at) return std::nullopt;
  std::string refused;
  try {
    std::optional<std::string> bytes = at->first.read_regular(at->second, &refused, kMaxMemoBytes);
    if (!bytes && !refused.empty()) core::log().debug("toolchain memo {} is {}: no memo", path, refused);
    return bytes;
  } catch (const std::exception& e) {
    core::log().debug("cannot read toolchain memo {}: {}", path, e.what());
    return std::nullopt;
  }
}

void write_memo_file(const std::string& memo_dir, const std::string& path, const std::string& bytes) {
  // The memo lives in the cache dir: its files and directories take the cache umask (cache.umask).
  util::CacheUmaskScope cache_umask;
  auto at = below_cache_dir(memo_dir, path, true);
  if (!at) return;
  std::string refused;
  try {
    const auto& [cache_dir, relative] = *at;
    if (!cache_dir.create_directories(util::dirname(relative), 0777, &refused) ||
        !cache_dir.write_atomic(relative, bytes, 0666, &refused))
      core::log().debug("cannot write toolchain memo {}: {} on the way", path, refused);
  } catch (const std::exception& e) {
    core::log().debug("cannot write toolchain memo {}: {}", path, e.what());
  }
}

std::string probe_scratch_parent(const std::string& memo_dir) {
  auto at = below_cache_dir(memo_dir, memo_dir);
  try {
    if (at && at->first.open_directory(at->second).get() >= 0) return memo_dir;
  } catch (const std::exception& e) {
    core::log().debug("cannot open {}: {}", memo_dir, e.what());
  }
  return "/tmp";
}

ProbeLock::ProbeLock(const std::string& memo_dir, const std::string& memo_path) {
  if (memo_path.empty()) return;
  const std::string lock_path = memo_path + ".lock";
  auto at = below_cache_dir(memo_dir, lock_path);
  if (!at) return;
  std::string refused;
  try {
    fd_ = at->first.open_regular(at->second, O_RDWR | O_CREAT, 0666, &refused).release();
  } catch (const std::exception& e) {
    refused = e.what();
  }
  if (fd_ < 0) {
    core::log().debug("cannot open the toolchain probe lock {}: {}", lock_path, refused);
    return;
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
  // Another process probes this toolchain now (~0.1 s). A bounded wait (cache.lock_timeout), not a
  // blocking flock, which a stopped prober would hold forever; the polls stay frequent (4 ms at most),
  // as the wait is short and every millisecond of it is a compile waiting.
  core::log().debug("toolchain probe: another process probes this toolchain ({}): waiting for its memo", lock_path);
  const std::int64_t start = monotonic_ms();
  try {
    util::lock_bounded(fd_, LOCK_EX, lock_path, 4'000'000);
    core::log().debug("toolchain probe: waited {} ms for another process's probe", monotonic_ms() - start);
    return;
  } catch (const util::LockTimeout&) {
    core::log().debug("toolchain probe: another process's probe held {} past {} ms: probing too", lock_path,
                      util::lock_timeout_ms());
  } catch (const std::system_error& e) {
    core::log().debug("toolchain probe lock {}: {}", lock_path, e.what());
  }
  ::close(fd_);
  fd_ = -1;
}

ProbeLock::~ProbeLock() {
  if (fd_ >= 0) ::close(fd_);
}

namespace memo_detail {

void FieldWriter::operator()(const std::string& s) const { out.str(s); }

void FieldWriter::operator()(const std::vector<std::string>& list) const {
  out.u32(static_cast<std::uint32_t>(list.size()));
  for (const auto& s : list) out.str(s);
}

void FieldWriter::operator()(const std::vector<std::pair<std::string, std::string>>& pairs) const {
  out.u32(static_cast<std::uint32_t>(pairs.size()));
  for (const auto& [first, second] : pairs) {
    out.str(first);
    out.str(second);
  }
}

void FieldWriter::operator()(const ToolFiles& tools) const { tools.write(out); }

void FieldReader::operator()(std::string& s) const { s = in.str(); }

void FieldReader::operator()(std::vector<std::string>& list) const {
  for (std::uint32_t i = 0, n = in.count(sizeof(std::uint64_t)); i < n; ++i) list.push_back(in.str());
}

void FieldReader::operator()(std::vector<std::pair<std::string, std::string>>& pairs) const {
  for (std::uint32_t i = 0, n = in.count(2 * sizeof(std::uint64_t)); i < n; ++i) {
    std::string first = in.str();
    pairs.emplace_back(std::move(first), in.str());
  }
}

void FieldReader::operator()(ToolFiles& tools) const { tools = ToolFiles::read(in); }

std::string memo_path(const std::string& memo_dir, const std::string& memo_key) {
  return memo_dir.empty() ? "" : util::join_path(memo_dir, memo_key);
}

void log_not_kept(const std::string& memo_key, const char* why) {
  core::log().debug("toolchain memo {} {}: probing again", memo_key.substr(0, 12), why);
}

void prepare_dir(const std::string& memo_dir) {
  auto at = below_cache_dir(memo_dir, memo_dir, true);
  if (!at) return;
  std::string refused;
  try {
    if (!at->first.create_directories(at->second, 0777, &refused))
      core::log().debug("cannot create {}: {} on the way", memo_dir, refused);
  } catch (const std::exception& e) {
    core::log().debug("cannot create {}: {}", memo_dir, e.what());
  }
}

void log_probing(const std::string& what, const std::string& memo_key) {
  core::log().debug("probing toolchain {} (memo {})", what, memo_key.substr(0, 12));
}

}  // namespace memo_detail

}  // namespace kache::compiler
