#include "compiler/offload/toolchain.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <sstream>
#include <stdexcept>

#include "compiler/env_table.hpp"
#include "compiler/offload/cuda.hpp"
#include "compiler/gcc/toolchain.hpp"
#include "core/log.hpp"
#include "util/cache_umask.hpp"
#include "util/fs.hpp"
#include "util/hash.hpp"
#include "util/serial.hpp"
#include "util/shell_words.hpp"

namespace kache::compiler::offload {

std::string clang_line_value(const std::string& line, std::string_view name) {
  const std::string key = std::string(name) + "=";
  std::size_t at = line.rfind(" " + key);
  if (at == std::string::npos) return "";
  at += key.size() + 1;
  if (at < line.size() && line[at] == '"') {
    const std::size_t end = line.find('"', at + 1);
    return line.substr(at + 1, end == std::string::npos ? std::string::npos : end - at - 1);
  }
  const std::size_t end = line.find(' ', at);
  return line.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

namespace {

constexpr std::uint32_t kMemoVersion = 5;  // 5: ToolFiles::watched
// was  // 4: wrapper scripts followed (ProbeFiles::add_program)

struct Memo {
  HipccToolchain tc;
  ToolFiles tools;

  // What the memo keeps (compiler/tool_files.hpp's write_memo and read_memo walk this list).
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit&& visit) {
    for (auto* s : {&m.tc.id, &m.tc.description, &m.tc.clang, &m.tc.clang_line, &m.tc.config_include, &m.tc.clang_id})
      visit(*s);
    visit(m.tc.include_dirs);
    visit(m.tc.search_dirs);
    visit(m.tools);
  }
};

std::string env_value_field(const util::Environment& env, std::string_view name) {
  auto v = util::env_get(env, name);
  return v ? "=" + *v : "unset";
}

// The files of a directory, sorted, recursively (the bitcode directory).
std::vector<std::string> files_below(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) out.push_back(it->path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string real_path(const std::string& p) {
  std::error_code ec;
  const auto r = std::filesystem::canonical(p, ec);
  return ec ? p : r.string();
}

struct Plan {
  std::string clang_line;
  std::vector<std::vector<std::string>> jobs;
};

// The driver's first diagnostic line saying "error: ", or that it does not support the CUDA toolkit (not
// a job line, whose words may say anything).
std::string driver_error(const std::string& err) {
  std::istringstream in(err);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(" \"")) continue;
    if (line.find("error: ") != std::string::npos || is_unsupported_cuda_warning(line)) return line;
  }
  return "";
}

// The driver's plan (-###, nothing compiled); hipcc's also names the clang line it runs (HIPCC_VERBOSE).
Plan ask_driver(Driver driver, const std::string& compiler, const std::vector<std::string>& args,
                const util::Environment& env) {
  util::Environment verbose = env;
  if (driver == Driver::hipcc) util::env_set(verbose, "HIPCC_VERBOSE", "1");
  std::vector<std::string> argv = {compiler};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("-###");
  const util::ProcessResult r = util::run_capture(compiler, argv, verbose);
  // clang's -### may exit 0 with an error (clang 15: "unsupported CUDA gpu architecture: sm_90").
  if (std::string error = driver_error(r.err); r.exit_code != 0 || !error.empty()) {
    throw DriverError(error.empty() ? compiler + " -### failed" : error);
  }
  Plan p;
  std::istringstream out(r.out);
  for (std::string line; std::getline(out, line);) {
    if (line.starts_with("hipcc-cmd: ")) p.clang_line = line.substr(11);
  }
  std::istringstream err(r.err);
  for (std::string line; std::getline(err, line);) {
    if (auto w = job_words(line); !w.empty()) p.jobs.push_back(std::move(w));
  }
  if ((driver == Driver::hipcc && p.clang_line.empty()) || p.jobs.empty()) {
    throw std::runtime_error(compiler + " printed no clang line or plan");
  }
  return p;
}

}  // namespace

std::vector<std::string> job_words(const std::string& line) {
  if (!line.starts_with(" \"")) return {};
  // clang double-quotes every word of a job, escaping \ " $ in it: sh's words (util/shell_words.hpp).
  const util::ShellWords words = util::split_shell_words(line);
  if (words.end != util::ShellWords::End::complete ||
      !std::all_of(words.words.begin(), words.words.end(), [](const auto& w) { return w.raw.starts_with('"'); })) {
    return {};
  }
  return words.texts();
}

