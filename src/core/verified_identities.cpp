#include "core/verified_identities.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>

#include "core/log.hpp"
#include "util/beneath.hpp"
#include "util/cache_umask.hpp"
#include "util/scoped_file.hpp"

namespace kache::core {

namespace {

constexpr std::string_view kRecordMark = "I1 ";

std::string check_hex(std::string_view payload) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(util::xxh64(payload)));
  return std::string(buf, 16);
}

}  // namespace

std::string VerifiedIdentities::key_of(Kind kind, std::string_view path, const util::FileIdentity& id) {
  std::string key(1, static_cast<char>(kind));
  key += util::xxh128_hex(path);
  key += ':';
  key += util::identity_text(id);
  return key;
}

std::string VerifiedIdentities::format_record(Kind kind, std::string_view path, const util::FileIdentity& id,
                                              const util::Digest& digest) {
  std::string payload(kRecordMark);
  payload += key_of(kind, path, id);
  payload += ' ';
  payload += digest.hex();
  return payload + ' ' + check_hex(payload) + '\n';
}

bool VerifiedIdentities::parse_record(std::string_view line, std::string& key, util::Digest& digest) {
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  const std::size_t last = line.rfind(' ');
  if (last == std::string_view::npos || !line.starts_with(kRecordMark)) return false;
  const std::string_view payload = line.substr(0, last);
  // The last space may lie inside the mark itself ("...\n" cut short): no payload then (libFuzzer found it).
  if (payload.size() < kRecordMark.size()) return false;
  if (line.substr(last + 1) != check_hex(payload)) return false;  // torn or damaged
  const std::string_view rest = payload.substr(kRecordMark.size());
  const std::size_t space = rest.find(' ');
  if (space == std::string_view::npos || space == 0) return false;
  if (!util::Digest::from_hex(rest.substr(space + 1), digest)) return false;
  key.assign(rest.substr(0, space));
  return true;
}

void VerifiedIdentities::load() {
  loaded_ = true;
  std::string data;
  try {
    // Below the cache dir's descriptor (util::Beneath), as every file of a cache dir others may write:
    // a FIFO planted there is never waited on, a link never followed; either is no record. A file far
    // past the bound (someone else's) is not read either: flush() starts it over.
    std::string refused;
    std::optional<std::string> read =
        util::Beneath(util::dirname(path_)).read_regular(util::basename(path_), &refused, 4 * kMaxBytes);
    if (!read) {
      if (!refused.empty()) log().debug("verified identities {}: {}, ignored", path_, refused);
      return;
    }
    data = std::move(*read);
  } catch (const std::exception&) {
    return;  // none yet (or unreadable): nothing is known
  }
  std::string key;
  util::Digest digest;
  for (std::size_t pos = 0; pos < data.size();) {
    std::size_t end = data.find('\n', pos);
    if (end == std::string::npos) break;  // a record still being written, or torn
    if (parse_record(std::string_view(data).substr(pos, end - pos), key, digest)) known_[key] = digest;
    pos = end + 1;
  }
}

bool VerifiedIdentities::verified(Kind kind, std::string_view path, const util::FileIdentity& id,
                                  const util::Digest& digest) {
  if (!loaded_) load();
  auto it = known_.find(key_of(kind, path, id));
  return it != known_.end() && it->second == digest;
}

void VerifiedIdentities::add(Kind kind, std::string_view path, const util::FileIdentity& id,
                             const util::Digest& digest) {
  known_[key_of(kind, path, id)] = digest;
  pending_ += format_record(kind, path, id, digest);
}

void VerifiedIdentities::flush() {
  if (pending_.empty()) return;
  const std::string records = std::exchange(pending_, {});
  try {
    util::CacheUmaskScope cache_umask;
    const util::Beneath cache_dir(util::dirname(path_));
    const std::string name = util::basename(path_);
    std::string refused;
    util::UniqueFd fd = cache_dir.open_regular(name, O_WRONLY | O_APPEND | O_CREAT, 0666, &refused);
    struct stat st {};
    if (fd.get() < 0 || (::fstat(fd.get(), &st) == 0 && static_cast<std::uint64_t>(st.st_size) > kMaxBytes)) {
      // Starts over: identities of files long replaced would otherwise pile up, and a FIFO or a link
      // planted in its place is replaced (a directory stays, and nothing is recorded).
      if (!refused.empty()) log().debug("verified identities {}: {}, replaced", path_, refused);
      (void)cache_dir.write_atomic(name, records);  // best effort, like the append
      return;
    }
    // One write: O_APPEND places it whole at the end, after every other writer's records.
    util::write_fully(fd.get(), records, path_);
  } catch (const std::exception& e) {
    log().debug("cannot record verified identities: {}", e.what());
  }
}

}  // namespace kache::core
