#include "core/stats.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <system_error>

#include "core/log.hpp"
#include "util/beneath.hpp"
#include "util/cache_umask.hpp"
#include "util/fs.hpp"
#include "util/hash.hpp"
#include "util/lock.hpp"
#include "util/scoped_file.hpp"

namespace kache::core {

namespace {

using Counters = std::map<std::string, std::uint64_t>;

constexpr std::string_view kRecordMark = "@k1 ";
constexpr std::size_t kChecksumHex = 16;
constexpr const char* kTotals = "stats";
constexpr const char* kJournal = "stats.journal";
constexpr std::size_t kMaxTotalsBytes = 1u << 20;  // a few hundred counters; larger is not ours
constexpr std::size_t kMaxJournalBytes = 64u << 20;

void add_saturating(Counters& counters, std::string_view name, std::uint64_t value) {
  std::uint64_t& c = counters[std::string(name)];
  c = c > UINT64_MAX - value ? UINT64_MAX : c + value;  // saturate rather than wrap
}

bool parse_u64(std::string_view text, std::uint64_t& v) {
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  return !text.empty() && ec == std::errc() && ptr == text.data() + text.size();
}

// Calls fn(line) for every newline-terminated line; an unterminated tail (a record being written, or cut
// short) is not a line.
template <typename Fn>
void for_each_line(std::string_view text, Fn&& fn) {
  for (std::size_t nl; (nl = text.find('\n')) != std::string_view::npos; text.remove_prefix(nl + 1)) {
    fn(text.substr(0, nl));
  }
}

// The totals file: "name value" lines; anything else is ignored.
void parse_totals(std::string_view text, Counters& out) {
  std::string with_nl;
  if (!text.empty() && text.back() != '\n') {  // the last line of a hand-edited file may lack its newline
    with_nl = std::string(text) + '\n';
    text = with_nl;
  }
  for_each_line(text, [&](std::string_view line) {
    std::size_t sp = line.rfind(' ');
    if (sp == std::string_view::npos || sp == 0) return;  // not "name value": ignore
    std::uint64_t v = 0;
    if (parse_u64(line.substr(sp + 1), v)) add_saturating(out, line.substr(0, sp), v);
  });
}

std::string checksum_hex(std::string_view payload) {
  char buf[kChecksumHex + 1];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(util::xxh64(payload)));
  return std::string(buf, kChecksumHex);
}

// Journal records. A record torn by a crash may be followed on the same line by the next one: the
// last mark on the line starts the record that is checked.
void parse_journal(std::string_view text, Counters& out) {
  for_each_line(text, [&](std::string_view line) {
    const std::size_t mark = line.rfind(kRecordMark);
    if (mark == std::string_view::npos) return;
    line.remove_prefix(mark + kRecordMark.size());
    if (line.size() < kChecksumHex + 1 || line[kChecksumHex] != ' ') return;
    const std::string_view payload = line.substr(kChecksumHex + 1);
    if (checksum_hex(payload) != line.substr(0, kChecksumHex)) return;
    Counters record;
    std::string_view rest = payload;
    while (!rest.empty()) {
      const std::size_t a = rest.find(' ');
      if (a == std::string_view::npos) return;  // a name without its value: the record is malformed
      const std::size_t b = rest.find(' ', a + 1);
      std::uint64_t v = 0;
      if (!parse_u64(rest.substr(a + 1, b == std::string_view::npos ? b : b - a - 1), v)) return;
      add_saturating(record, rest.substr(0, a), v);
      rest = b == std::string_view::npos ? std::string_view() : rest.substr(b + 1);
    }
    for (const auto& [name, v] : record) add_saturating(out, name, v);
  });
}

std::string serialize(const Counters& counters) {
  std::string out;
  for (const auto& [name, value] : counters) {
    out += name;
    out += ' ';
    out += std::to_string(value);
    out += '\n';
  }
  return out;
}

// A name must survive both line formats.
bool valid_name(const std::string& name) { return !name.empty() && name.find_first_of(" \t\r\n") == std::string::npos; }

// The totals file, "" when absent; refused (a FIFO, a link, a directory) like an absent one.
std::string read_if_present(const util::Beneath& cache) {
  return cache.read_regular(kTotals, nullptr, kMaxTotalsBytes).value_or(std::string());
}

// The journal, at most kMaxJournalBytes: compaction keeps it near kCompactAt, so a larger one is not
// ours (a group member's `truncate -s 1T` would otherwise have every compile read a terabyte under the
// lock). nullopt when over the bound.
std::optional<std::string> read_journal(int fd, const std::string& what) {
  std::string out;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "read " + what);
    }
    if (n == 0) return out;
    if (out.size() + static_cast<std::size_t>(n) > kMaxJournalBytes) return std::nullopt;
    out.append(buf, static_cast<std::size_t>(n));
  }
}