namespace {

// The include directories of the plan's cc1 jobs, each job's in its search order, first seen first.
std::vector<std::string> cc1_search_dirs(const std::vector<std::vector<std::string>>& jobs) {
  static const std::vector<std::string> kDirOptions = {"-internal-isystem", "-isystem", "-I", "-iquote",
                                                       "-internal-externc-isystem", "-idirafter"};
  std::vector<std::string> dirs;
  auto add = [&](const std::string& d) {
    if (!d.empty() && std::find(dirs.begin(), dirs.end(), d) == dirs.end()) dirs.push_back(d);
  };
  for (const auto& job : jobs) {
    if (job.size() < 2 || job[1] != "-cc1") continue;
    for (std::size_t i = 2; i < job.size(); ++i) {
      for (const auto& opt : kDirOptions) {
        if (job[i] == opt && i + 1 < job.size()) {
          add(job[++i]);
          break;
        }
        if (job[i].size() > opt.size() && job[i].starts_with(opt) && (opt == "-I" || opt == "-isystem")) {
          add(job[i].substr(opt.size()));  // joined spelling
          break;
        }
      }
    }
  }
  return dirs;
}

// The Perl that does the work. The hipcc wrapper (5.2) execs the hipcc.pl beside the path it was invoked
// by, links not followed (dirname(__FILE__)): a link to /usr/bin/hipcc in another directory runs that
// directory's hipcc.pl. hipcc.pl itself, invoked directly or through a link, is the file it resolves to.
std::string hipcc_script(const std::string& hipcc) {
  const std::string resolved = real_path(hipcc);
  if (util::basename(resolved) == "hipcc.pl") return resolved;
  const std::string beside = util::join_path(util::dirname(hipcc), "hipcc.pl");
  return util::exists(beside) ? real_path(beside) : resolved;
}

// hipcc's own files and the programs it runs itself (seen by test_hip_input_audit.py).
void add_hipcc_files(ProbeFiles& pf, const std::string& hipcc, const std::string& clang) {
  const std::string script = real_path(hipcc);
  pf.add("hipcc", script);
  // hipcc.pl loads hipvars.pm from its own real directory (Cwd::realpath(__FILE__)), and hipvars.pm reads
  // .hipVersion and .hipInfo there (dirname(abs_path($0))).
  const std::string perl = hipcc_script(hipcc);
  pf.add("hipcc.pl", perl);
  for (const char* f : {"hipvars.pm", ".hipVersion", ".hipInfo"}) {
    if (const std::string p = util::join_path(util::dirname(perl), f); util::exists(p)) pf.add(f, p);
  }
  // Its interpreter (#!), the shell it runs the clang line through, and the clang++ hipvars.pm asks
  // whether it can run.
  if (const std::string head = util::read_file(script).substr(0, 256); head.starts_with("#!")) {
    const std::string interpreter = head.substr(2, head.find_first_of(" \n") - 2);
    if (util::exists(interpreter)) pf.add("interpreter", real_path(interpreter));
  }
  pf.add("shell", real_path("/bin/sh"));
  if (const std::string cxx = util::join_path(util::dirname(clang), "clang++"); util::exists(cxx)) {
    pf.add("clang++", real_path(cxx));
  }
}

// text with each run of spaces as one, none at the ends (hipcc's line has runs where a part is empty).
std::string squeezed(const std::string& text) {
  std::istringstream in(text);
  std::string out, word;
  while (in >> word) out += (out.empty() ? "" : " ") + word;
  return out;
}

// hipcc's clang line without what it appends for the user's arguments (hipcc_tool_args): its own flags,
// the clang it chose, HIPCC_COMPILE_FLAGS_APPEND. The whole line when that tail is not found.
std::string hipcc_additions(const std::string& clang_line, std::vector<std::string> args,
                            const util::Environment& env) {
  args.push_back("-###");  // the probe's own last argument
  const auto tail = hipcc_tool_args(args, util::env_get(env, "HIP_COMPILE_CXX_AS_HIP").value_or("1") != "0");
  if (!tail || !clang_line.ends_with(*tail)) {
    core::log().debug("hipcc's clang line does not end in the arguments as expected: keyed whole");
    return clang_line;
  }
  return clang_line.substr(0, clang_line.size() - tail->size());
}

Memo probe(Driver driver, const std::string& compiler, const std::vector<std::string>& args,
           const util::Environment& env, const std::string& cwd, const std::string& memo_dir) {
  const Plan plan = ask_driver(driver, compiler, args, env);
  Memo m;
  HipccToolchain& tc = m.tc;
  tc.clang_line = plan.clang_line;
  tc.clang = driver == Driver::hipcc ? plan.clang_line.substr(0, plan.clang_line.find(' ')) : compiler;
  const gcc::Toolchain clang = gcc::probe_toolchain(tc.clang, env, memo_dir);
  tc.include_dirs = clang.include_dirs;
  tc.search_dirs = cc1_search_dirs(plan.jobs);
  tc.config_include = clang.config_include;
  tc.clang_id = clang.id;
  m.tools = clang.files;
  ProbeFiles pf(m.tools, cwd, memo_dir);
  if (driver == Driver::hipcc) add_hipcc_files(pf, compiler, tc.clang);
  if (util::exists("/usr/share/hip/version")) pf.add("hip-version", "/usr/share/hip/version");
  add_cuda_installation_files(pf, plan.jobs);
  // Every program the plan runs, and every bitcode file a device compile links.
  std::set<std::string> bitcode_dirs;
  for (const auto& job : plan.jobs) {
    pf.add_program("job", job[0]);
    for (std::size_t i = 1; i + 1 < job.size(); ++i) {
      if (job[i] == "-mlink-builtin-bitcode") {
        pf.add("bitcode", job[i + 1]);
        bitcode_dirs.insert(util::dirname(job[i + 1]));
      }
    }
  }
  // The whole bitcode directory hipcc points clang at, and every directory a linked library is in.
  const std::string bitcode_dir = clang_line_value(plan.clang_line, "--hip-device-lib-path");
  if (!bitcode_dir.empty()) bitcode_dirs.insert(bitcode_dir);
  for (const auto& dir : bitcode_dirs) {
    for (const auto& f : files_below(dir)) pf.add("bitcode-dir", f);
  }
  util::Hasher h;
  h.add_field("clang", clang.id);
  // hipcc's additions only (the user's arguments are the key's own fields), so the id names no path of
  // theirs and two build directories or checkouts get the same one.
  const std::string additions = driver == Driver::hipcc ? hipcc_additions(plan.clang_line, args, env) : "";
  h.add_field("hipcc-additions", additions);
  h.add_field("bitcode-dir", bitcode_dir);
  pf.hash_into(h);
  tc.id = h.finish().hex();
  // hipcc's additions in the description: `kache explain` then shows which flag hipcc added differently.
  tc.description = (driver == Driver::hipcc ? "hipcc -> " + squeezed(additions) + "; " : "") + clang.description;
  return m;
}

// A path hipvars.pm/hipcc.pl tests (-e, glob, a config file it reads): its identity when present, and
// that of the directory whose entries decide its presence (its parent, or its deepest present ancestor
// while absent: a directory created anywhere below changes that one's identity).
void add_tested_path(util::Hasher& h, const std::string& path) {
  add_identity(h, "tested:" + path, path);
  std::string dir = util::dirname(path);
  while (dir.size() > 1 && !util::exists(dir)) dir = util::dirname(dir);
  add_identity(h, "tested-dir:" + dir, dir);
}

// Every path hipvars.pm (HIP_PATH, ROCM_PATH, HIP_CLANG_PATH, HIP_ROCCLR_HOME, .hipInfo, .hipVersion) and
// hipcc.pl (the device library directory) test, for every value those variables may take: the env's,
// else each default hipvars.pm chooses among. More paths than one run tests cost a re-probe only.
void add_hipcc_tested_paths(util::Hasher& h, const std::string& hipcc, const util::Environment& env) {
  const std::string script_dir = util::dirname(hipcc_script(hipcc));
  const auto env_or = [&](const char* var, std::vector<std::string> defaults) {
    if (const auto v = util::env_get(env, var)) return std::vector<std::string>{*v};
    return defaults;
  };
  const std::vector<std::string> hip_paths = env_or("HIP_PATH", {util::dirname(script_dir)});
  std::vector<std::string> rocm_defaults = {"/usr", "/opt/rocm"};
  std::vector<std::string> rocclr_defaults = {util::dirname(script_dir), script_dir};
  for (const auto& hp : hip_paths) {
    rocm_defaults.insert(rocm_defaults.end(), {util::dirname(hp), hp});
    rocclr_defaults.push_back(hp);
    for (const char* f : {"/../bin/rocm_agent_enumerator", "/bin/rocm_agent_enumerator", "/lib/.hipInfo",
                          "/bin/.hipVersion"}) {
      add_tested_path(h, hp + f);
    }
  }
  for (const char* f : {"/../lib/bitcode", "/lib/bitcode"}) add_tested_path(h, script_dir + f);
  for (const auto& home : env_or("HIP_ROCCLR_HOME", rocclr_defaults)) {
    for (const char* f : {"/lib/bitcode", "/lib/.hipInfo", "/bin/clang", "/bin/clang.exe"}) add_tested_path(h, home + f);
  }
  for (const auto& rocm : env_or("ROCM_PATH", rocm_defaults)) {
    for (const char* f : {"/llvm/bin", "/amdgcn/bitcode", "/lib"}) add_tested_path(h, rocm + f);
    // glob $ROCM_PATH/lib/*/amdgcn/bitcode, the first match taken: every entry of lib/ (sorted).
    std::set<std::string> subdirs;
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator(rocm + "/lib", ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
      if (it->is_directory(ec)) subdirs.insert(it->path().string());
    }
    for (const auto& d : subdirs) add_tested_path(h, d + "/amdgcn/bitcode");
  }
}

}  // namespace

