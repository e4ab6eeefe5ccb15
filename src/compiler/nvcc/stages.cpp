#include "compiler/nvcc/stages.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <future>
#include <mutex>
#include <regex>
#include <set>
#include <span>
#include <sstream>
#include <unordered_set>
#include <string_view>

#include <fmt/format.h>

#include "compiler/env_table.hpp"
#include "core/log.hpp"
#include "core/stats.hpp"
#include "util/clock.hpp"
#include "util/fs.hpp"
#include "util/hash.hpp"
#include "util/serial.hpp"
#include "util/shell_words.hpp"
#include "util/text.hpp"

namespace kache::compiler::nvcc {

namespace {

// 1: files, stdout, stderr, milliseconds
constexpr std::uint32_t kStageFormat = 1;

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string lookup(const std::vector<std::pair<std::string, std::string>>& vars, const util::Environment& env,
                   std::string_view name) {
  for (auto it = vars.rbegin(); it != vars.rend(); ++it) {
    if (it->first == name) return it->second;
  }
  return util::env_get(env, std::string(name)).value_or("");
}

// Splits a command as /bin/sh would (nvcc runs some of them through it; util/shell_words.hpp), $NAME
// and ${NAME} expanded from the dry run's variables, else env. nullopt for anything else the shell
// gives meaning to (redirections, pipes, globs, command substitution, an unquoted expansion that would
// be split): the trajectory then runs whole.
std::optional<std::vector<std::string>> shell_words(std::string_view line,
                                                    const std::vector<std::pair<std::string, std::string>>& vars,
                                                    const util::Environment& env) {
  util::ShellGrammar grammar;
  // '#' and '~' only mean something at a word's start, '{' '}' in some positions: refused anywhere.
  grammar.specials = "|&;<>()`*?[~#{}";
  grammar.expand = [&](std::string_view name) { return lookup(vars, env, name); };
  const util::ShellWords words = util::split_shell_words(line, grammar);
  if (words.end != util::ShellWords::End::complete || words.special != 0) return std::nullopt;
  return words.texts();
}

std::string program_name(const std::string& word) { return util::basename(word); }

constexpr std::string_view kPreprocessedOutputOption[] = {"-o"};

// The value of an option given as "-o X" or "-o=X" among words, for every spelling in names.
std::vector<std::string> option_values(const std::vector<std::string>& words, std::span<const std::string_view> names) {
  std::vector<std::string> out;
  for (std::size_t i = 1; i < words.size(); ++i) {
    for (std::string_view n : names) {
      if (words[i] == n && i + 1 < words.size()) out.push_back(words[i + 1]);
      if (words[i].size() > n.size() && words[i].starts_with(n) && words[i][n.size()] == '=') {
        out.push_back(words[i].substr(n.size() + 1));
      }
    }
  }
  return out;
}

// The architecture a cicc or ptxas command is for ("compute_80", "sm_90"), for counters and explain.
std::string stage_arch(const Stage& s) {
  for (std::size_t i = 1; i < s.words.size(); ++i) {
    const std::string& w = s.words[i];
    if ((w == "-arch" || w == "--gpu-name") && i + 1 < s.words.size()) return s.words[i + 1];
    if (w.starts_with("-arch=")) return w.substr(6);
    if (w.starts_with("--gpu-name=")) return w.substr(11);
  }
  return "?";
}

// The options by which cicc and ptxas name the files they write.
constexpr std::string_view kOutputOptions[] = {"-o", "--output-file", "--gen_c_file_name", "--stub_file_name",
                                               "--gen_device_file_name"};

// The options by which cicc is told the source's name (for messages, the module id), not to read it.
constexpr std::string_view kSourceNameOptions[] = {"--orig_src_file_name", "--orig_src_path_name"};

// An architecture in a temporary's name (".compute_80", ".sm_90a", ".sm_100f").
const std::regex kArchInName(R"(\.(compute|sm|lto)_[0-9]+[a-z]?)");

const char* kind_name(Stage::Kind k) { return k == Stage::Kind::cicc ? "ptx" : "cubin"; }

struct Snapshot {
  std::map<std::string, util::FileIdentity> files;  // name in the scratch directory -> identity
};

Snapshot snapshot(const std::string& dir) {
  Snapshot s;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string path = e.path().string();
    if (auto id = util::stat_identity(path); id && !id->is_dir) s.files.emplace(e.path().filename().string(), *id);
  }
  return s;
}

struct StageValue {
  std::vector<std::pair<std::string, std::string>> files;  // role (the output option), bytes
  std::string out, err;
  std::uint64_t ms = 0;  // what the stage took when it ran
};

std::string serialize(const StageValue& v) {
  util::Writer w;
  w.u32(kStageFormat);
  w.u32(static_cast<std::uint32_t>(v.files.size()));
  for (const auto& [name, bytes] : v.files) {
    w.str(name);
    w.str(bytes);
  }
  w.str(v.out);
  w.str(v.err);
  w.u64(v.ms);
  return w.take();
}

std::optional<StageValue> deserialize(const std::string& data) {
  try {
    util::Reader r(data);
    if (r.u32() != kStageFormat) return std::nullopt;
    StageValue v;
    for (std::uint32_t i = 0, n = r.u32(); i < n; ++i) {
      std::string name = r.str();
      v.files.emplace_back(std::move(name), r.str());
    }
    v.out = r.str();
    v.err = r.str();
    v.ms = r.u64();
    // Each file is an output option's.
    for (const auto& f : v.files) {
      if (std::find(std::begin(kOutputOptions), std::end(kOutputOptions), f.first) == std::end(kOutputOptions)) {
        return std::nullopt;
      }
    }
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

class Runner {
 public:
  Runner(const StageRun& run, const StagePlan& plan, StageStore& store) : run_(run), plan_(plan), store_(store) {
    child_env_ = run.env;
    for (const auto& [name, value] : plan.variables) util::env_set(child_env_, name, value);
    search_path_ = lookup(plan.variables, run.env, "PATH");
  }

  std::variant<std::string, util::ProcessResult> go() {
    auto outcome = replay();
    // Every stage sent elsewhere has ended before the trajectory's result is read or it is abandoned.
    await(nullptr);
    if (auto* why = std::get_if<std::string>(&outcome)) return *why;
    if (auto why = aborted(); why && !failed()) return *why;
    std::lock_guard lock(mu_);
    for (auto& [out, err] : slots_) {
      result_.out += out;
      result_.err += err;
    }
    return std::move(result_);
  }

 private:
  std::variant<std::string, util::ProcessResult> replay() {
    std::vector<std::string> preprocessed;  // outputs of the -E steps, in order (the dependency file's sources)
    slots_.resize(plan_.stages.size());
    for (std::size_t i = 0; i < plan_.stages.size(); ++i) {
      const Stage& s = plan_.stages[i];
      // cicc and ptxas go to remote execution as tasks, each waiting only for the stages whose outputs it
      // names. A preprocessing step (-E: the next architecture's input) reads sources only and goes on
      // beside them; every other stage waits for them all (the host compile includes cicc's stub files
      // without naming them, fatbinary reads every cubin).
      const bool preprocessing = std::find(s.words.begin(), s.words.end(), "-E") != s.words.end();
      if (remote_stage(s)) {
        dispatch(s, i);
        continue;
      }
      if (!(s.kind == Stage::Kind::run && preprocessing)) await(nullptr);
      if (failed()) return result_;
      if (auto why = aborted()) return *why;
      switch (s.kind) {
        case Stage::Kind::remove:
          // nvcc removes its temporaries, which -objtemp keeps in the scratch directory (run_stages
          // checks that before any command runs).
          for (std::size_t i = 1; i < s.words.size(); ++i) ::unlink(util::absolute_path(s.words[i], run_.cwd).c_str());
          break;
        case Stage::Kind::filter_dependencies: {
          std::vector<std::string> paths;
          for (const auto& p : preprocessed) paths.push_back(util::absolute_path(p, run_.cwd));
          auto text = filter_dependencies(run_.depfile_target, paths, run_.depfile_without_system_headers);
          if (!text) return std::string("dependency-names");
          try {
            util::write_file(util::absolute_path(s.path, run_.cwd), *text);
          } catch (const std::exception&) {
            return std::string("dependency-file");
          }
          break;
        }
        case Stage::Kind::run:
        case Stage::Kind::cicc:
        case Stage::Kind::ptxas: {
          if (std::find(s.words.begin(), s.words.end(), "-E") != s.words.end()) {
            for (const auto& o : option_values(s.words, kPreprocessedOutputOption)) preprocessed.push_back(o);
          }
          if (auto why = step(s, i)) return *why;
          if (failed()) return result_;
          break;
        }
      }
    }
    return result_;
  }

  bool failed() {
    std::lock_guard lock(mu_);
    return failed_;
  }

  std::optional<std::string> aborted() {
    std::lock_guard lock(mu_);
    return abort_why_;
  }

  bool remote_stage(const Stage& s) const {
    return (s.kind == Stage::Kind::cicc || s.kind == Stage::Kind::ptxas) && store_.remote_enabled();
  }

  // A cicc or ptxas stage as a task: it waits for the tasks whose outputs it names, then is keyed (its
  // inputs' content exists only then), reused, or run remotely.
  void dispatch(const Stage& s, std::size_t slot) {
    std::vector<std::shared_future<void>> needs;
    for (const auto& p : pending_) {
      bool named = false;
      for (const auto& w : s.words) {
        for (const auto& name : p.output_names) named |= w.find(name) != std::string::npos;
      }
      if (named) needs.push_back(p.done);
    }
    Pending p;
    for (const auto& [option, path] : output_roles(s)) p.output_names.push_back(util::basename(path));
    p.done = std::async(std::launch::async, [this, &s, slot, needs = std::move(needs)] {
               for (const auto& n : needs) n.wait();
               if (failed() || aborted()) return;
               std::optional<std::string> why;
               try {
                 why = step(s, slot, true);
               } catch (const std::exception& e) {
                 why = "stage-error";
               }
               if (why) {
                 std::lock_guard lock(mu_);
                 if (!abort_why_) abort_why_ = why;
               }
             }).share();
    pending_.push_back(std::move(p));
  }

  // The compile fails here as nvcc's would: the miss ends as a failed compile, and the pipeline runs the
  // user's command unchanged for nvcc's own messages and exit status.
  void fail(const util::ProcessResult& r) {
    std::lock_guard lock(mu_);
    if (failed_) return;
    result_.exit_code = r.exit_code;
    result_.term_signal = r.term_signal;
    failed_ = true;
  }

  // The environment a tool reads, as a remote worker is to see it: nvcc's variables, PATH and every
  // variable env_table says nvcc's tools read (the rest is inert for them, by the table's audit).
  util::Environment tool_environment() const {
    util::Environment env;
    for (const std::string& entry : child_env_) {
      const std::string name = entry.substr(0, entry.find('='));
      const auto* rule = find_env_rule(name, EnvRoute::nvcc);
      const bool variable = std::any_of(plan_.variables.begin(), plan_.variables.end(),
                                        [&](const auto& v) { return v.first == name; });
      if (variable || name == "PATH" || (rule && rule->effect != EnvEffect::Inert)) env.push_back(entry);
    }
    return env;
  }

  // The stage as a remote command: the temporaries it names are its inputs (its only inputs besides the
  // toolkit's own files, by the strace audit of test_nvcc_stage_audit.py), its output options its outputs.
  RemoteCommand remote_command(const Stage& s, const std::string& exe, const std::map<std::string, std::string>& roles,
                               const std::string& what) const {
    RemoteCommand cmd;
    cmd.argv = s.words;
    cmd.argv[0] = exe;
    cmd.env = tool_environment();
    cmd.cwd = run_.cwd;
    cmd.what = what;
    for (const auto& [name, value] : run_.key_fields) {
      if (name == "toolchain") cmd.platform.emplace_back("kache-toolchain", value);
    }
    std::set<std::string> outputs;
    for (const auto& [option, path] : roles) {
      const std::string abs = util::absolute_path(path, run_.cwd);
      if (abs != "/dev/null") outputs.insert(abs);
    }
    for (std::size_t i = 1; i < s.words.size(); ++i) {
      const std::size_t eq = s.words[i].find('=');
      for (const std::string& word : {s.words[i], eq == std::string::npos ? std::string() : s.words[i].substr(eq + 1)}) {
        if (word.empty()) continue;
        const std::string path = util::absolute_path(word, run_.cwd);
        auto id = util::stat_identity(path);
        if (id && !id->is_dir && util::path_starts_with(path, run_.scratch_dir) && !outputs.count(path)) {
          cmd.inputs.push_back(path);
        }
      }
    }
    cmd.outputs.assign(outputs.begin(), outputs.end());
    return cmd;
  }

  // A cicc or ptxas stage run by remote execution (in its task); what cannot run remotely runs here, in
  // the same task. Stored when it ran remotely and its outputs are storable.
  void run_elsewhere(const Stage& s, const std::string& exe, const std::optional<std::string>& key,
                     const std::map<std::string, std::string>& roles, const std::string& what, std::size_t slot) {
    const std::int64_t t0 = util::now_ns();
    std::optional<util::ProcessResult> r = store_.run_remote(remote_command(s, exe, roles, what));
    const bool remote = r.has_value();
    if (!r) {
      try {
        r = util::run_capture(exe, s.words, child_env_);
      } catch (const std::exception&) {
        r = util::ProcessResult{127, 0, {}, "kache: " + exe + " cannot be started\n"};
      }
    }
    slots_[slot] = {r->out, r->err};
    if (!r->ok()) return fail(*r);
    if (!key) return;
    StageValue value;
    value.ms = static_cast<std::uint64_t>(std::max<std::int64_t>(0, (util::now_ns() - t0) / 1000000));
    value.out = r->out;
    value.err = r->err;
    // Run here beside other stages, its writes are not told apart from theirs: used, not stored.
    const std::string unstorable = remote ? keep_role_outputs(roles, value) : "ran here beside other stages";
    store_.count(std::string(core::counter::kStageMissesPrefix) + kind_name(s.kind));
    store_.note((remote ? "ran remotely " : "ran ") + what);
    if (unstorable.empty()) store_.save(*key, serialize(value));
    core::log().debug("stage: ran {}{} in {} ms{}", what, remote ? " remotely" : "", value.ms,
                      unstorable.empty() ? "" : " (not stored: " + unstorable + ")");
  }

  // A remote stage's outputs by role, from the files it was asked for (the worker returns nothing else).
  std::string keep_role_outputs(const std::map<std::string, std::string>& roles, StageValue& value) const {
    for (const std::string* text : {&value.out, &value.err}) {
      if (text->find(run_.scratch_dir) != std::string::npos) return "its messages name a temporary";
    }
    std::vector<std::pair<std::string, std::string>> by_length(roles.begin(), roles.end());
    std::sort(by_length.begin(), by_length.end(),
              [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
    for (const auto& [option, path] : roles) {
      const std::string abs = util::absolute_path(path, run_.cwd);
      if (abs == "/dev/null") continue;
      std::string bytes;
      try {
        bytes = util::read_file(abs);
      } catch (const std::exception&) {
        continue;  // an output the tool did not write
      }
      if (bytes.find("\x01kache-role") != std::string::npos) return abs + " holds kache's role marker";
      for (const auto& [o, p] : by_length) util::replace_all(bytes, p, role_token(o));
      if (bytes.find(run_.scratch_dir) != std::string::npos || bytes.find("tmpxft") != std::string::npos) {
        return abs + " names a temporary";
      }
      value.files.emplace_back(option, std::move(bytes));
    }
    return "";
  }

  // Waits for every stage task sent so far.
  void await(std::nullptr_t) {
    for (auto& p : pending_) p.done.wait();
  }
  std::optional<std::string> resolve(const std::string& word, std::string& exe) const {
    if (word.find('/') != std::string::npos) {
      exe = util::absolute_path(word, run_.cwd);
      return std::nullopt;
    }
    auto found = util::find_executable(word, search_path_);
    if (!found) return std::string("program-not-found");
    exe = *found;
    return std::nullopt;
  }

  // The stage's key, or nullopt when it is not to be cached (an output outside the scratch directory).
  std::optional<std::string> stage_key(const Stage& s, const std::string& exe) const {
    for (const auto& o : option_values(s.words, kOutputOptions)) {
      const std::string path = util::absolute_path(o, run_.cwd);
      if (path != "/dev/null" && !util::path_starts_with(path, run_.scratch_dir)) return std::nullopt;
    }
    util::Hasher h;
    h.add_field("kache-stage", std::to_string(kStageFormat));
    h.add_field("kind", kind_name(s.kind));
    h.add_field("program", exe);
    for (const auto& [name, value] : run_.key_fields) h.add_field(name, value);
    // cicc makes the relative names of its input's line markers absolute against its working directory
    // (-lineinfo's .file directives: "inc/h.cuh" becomes "<cwd>/inc/h.cuh"), which no argument and no
    // input content shows: keyed, so two build directories never share a cicc result that names one.
    if (s.kind == Stage::Kind::cicc) h.add_field("cwd", run_.cwd);
    // nvcc's variables as the tools see them in their environment (PTXAS_FLAGS, NVVMIR_LIBRARY_DIR...);
    // PATH only chose the programs, keyed above by path and by the toolchain id's content.
    for (const auto& [name, value] : plan_.variables) {
      if (name != "PATH") h.add_field("variable:" + name, value);
    }
    for (std::size_t i = 1; i < s.words.size(); ++i) {
      std::string keyed = s.words[i];
      // The scratch directory is new for every miss: a role ("<scratch>/k.o.compute_80.ptx"), not a path.
      util::replace_all(keyed, run_.scratch_dir, "<scratch>");
      // Named by role, not by architecture: one architecture's files are "k.o.ptx", several's
      // "k.o.compute_80.ptx" (the architecture is an argument of its own, keyed as such).
      if (keyed.find("<scratch>") != std::string::npos) keyed = std::regex_replace(keyed, kArchInName, "");
      h.add_field("arg", keyed);
      // Every existing file a word names (or an option's value after '='), read or not: its content.
      // Not the source cicc is told the name of: it reads the preprocessed input only (the strace audit,
      // test_nvcc_stage_audit.py), which holds the source's and headers' content; keying the source
      // again reran every architecture's cicc on any edit, host-only or another architecture's.
      if (std::find(std::begin(kSourceNameOptions), std::end(kSourceNameOptions), s.words[i - 1]) !=
          std::end(kSourceNameOptions)) {
        continue;
      }
      const std::size_t eq = s.words[i].find('=');
      std::vector<std::string> candidates = {s.words[i]};
      if (eq != std::string::npos) candidates.push_back(s.words[i].substr(eq + 1));
      for (const std::string& candidate : candidates) {
        if (candidate.empty()) continue;
        const std::string path = util::absolute_path(candidate, run_.cwd);
        auto id = util::stat_identity(path);
        if (!id || id->is_dir || path.starts_with("/dev/")) continue;
        try {
          h.add_field("input:" + keyed, util::hash_file(path).hex());
        } catch (const std::exception&) {
          return std::nullopt;
        }
      }
    }
    return h.finish().hex();
  }

  // The files the command names by an output option, by role: option -> the path as spelled there.
  static std::map<std::string, std::string> output_roles(const Stage& s) {
    std::map<std::string, std::string> roles;
    for (std::string_view option : kOutputOptions) {
      const std::string_view one[] = {option};
      auto values = option_values(s.words, one);
      if (!values.empty()) roles.emplace(std::string(option), values.back());
    }
    return roles;
  }

  static std::string role_token(const std::string& option) { return "\x01kache-role" + option + "\x01"; }

  // One stage: reused, or run (remotely when in_task, as a task of dispatch()). Its messages go to slot.
  std::optional<std::string> step(const Stage& s, std::size_t slot, bool in_task = false) {
    auto& log = core::log();
    std::string exe;
    if (auto why = resolve(s.words[0], exe)) return why;
    std::optional<std::string> key;
    if (s.kind != Stage::Kind::run) key = stage_key(s, exe);
    const std::map<std::string, std::string> roles = output_roles(s);
    // ptxas without an output checks a PTX-only target's code.
    const bool check = s.kind == Stage::Kind::ptxas && !roles.count("-o");
    const std::string what = fmt::format("{} {}", check ? "ptxas check" : kind_name(s.kind), stage_arch(s));
    if (key && reuse(*key, roles, what, s.kind, slot)) return std::nullopt;
    if (in_task) {
      run_elsewhere(s, exe, key, roles, what, slot);
      return std::nullopt;
    }
    const Snapshot before = key ? snapshot(run_.scratch_dir) : Snapshot{};
    const std::int64_t t0 = util::now_ns();
    util::ProcessResult r;
    try {
      r = util::run_capture(exe, s.words, child_env_);
    } catch (const std::exception&) {
      return std::string("program-not-started");
    }
    slots_[slot] = {r.out, r.err};
    if (!r.ok()) {
      fail(r);
      return std::nullopt;
    }
    if (!key) return std::nullopt;
    StageValue value;
    value.ms = static_cast<std::uint64_t>(std::max<std::int64_t>(0, (util::now_ns() - t0) / 1000000));
    value.out = r.out;
    value.err = r.err;
    std::string unstorable = keep_outputs(roles, before, value);
    store_.count(std::string(core::counter::kStageMissesPrefix) + kind_name(s.kind));
    store_.note("ran " + what);
    if (unstorable.empty()) store_.save(*key, serialize(value));
    log.debug("stage: ran {} in {} ms{}", what, value.ms, unstorable.empty() ? "" : " (not stored: " + unstorable + ")");
    return std::nullopt;
  }

  // The stage's outputs by role, each spelled output path in them replaced by its role's token (cicc's stub
  // names itself in a line marker: "k.o.cudafe1.stub.c" alone, "k.o.compute_80.cudafe1.stub.c" among
  // several architectures). Returns why they cannot be stored, or "".
  std::string keep_outputs(const std::map<std::string, std::string>& roles, const Snapshot& before,
                           StageValue& value) const {
    // A message naming this miss's scratch directory (a ptxas warning names its input) would print
    // another miss's path when replayed.
    for (const std::string* text : {&value.out, &value.err}) {
      if (text->find(run_.scratch_dir) != std::string::npos) return "its messages name a temporary";
    }
    // Longest path first, so that no path is replaced inside a longer one.
    std::vector<std::pair<std::string, std::string>> by_length(roles.begin(), roles.end());
    std::sort(by_length.begin(), by_length.end(),
              [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
    std::map<std::string, std::string> role_of;  // file name in the scratch directory -> role
    for (const auto& [option, path] : roles) {
      const std::string abs = util::absolute_path(path, run_.cwd);
      if (abs == "/dev/null") continue;
      role_of[util::basename(abs)] = option;
    }
    for (const auto& [name, id] : snapshot(run_.scratch_dir).files) {
      auto it = before.files.find(name);
      const bool changed = it == before.files.end() || !(it->second == id);
      auto role = role_of.find(name);
      if (role == role_of.end()) {
        if (changed) return name + " is written by no output option";
        continue;
      }
      std::string bytes = util::read_file(util::join_path(run_.scratch_dir, name));
      if (bytes.find("\x01kache-role") != std::string::npos) return name + " holds kache's role marker";
      for (const auto& [option, path] : by_length) util::replace_all(bytes, path, role_token(option));
      // Anything else naming this miss's scratch directory or a temporary would carry it into another.
      if (bytes.find(run_.scratch_dir) != std::string::npos || bytes.find("tmpxft") != std::string::npos) {
        return name + " names a temporary";
      }
      value.files.emplace_back(role->second, std::move(bytes));
    }
    return "";
  }

  // Writes a stored stage's outputs where this command names them; false when there is none to use.
  bool reuse(const std::string& key, const std::map<std::string, std::string>& roles, const std::string& what,
             Stage::Kind kind, std::size_t slot) {
    auto stored = store_.load(key);
    if (!stored) return false;
    auto value = deserialize(*stored);
    if (!value) return false;
    std::vector<std::pair<std::string, std::string>> writes;
    for (auto& [role, bytes] : value->files) {
      auto here = roles.find(role);
      if (here == roles.end()) return false;
      for (const auto& [option, path] : roles) util::replace_all(bytes, role_token(option), path);
      if (bytes.find("\x01kache-role") != std::string::npos) return false;
      writes.emplace_back(util::absolute_path(here->second, run_.cwd), std::move(bytes));
    }
    for (const auto& [path, bytes] : writes) {
      if (!util::path_starts_with(path, run_.scratch_dir)) return false;
      try {
        util::write_file(path, bytes);
      } catch (const std::exception&) {
        return false;
      }
    }
    slots_[slot].first += value->out;
    slots_[slot].second += value->err;
    store_.count(std::string(core::counter::kStageHitsPrefix) + kind_name(kind));
    store_.count(std::string(core::counter::kStageMsSavedPrefix) + kind_name(kind), value->ms);
    store_.note("reused " + what);
    core::log().debug("stage: reused {} ({} ms saved)", what, value->ms);
    return true;
  }

  const StageRun& run_;
  const StagePlan& plan_;
  StageStore& store_;
  util::Environment child_env_;
  std::string search_path_;
  // A stage sent to remote execution: its outputs' file names (what a later stage waits on) and its end.
  struct Pending {
    std::vector<std::string> output_names;
    std::shared_future<void> done;
  };

  std::mutex mu_;  // result_ and failed_, written by the remote stages' tasks
  util::ProcessResult result_{0, 0, {}, {}};
  bool failed_ = false;  // a command failed: result_ holds its status
  std::vector<std::pair<std::string, std::string>> slots_;  // each stage's stdout and stderr, in order
  std::optional<std::string> abort_why_;  // a task's reason to run nvcc whole
  std::vector<Pending> pending_;
};

}  // namespace

std::optional<std::pair<std::string, std::string>> dry_run_variable(std::string_view body) {
  const auto eq = body.find('=');
  if (eq == std::string_view::npos || eq == 0 || std::isdigit(static_cast<unsigned char>(body[0]))) return std::nullopt;
  const std::string_view name = body.substr(0, eq);
  // nvcc.profile's names: letters, digits, '_' (and '-', which a profile may use).
  if (!std::all_of(name.begin(), name.end(), [](char c) { return is_name_char(c) || c == '-'; })) return std::nullopt;
  return std::make_pair(std::string(name), std::string(body.substr(eq + 1)));
}

std::variant<std::string, StagePlan> parse_dry_run(const std::string& text, const util::Environment& env) {
  StagePlan plan;
  std::istringstream lines(text);
  std::string line;
  constexpr std::string_view kFilter = "-- Filter Dependencies -- > ";
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    // nvcc's own messages (a warning) come between its commands: the replay could not place them.
    if (!line.starts_with("#$ ")) return std::string("nvcc-message");
    const std::string body = line.substr(3);
    if (auto var = dry_run_variable(body)) {
      plan.variables.push_back(std::move(*var));
      continue;
    }
    Stage s;
    if (body.starts_with(kFilter)) {
      s.kind = Stage::Kind::filter_dependencies;
      auto words = shell_words(std::string_view(body).substr(kFilter.size()), plan.variables, env);
      if (!words || words->size() != 1) return std::string("shell-syntax");
      s.path = (*words)[0];
      plan.stages.push_back(std::move(s));
      continue;
    }
    auto words = shell_words(body, plan.variables, env);
    if (!words) return std::string("shell-syntax");
    if (words->empty()) continue;
    s.words = std::move(*words);
    const std::string name = program_name(s.words[0]);
    if (name == "rm") {
      s.kind = Stage::Kind::remove;
    } else if (name == "cicc") {
      s.kind = Stage::Kind::cicc;
    } else if (name == "ptxas") {
      s.kind = Stage::Kind::ptxas;
    }
    plan.stages.push_back(std::move(s));
  }
  if (plan.stages.empty()) return std::string("no-stages");
  return plan;
}

std::optional<std::string> filter_dependencies(const std::string& target, const std::vector<std::string>& preprocessed,
                                               bool without_system_headers) {
  // Names as make reads them without escaping (nvcc's escaping of the others is not known here).
  auto plain = [](std::string_view name) { return name.find_first_of(" \t\\#$\"'") == std::string_view::npos; };
  if (!plain(target)) return std::nullopt;
  std::vector<std::string> names;
  std::unordered_set<std::string> seen;
  for (const auto& path : preprocessed) {
    std::string text;
    try {
      text = util::read_file(path);
    } catch (const std::exception&) {
      return std::nullopt;
    }
    // GCC's line markers: `# 12 "name" flags` at a line's start.
    bool saw_marker = false;
    for (std::size_t pos = 0; pos < text.size();) {
      std::size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      const std::string_view l(text.data() + pos, end - pos);
      pos = end + 1;
      if (l.size() < 4 || l[0] != '#' || l[1] != ' ' || !std::isdigit(static_cast<unsigned char>(l[2]))) continue;
      const std::size_t open = l.find('"');
      if (open == std::string_view::npos) continue;
      const std::size_t close = l.find('"', open + 1);
      if (close == std::string_view::npos) return std::nullopt;
      const std::string_view name = l.substr(open + 1, close - open - 1);
      if (name.starts_with('<')) continue;  // <built-in>, <command-line>
      // nvcc lists the main file (each file's first marker) and the files entered (flag 1), not the names
      // of #line directives (a marker without flags; bison and flex output name their grammar so).
      const bool first_marker = !saw_marker;
      saw_marker = true;
      std::string_view marker_flags = l.substr(close + 1);
      bool enters = false;
      for (std::size_t f = 0; f < marker_flags.size(); ++f) {
        if (marker_flags[f] == '1' && (f == 0 || marker_flags[f - 1] == ' ') &&
            (f + 1 == marker_flags.size() || marker_flags[f + 1] == ' ')) {
          enters = true;
        }
      }
      if (!first_marker && !enters) continue;
      // -MMD: nvcc leaves out what GCC marks as a system header (flag 3), which GCC also gives every
      // header such a header includes (measured: a -I header included from an -isystem one).
      if (without_system_headers) {
        std::string_view flags = l.substr(close + 1);
        bool system = false;
        while (!flags.empty()) {
          const std::size_t b = flags.find_first_not_of(' ');
          if (b == std::string_view::npos) break;
          flags.remove_prefix(b);
          const std::size_t e = std::min(flags.find(' '), flags.size());
          if (flags.substr(0, e) == "3") system = true;
          flags.remove_prefix(e);
        }
        if (system) continue;
      }
      if (!plain(name)) return std::nullopt;
      if (seen.insert(std::string(name)).second) names.emplace_back(name);
    }
  }
  std::string out = target + " :";
  for (std::size_t i = 0; i < names.size(); ++i) out += (i == 0 ? " " : " \\\n    ") + names[i];
  out += "\n";
  return out;
}

namespace {

// A -E stage as a command printing its output: its -o and the value after it dropped, its program
// found along the dry run's PATH.
std::optional<PreprocessCommand> printing_pass(const Stage& s, const StagePlan& plan, const util::Environment& env,
                                               const std::string& cwd) {
  PreprocessCommand cmd;
  for (std::size_t i = 0; i < s.words.size(); ++i) {
    if (i > 0 && s.words[i] == "-o") {
      ++i;
      continue;
    }
    if (i > 0 && s.words[i].starts_with("-o")) return std::nullopt;  // an output spelled another way
    if (s.words[i].starts_with("-D__CUDA_ARCH__=")) cmd.pass = s.words[i];
    cmd.argv.push_back(s.words[i]);
  }
  if (cmd.pass.empty()) cmd.pass = "host";
  const std::string& program = s.words[0];
  if (program.find('/') != std::string::npos) {
    cmd.program = util::absolute_path(program, cwd);
  } else {
    auto found = util::find_executable(program, lookup(plan.variables, env, "PATH"));
    if (!found) return std::nullopt;
    cmd.program = *found;
  }
  cmd.env = env;
  for (const auto& [name, value] : plan.variables) util::env_set(cmd.env, name, value);
  return cmd;
}

}  // namespace

std::variant<std::string, std::vector<PreprocessCommand>> preprocessing_passes(const std::string& nvcc_path,
                                                                               const std::vector<std::string>& argv,
                                                                               const util::Environment& env,
                                                                               const std::string& cwd) {
  std::vector<std::string> dry = argv;
  dry.insert(dry.begin() + 1, "--dryrun");
  util::ProcessResult listed;
  try {
    listed = util::run_capture(nvcc_path, dry, env);
  } catch (const std::exception&) {
    return std::string("dry-run");
  }
  if (!listed.ok()) return std::string("dry-run");
  auto parsed = parse_dry_run(listed.out + listed.err, env);
  if (auto* why = std::get_if<std::string>(&parsed)) return *why;
  const StagePlan& plan = std::get<StagePlan>(parsed);
  std::vector<PreprocessCommand> passes;
  for (const Stage& s : plan.stages) {
    if (s.kind != Stage::Kind::run || std::find(s.words.begin(), s.words.end(), "-E") == s.words.end()) continue;
    auto cmd = printing_pass(s, plan, env, cwd);
    if (!cmd) return std::string("preprocessing-command");
    passes.push_back(std::move(*cmd));
  }
  if (passes.empty()) return std::string("no-preprocessing");
  return passes;
}

std::variant<std::string, util::ProcessResult> run_stages(const StageRun& run, StageStore& store) {
  std::vector<std::string> dry = run.argv;
  dry.insert(dry.begin() + 1, "--dryrun");
  util::ProcessResult listed;
  try {
    listed = util::run_capture(run.nvcc_path, dry, run.env);
  } catch (const std::exception&) {
    return std::string("dry-run");
  }
  if (!listed.ok()) return std::string("dry-run");
  auto plan = parse_dry_run(listed.out + listed.err, run.env);
  if (auto* why = std::get_if<std::string>(&plan)) return *why;
  // Removals outside the scratch directory belong to a trajectory not modelled here (--threads keeps
  // the tools' messages in /tmp and removes them).
  for (const Stage& s : std::get<StagePlan>(plan).stages) {
    if (s.kind != Stage::Kind::remove) continue;
    for (std::size_t i = 1; i < s.words.size(); ++i) {
      if (!util::path_starts_with(util::absolute_path(s.words[i], run.cwd), run.scratch_dir)) {
        return std::string("remove-outside");
      }
    }
  }
  Runner runner(run, std::get<StagePlan>(plan), store);
  return runner.go();
}

}  // namespace kache::compiler::nvcc