// Bounded (util::LockTimeout): a process stopped mid-compaction must not stall every compile.
void lock(int fd, int how, const std::string& what) { util::lock_bounded(fd, how, what); }

// The cache dir others may write (a group-shared cache): the journal and the totals are opened below
// it, no link followed and no FIFO waited on. With create, a missing cache dir is created.
util::Beneath open_cache(const std::string& dir, bool create) {
  if (create) {
    try {
      return util::Beneath(dir);
    } catch (const std::system_error& e) {
      if (e.code().value() != ENOENT) throw;
    }
    util::create_directories(dir);
  }
  return util::Beneath(dir);
}

// The journal opened with `flags`; invalid when absent without O_CREAT. Anything but a regular file
// there throws: a compile's increment is dropped, a reader reads the totals alone.
util::UniqueFd open_journal(const util::Beneath& cache, int flags) {
  std::string refused;
  // Creating it (a count, kache -z) replaces a FIFO, link or directory planted in its place.
  util::UniqueFd fd = (flags & O_CREAT) ? cache.open_replacing_plant(kJournal, flags, 0666, &refused)
                                        : cache.open_regular(kJournal, flags, 0666, &refused);
  if (fd.get() < 0 && !refused.empty()) {
    throw std::system_error(EINVAL, std::generic_category(), cache.path() + "/" + kJournal + " is " + refused);
  }
  return fd;
}

}  // namespace

void count_reason(Counters& increments, ReasonCategory category, std::string_view name) {
  if (category == ReasonCategory::Passthrough) increments[counter::kPassthrough]++;
  if (category == ReasonCategory::Error) increments[counter::kErrors]++;
  increments[counter_name(category, name)]++;
}

std::optional<double> OutcomeTotals::hit_rate() const {
  if (cacheable() == 0) return std::nullopt;
  return 100.0 * static_cast<double>(hits) / static_cast<double>(cacheable());
}

OutcomeTotals outcome_totals(const Counters& counters) {
  auto get = [&](const char* name) {
    const auto it = counters.find(name);
    return it == counters.end() ? std::uint64_t{0} : it->second;
  };
  return {get(counter::kHits), get(counter::kMisses), get(counter::kPassthrough), get(counter::kErrors),
          get(counter::kCompileFailed)};
}

std::uint64_t StatsSnapshot::get(const std::string& name) const {
  auto it = counters.find(name);
  return it == counters.end() ? 0 : it->second;
}

StatsFile::StatsFile(std::string cache_dir) : dir_(std::move(cache_dir)) {}