EnvRoute env_route(Driver driver) { return driver == Driver::hipcc ? EnvRoute::hipcc : EnvRoute::clang_hip; }

namespace {

// hipcc.pl's shell escaping: a backslash before every character outside [-a-zA-Z0-9_=+,./].
bool hipcc_plain_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("-_=+,./").find(c) != std::string_view::npos;
}

std::string hipcc_escaped(const std::string& arg) {
  std::string out;
  for (char c : arg) {
    if (!hipcc_plain_char(c)) out += '\\';
    out += c;
  }
  return out;
}

// The suffix hipcc.pl and clang look at: from the base name's last '.', "" without one.
std::string name_suffix(const std::string& value) {
  const std::string base = util::basename(value);
  const std::size_t dot = base.rfind('.');
  return dot == std::string::npos || dot == 0 ? "" : base.substr(dot);
}

// A value hipcc.pl passes through as it passes any other of that suffix.
bool plain_value(const std::string& value) {
  return !value.empty() && value[0] != '-' && value[0] != '@' && hipcc_inert(value) &&
         std::all_of(value.begin(), value.end(), hipcc_plain_char);
}

// " -x hip" or " -x c" where hipcc.pl puts one before an input without a -x in force.
std::string hipcc_input_language(const std::string& input, bool cxx_as_hip) {
  const auto ends = [&](const char* s) { return input.ends_with(s); };
  if (ends(".c")) return " -x c";
  if (ends(".cpp") || ends(".cxx") || ends(".cc") || ends(".C")) return cxx_as_hip ? " -x hip" : "";
  if (((ends(".cu") || ends(".cuh")) && cxx_as_hip) || ends(".hip")) return " -x hip";
  return "";
}

}  // namespace

