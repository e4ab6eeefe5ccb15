#pragma once
// The files a toolchain id is computed from, shared by the adapters' toolchain probes (nvcc's and
// gcc's): each hashed program or data file with the identity it had when hashed, and each program
// named without a directory with the file it resolved to. A memoized probe is trusted while every
// file keeps its identity and every bare name still resolves the same way: a handful of stats.
#include <cstdint>
#include <future>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "util/cache_umask.hpp"
#include "util/clock.hpp"
#include "util/fs.hpp"
#include "util/hash.hpp"
#include "util/process.hpp"
#include "util/serial.hpp"

namespace kache::compiler {

// A file whose content is part of the toolchain id, and the identity it had when it was hashed.
struct ToolFile {
  std::string path;  // absolute
  util::FileIdentity identity;
};

// A program named without a directory, and the file it resolved to over the search path.
struct BareName {
  std::string name;
  std::string resolved;  // absolute
  // Resolved past kache's own links (/usr/lib/kache/gcc): the program kache's masquerade runs.
  bool past_kache = false;
};

struct ToolFiles {
  std::vector<ToolFile> files;
  std::vector<BareName> bare;
  std::string search_path;  // the PATH bare names resolve through
  // Paths whose identity (a directory's, or "absent") decides what a wrapper runs: a -B directory, a
  // program a wrapper tests for. Each must keep it.
  std::vector<std::pair<std::string, std::string>> watched;

  // Written as: files, bare names, search path, watched paths.
  void write(util::Writer& w) const;
  static ToolFiles read(util::Reader& r);
  // Every file keeps its identity and every bare name resolves to the same file.
  bool still_valid() const;
  // No file was changed within the file system's clock tick of `clock`, a file clock reading taken
  // before any of them was read: each identity then stands for the content read (an edit within the
  // tick could keep it, an edit after the tick cannot). A memo is written only when this holds.
  bool settled(std::int64_t clock) const;
};

// Whether a file with this identity may still change without its identity changing: modified within
// the clock tick of `clock` (util::file_clock_now_ns(), read BEFORE the file's content is: a reading
// taken after would call settled a file rewritten after the read within its tick) on the file system
// of `path`.
bool identity_is_racy(const std::string& path, const util::FileIdentity& id, std::int64_t clock);

// Adds a file's identity (or "absent") to a memo key.
void add_identity(util::Hasher& h, std::string_view name, const std::string& path);

// Collects a probe's files into a ToolFiles and their content digests under named roles. add() only
// records a file; its content is hashed by digest_pending() or hash_into(), several files at once.
//
// A file's content digest is XXH3-128 of its bytes, memoized in memo_dir/content/ by the file's path
// and identity, so probes for other environments find the same 190 MB of tools already hashed
// (memo_dir "" = no memo). XXH3 is not a cryptographic hash: someone who chooses two contents can make
// them collide. Here the content is the local toolchain's own programs (nvcc, cicc, ptxas, cc1plus,
// ...), which kache runs: whoever can replace them with a crafted twin already runs code as every user
// of the toolchain, so a collision would gain them nothing. What the digest must tell apart is an
// honest replacement (a new ptxas, a rebuilt compiler of the same size and time), and 128 bits of XXH3
// do, at a quarter of SHA-256's cost (140 ms of a new cache dir's first compile). Sources, headers and
// keys stay SHA-256.
// A toolchain program is a script whose programs kache cannot name (ProbeFiles::add_program): the
// compile passes through (reason wrapper-script) rather than be keyed without them.
struct UnreadableWrapper : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class ProbeFiles {
 public:
  ProbeFiles(ToolFiles& t, const std::string& cwd, const std::string& memo_dir)
      : t_(t), cwd_(cwd), memo_dir_(memo_dir) {}

  // Resolves a program name as the driver would (a bare name over the search path) and records the
  // result. Returns "" when it cannot be found.
  std::string resolve(const std::string& word);
  // What kache's masquerade link `name` (first on the search path) runs: the next program of that name
  // on the search path that is not kache, recorded so that another appearing there probes again.
  std::string resolve_past_kache(const std::string& name);
  // Records a file whose content becomes part of the toolchain id under `role`.
  void add(const std::string& role, const std::string& path);
  // Records a path whose identity, or absence, must hold for the memo (ToolFiles::watched).
  void watch(const std::string& path);
  // Records a program a driver runs, as named and as it resolves. A script (#!) runs more than itself:
  // a shell wrapper's interpreter, every program it runs (`exec /usr/local/cuda-13.0/bin/ptxas "$@"`,
  // the form of a toolkit's wrappers on PATH, or a bare name found on PATH) and every file it names by
  // absolute path are recorded too, followed a few levels. Throws UnreadableWrapper for a script kache
  // cannot read that off (a name built at run time, a shell construct or flag it does not read, another
  // interpreter): the compile passes through rather than be keyed without them.
  void add_program(const std::string& role, const std::string& path, int depth = 0);
  // Digests every file recorded so far that has none yet: from the content memo, else hashed over a
  // few threads (largest first, so cicc does not finish alone). A probe calls it while the processes
  // it waits on run. Throws std::system_error when a file cannot be read.
  void digest_pending();
  // digest_pending(), then every role's digest in role order.
  void hash_into(util::Hasher& h);