void StatsFile::add(const Counters& increments) noexcept {
  try {
    std::string payload;
    for (const auto& [name, value] : increments) {
      if (value == 0 || !valid_name(name)) continue;
      if (!payload.empty()) payload += ' ';
      payload += name;
      payload += ' ';
      payload += std::to_string(value);
    }
    if (payload.empty()) return;
    std::string record;
    record.reserve(kRecordMark.size() + kChecksumHex + payload.size() + 2);
    record += kRecordMark;
    record += checksum_hex(payload);
    record += ' ';
    record += payload;
    record += '\n';
    const std::string path = util::join_path(dir_, kJournal);
    util::CacheUmaskScope cache_umask;
    std::uint64_t end = 0;
    {
      util::UniqueFd fd = open_journal(open_cache(dir_, true), O_WRONLY | O_APPEND | O_CREAT);
      lock(fd.get(), LOCK_SH, path);
      // One write: O_APPEND places it whole at the end, after every other writer's record.
      util::write_fully(fd.get(), record, path);
      const off_t pos = ::lseek(fd.get(), 0, SEEK_CUR);
      end = pos > 0 ? static_cast<std::uint64_t>(pos) : 0;
    }  // closing releases the shared lock before a compaction asks for the exclusive one
    if (end > kCompactAt) compact();
  } catch (...) {
    // Counting must never fail a build: the increment is dropped.
  }
}

StatsSnapshot StatsFile::read() const {
  StatsSnapshot snap;
  std::optional<util::Beneath> cache;
  try {
    cache.emplace(dir_);
  } catch (const std::system_error&) {
    return snap;  // no cache dir: nothing counted yet
  }
  const std::string path = util::join_path(dir_, kJournal);
  util::UniqueFd fd;
  try {
    fd = open_journal(*cache, O_RDONLY);
  } catch (const std::system_error& e) {
    core::log().warn("{}; reading the totals without it.", e.what());
  }
  if (fd.get() >= 0) {
    try {
      lock(fd.get(), LOCK_SH, path);  // no compaction halfway through while we read
    } catch (const util::LockTimeout&) {
      // A compaction stopped halfway: read anyway; a record may show in both files until it resumes.
    }
  }
  parse_totals(read_if_present(*cache), snap.counters);
  if (fd.get() >= 0) {
    if (const std::optional<std::string> journal = read_journal(fd.get(), path)) {
      parse_journal(*journal, snap.counters);
    } else {
      core::log().warn("{} is larger than kache ever writes it; reading the totals without it.", path);
    }
  }
  return snap;
}

void StatsFile::compact() {
  util::CacheUmaskScope cache_umask;
  const util::Beneath cache = open_cache(dir_, false);
  const std::string path = util::join_path(dir_, kJournal);
  util::UniqueFd fd = open_journal(cache, O_RDWR);
  if (fd.get() < 0) return;       // nothing journalled
  lock(fd.get(), LOCK_EX, path);  // no writer is mid-record now; new ones wait
  const std::optional<std::string> journal = read_journal(fd.get(), path);
  if (journal && journal->empty()) return;
  Counters totals;
  parse_totals(read_if_present(cache), totals);
  // One larger than kache ever writes is dropped, not read: the counts it may hold are lost.
  if (journal) parse_journal(*journal, totals);
  // Totals first, then the truncation: a crash between the two counts the journal twice rather than
  // losing it.
  if (!cache.write_atomic(kTotals, serialize(totals)))
    throw std::runtime_error("cannot replace " + util::join_path(dir_, kTotals));
  if (::ftruncate(fd.get(), 0) != 0) throw std::system_error(errno, std::generic_category(), "truncate " + path);
}

void StatsFile::zero() {
  util::CacheUmaskScope cache_umask;
  const util::Beneath cache = open_cache(dir_, true);
  const std::string path = util::join_path(dir_, kJournal);
  util::UniqueFd fd = open_journal(cache, O_RDWR | O_CREAT);
  lock(fd.get(), LOCK_EX, path);
  if (!cache.write_atomic(kTotals, "")) throw std::runtime_error("cannot replace " + util::join_path(dir_, kTotals));
  if (::ftruncate(fd.get(), 0) != 0) throw std::system_error(errno, std::generic_category(), "truncate " + path);
}

}  // namespace kache::core