std::optional<std::vector<std::string>> probe_line(const std::vector<std::string>& args, const ProbeStandIns& stand_ins,
                                                   const std::string& memo_dir) {
  if (memo_dir.empty() || !stand_ins.source) return std::nullopt;
  std::vector<std::string> line = args;
  const std::string& source = args[*stand_ins.source];
  if (!plain_value(source)) return std::nullopt;
  // clang's -### wants the source to exist; it reads nothing of it.
  const std::string stand_in_source = util::join_path(memo_dir, "probe/kache-probe" + name_suffix(source));
  // The cache directory's own path reaches hipcc too: one it would act on (a pattern, a character it
  // escapes) is no stand-in.
  if (!plain_value(stand_in_source)) return std::nullopt;
  if (!util::exists(stand_in_source)) {
    util::CacheUmaskScope cache_umask;
    util::create_directories(util::dirname(stand_in_source));
    util::write_file_replacing(stand_in_source, "");
  }
  line[*stand_ins.source] = stand_in_source;
  for (std::size_t n = 0; n < stand_ins.values.size(); ++n) {
    const auto& pv = stand_ins.values[n];
    const std::string value = args[pv.index].substr(pv.offset);
    if (!plain_value(value)) return std::nullopt;
    line[pv.index] = args[pv.index].substr(0, pv.offset) + "kache-probe-" + std::to_string(n) + name_suffix(value);
  }
  return line;
}