 private:
  struct Recorded {
    std::string role;
    std::string path;
    util::FileIdentity identity;
    std::string digest;  // "" until digested
  };
  ToolFiles& t_;
  std::string cwd_;
  std::string memo_dir_;
  std::vector<Recorded> recorded_;
  std::vector<std::string> followed_;  // programs add_program has followed (each once)
};

// What a wrapper script, and every script it runs that kache can name, may read, found from their text
// for kache's reading of a wrapper by behaviour (compiler/gcc/wrapper.hpp): the scripts themselves, the
// absolute paths they name (present or absent, each may decide what runs), the programs in command
// position, and the variables they mention. `unpinned` names a construct through which the script can
// read what no such list names (a command substitution, a redirected input, source, eval, read, cd, a
// program of another interpreter): its reading by behaviour then holds for the moment it was made only.
struct ScriptChain {
  std::vector<std::string> scripts;      // absolute; the first is the wrapper
  std::vector<std::string> named_paths;  // absolute paths named in any of them
  std::vector<std::string> variables;    // every $NAME / ${NAME...} / NAME= / export NAME
  std::vector<std::string> words;        // every word, for lookups of names of interest
  // Each program named without a directory in command position, and what it resolves to on the
  // search path ("" when not found): one appearing earlier on PATH later is what the script runs then.
  std::vector<std::pair<std::string, std::string>> commands;
  std::string unpinned;                  // "" or why the chain can read unnamed inputs
  // "" or how the chain may change the environment or working directory of what it runs in ways its
  // text does not name (source, eval, cd, env -i, exec -c, export of a computed name).
  std::string changes_environment;
  bool traces = false;                   // set -x / -o xtrace, or output redirected to stderr
};
// Reads the chain starting at `script` (a #! file), following scripts named by absolute path or found
// on `search_path` in command position, at most a few levels. Never throws; unreadable parts set
// `unpinned`.
ScriptChain read_script_chain(const std::string& script, const std::string& search_path);
// Reads more shell text into the chain as if a script of it held it (a bash wrapper's BASH_ENV file,
// an exported function's body).
void add_script_body(ScriptChain& chain, std::string_view body, const std::string& search_path);
// The first bytes of a regular file (at most n), never waiting on a FIFO or a device: "" for anything
// else or an unreadable file.
std::string regular_file_head(const std::string& path, std::size_t n);
// Whether `path` is a #! script (a regular file whose first bytes are "#!").
bool is_script(const std::string& path);

// util::run_capture on a thread of its own, answered by the future (which rethrows its failure): a
// probe starts its independent commands together (nvcc --version beside its dry run, the host
// compiler's questions) and reads their answers when it needs them. A future left unread still waits
// for its command when it goes, so no thread outlives the probe.
std::future<util::ProcessResult> start_capture(std::string exe, std::vector<std::string> argv, util::Environment env);

// One probe of a toolchain at a time. Two compiles starting together in a cache dir without the memo
// (a new machine's first `ninja -j2`) would each run nvcc's dry run and hash the same tools; instead the
// first takes an flock on `<memo>.lock` and probes, and the others wait for it here, then find its memo.
// The wait is bounded by cache.lock_timeout (util::lock_timeout_ms): a prober that is stopped or hangs
// costs the others that long, after which they probe on their own. A prober that dies lets go at once
// (the kernel drops an flock with its last descriptor). Never throws: a lock file that cannot be
// created (read-only cache dir) means no waiting.
class ProbeLock {
 public:
  // memo_path "" (no cache dir): holds nothing. The lock file is opened below the cache dir as the
  // memos are (read_memo_file): a FIFO, a link or a directory there means no lock, never a wait.
  ProbeLock(const std::string& memo_dir, const std::string& memo_path);
  ~ProbeLock();
  ProbeLock(const ProbeLock&) = delete;
  ProbeLock& operator=(const ProbeLock&) = delete;
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// The one writer and reader of the toolchain memos (nvcc's, gcc's and the offload route's). A memo names
// its fields once, in `static void fields(Self& memo, Visit&& visit)` (Self: Memo or const Memo), and
// write_memo and read_memo both walk that list, so what is read back is what was written. The bytes: the
// version (u32), then each field in order: a string as util::Writer::str, a list of strings or of
// string pairs as its u32 count and its items, the ToolFiles as ToolFiles::write.
namespace memo_detail {
struct FieldWriter {
  util::Writer& out;
  void operator()(const std::string& s) const;
  void operator()(const std::vector<std::string>& list) const;
  void operator()(const std::vector<std::pair<std::string, std::string>>& pairs) const;
  void operator()(const ToolFiles& tools) const;
};
struct FieldReader {
  util::Reader& in;
  void operator()(std::string& s) const;
  void operator()(std::vector<std::string>& list) const;
  void operator()(std::vector<std::pair<std::string, std::string>>& pairs) const;
  void operator()(ToolFiles& tools) const;
};
}  // namespace memo_detail

template <typename Memo>
std::string write_memo(std::uint32_t version, const Memo& memo) {
  util::Writer w;
  w.u32(version);
  Memo::fields(memo, memo_detail::FieldWriter{w});
  return w.take();
}

// Throws std::runtime_error for a memo of another version or damaged bytes.
template <typename Memo>
Memo read_memo(std::uint32_t version, const std::string& bytes) {
  util::Reader r(bytes);
  if (r.u32() != version) throw std::runtime_error("a memo of another version");
  Memo memo;
  Memo::fields(memo, memo_detail::FieldReader{r});
  return memo;
}

// The memos live in <cache dir>/toolchains (memo_dir), which others may write (a group-shared cache).
// Every memo file is read and written below the cache dir's own descriptor (util::Beneath): a link at
// any component is never followed, a FIFO never waited on, anything but a regular file is no memo (the
// toolchain is probed again, and the write that follows replaces a planted file or link by a rename).
// path lies in memo_dir. Neither throws: a memo that cannot be read is none, one not written is logged.
std::optional<std::string> read_memo_file(const std::string& memo_dir, const std::string& path);
void write_memo_file(const std::string& memo_dir, const std::string& path, const std::string& bytes);
// Where a probe's scratch directory goes: memo_dir while it is a real directory of the cache dir, else
// /tmp (a link planted at memo_dir would put the probe's files wherever it points).
std::string probe_scratch_parent(const std::string& memo_dir);

// The parts of memoized_probe that do not depend on the memo's type.
namespace memo_detail {
std::string memo_path(const std::string& memo_dir, const std::string& memo_key);
void log_not_kept(const std::string& memo_key, const char* why);
void prepare_dir(const std::string& memo_dir);
void log_probing(const std::string& what, const std::string& memo_key);
}  // namespace memo_detail

// A toolchain's memo at memo_dir/memo_key (memo_dir "": none): read back while `valid(memo)` holds;
// else probed, one probe per toolchain at a time (ProbeLock: a compile that waited reads the prober's
// memo), and written when every file it records is settled (a file changed within the clock tick could
// change again unseen). Memo is an adapter's probe answer: `tc` (whose from_memo says where it came
// from) and `tools` (its ToolFiles), written and read by write_memo and read_memo under `version`. The
// adapters differ only in the memo and the probe.
template <typename Memo, typename Valid, typename Probe>
Memo memoized_probe(const std::string& memo_dir, const std::string& memo_key, const std::string& what,
                    std::uint32_t version, Valid valid, Probe probe) {
  const std::string path = memo_detail::memo_path(memo_dir, memo_key);
  auto from_memo = [&]() -> std::optional<Memo> {
    const std::optional<std::string> bytes = read_memo_file(memo_dir, path);
    if (!bytes) return std::nullopt;
    try {
      Memo m = read_memo<Memo>(version, *bytes);
      if (valid(m)) {
        m.tc.from_memo = true;
        return m;
      }
      memo_detail::log_not_kept(memo_key, "is stale");
    } catch (const std::exception& e) {
      memo_detail::log_not_kept(memo_key, e.what());
    }
    return std::nullopt;
  };
  // The toolchain's files go with it to the miss, which checks after its compile that they still hold.
  auto with_files = [](Memo m) {
    m.tc.files = m.tools;
    return m;
  };
  if (auto m = from_memo()) return with_files(std::move(*m));
  // The memo lives in the cache dir: its files and directories take the cache umask (cache.umask).
  util::CacheUmaskScope cache_umask;
  memo_detail::prepare_dir(memo_dir);
  // Another compile may be probing this toolchain now: its memo, once written, is this one's answer.
  ProbeLock probe_lock(memo_dir, path);
  if (auto m = from_memo()) return with_files(std::move(*m));
  memo_detail::log_probing(what, memo_key);
  const std::int64_t probe_began = util::file_clock_now_ns();  // before the probe reads any file
  Memo m = probe();
  if (!path.empty() && m.tools.settled(probe_began)) write_memo_file(memo_dir, path, write_memo(version, m));
  return with_files(std::move(m));
}

}  // namespace kache::compiler