std::optional<std::string> hipcc_tool_args(const std::vector<std::string>& args, bool cxx_as_hip) {
  std::string tail, prev;
  bool output_next = false, language_given = false;
  for (std::string a : args) {
    if (output_next) {  // the -o value: quoted, never looked at
      tail += " \"" + a + "\"";
      prev = a;
      output_next = false;
      continue;
    }
    output_next = a == "-o";
    bool swallowed = a.starts_with("--offload-arch=") || a.starts_with("--amdgpu-target=") ||
                     a.find("--amdhsa-code-object-version=") != std::string::npos;
    if (a.find("--genco") != std::string::npos) a = "--cuda-device-only";
    if (a.starts_with('@') || a.starts_with("-Wl,@") || a.ends_with(".a") || a.ends_with(".lo") ||
        a.find("-use-staticlib") != std::string::npos || a.find("-use-sharedlib") != std::string::npos ||
        a.find("-fopenmp-targets=") != std::string::npos) {
      return std::nullopt;
    }
    if (a == "-x" || a == "-xc" || a == "-xc++" || a == "-xhip" || (prev == "-x" && (a == "c" || a == "c++" || a == "hip"))) {
      language_given = true;
    } else if (a.starts_with('-')) {
      swallowed = swallowed || a.starts_with("--hipcc");
    } else if (!language_given) {
      tail += hipcc_input_language(a, cxx_as_hip);
    }
    a = hipcc_escaped(a);
    if (!swallowed) tail += " " + a;
    prev = a;
  }
  return tail;
}

bool hipcc_inert(std::string_view text) {
  for (std::string_view pattern : {"--genco", "--amdhsa-code-object-version=", "-Wl,", "-fopenmp-targets="}) {
    if (text.find(pattern) != std::string_view::npos) return false;
  }
  return true;
}


HipccToolchain probe_offload(Driver driver, const std::string& hipcc, const std::vector<std::string>& user_args,
                             const ProbeStandIns& stand_ins, const util::Environment& env, const std::string& cwd,
                             const std::string& memo_dir) {
  // The line asked about: stand-ins for the compile's own file names where they are plain, so the memo
  // serves every file compiled with these flags here.
  const auto stand_in_line = probe_line(user_args, stand_ins, memo_dir);
  const std::vector<std::string>& args = stand_in_line ? *stand_in_line : user_args;
  util::Hasher mk;
  mk.add_field("memo", "hipcc-" + std::to_string(kMemoVersion));
  mk.add_field("driver", driver == Driver::hipcc ? "hipcc" : "clang");
  mk.add_field("hipcc", hipcc);
  add_identity(mk, "hipcc-id", hipcc);
  // Where hipvars.pm looks for installations (-e tests): a directory appearing there changes the
  // identity of the one it appears in.
  // The directory hipcc was invoked from decides which hipcc.pl runs (a link to hipcc elsewhere).
  for (const std::string& dir : {util::dirname(hipcc), util::dirname(hipcc_script(hipcc)), util::dirname(real_path(hipcc)),
                                 std::string("/opt"), std::string("/opt/rocm")}) {
    add_identity(mk, "dir:" + dir, dir);
  }
  if (driver == Driver::hipcc) add_hipcc_tested_paths(mk, hipcc, env);
  if (driver == Driver::clang) add_cuda_detection(mk, args, env);
  mk.add_field("cwd", cwd);
  mk.add_field("line", stand_in_line ? "stand-ins" : "as-given");
  for (const auto& a : args) mk.add_field("arg", a);
  // What the table says changes the driver's answer (hipcc's and clang's HIP variables, PATH...).
  for (std::string_view var : probe_variables(env_route(driver))) {
    mk.add_field("env:" + std::string(var), env_value_field(env, var));
  }
  const std::string memo_key = mk.finish().hex();
  core::log().trace("hipcc memo key = {}", memo_key);
  // Kept while its files hold and the clang behind it still answers the same (its own memo: a GCC
  // installation appearing beside it changes its include dirs).
  auto valid = [&](const Memo& m) {
    return m.tools.still_valid() && gcc::probe_toolchain(m.tc.clang, env, memo_dir).id == m.tc.clang_id;
  };
  Memo m = memoized_probe<Memo>(memo_dir, memo_key, hipcc, kMemoVersion, valid,
                                [&] { return probe(driver, hipcc, args, env, cwd, memo_dir); });
  return m.tc;
}

}  // namespace kache::compiler::offload
