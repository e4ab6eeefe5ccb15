#include "storage/remote/remote_store.hpp"

#include <utility>

#include "core/log.hpp"
#include "util/hash.hpp"

namespace kache::storage::remote {

std::vector<core::DoctorRow> RemoteBackend::probe(std::string_view probe_key) {
  using Level = core::DoctorStatus;
  const std::string shown = name();
  std::vector<core::DoctorRow> rows;
  try {
    (void)get(probe_key);
    rows.push_back(remote_row("reachable", Level::ok, shown + ": answers, credentials accepted", "", ""));
    if (read_only()) {
      rows.push_back(remote_row("writable", Level::ok, shown + ": read-only (as configured)", "", ""));
    } else {
      put(probe_key, "kache doctor");
      remove(probe_key);
      rows.push_back(remote_row("writable", Level::ok, shown + ": yes", "", ""));
    }
  } catch (const RemoteError& e) {
    const bool auth = e.kind() == RemoteFailure::Kind::auth;
    rows.push_back(remote_row(auth ? "authenticated" : "reachable", Level::fail, shown,
                              std::string(e.what()) + ": every compile skips this remote (" +
                                  (auth ? "the credentials are refused" : "it does not answer") + ").",
                              auth ? "correct the password (KACHE_REMOTE_PASSWORD or the URL) or the user"
                                   : "start the server, or correct remote.storage, or remove it"));
  } catch (const std::exception& e) {
    rows.push_back(remote_row("reachable", Level::fail, shown, std::string(e.what()) + ".",
                              "correct remote.storage, or remove it"));
  }
  return rows;
}

RemoteStore::RemoteStore(std::unique_ptr<RemoteBackend> backend, std::string identity,
                         const RemoteStoreOptions& options)
    : backend_(std::move(backend)), max_entry_size_(options.max_entry_size), signing_key_(options.signing_key) {
  if (!options.breaker_dir.empty()) {
    BreakerOptions breaker;
    breaker.dir = options.breaker_dir;
    breaker_.emplace(std::move(breaker), identity);
  }
}

// A remote that refuses, cannot be reached or does not answer in time: a warning (kache.log, and the
// build's stderr once), since every compile then goes on without it. Said once per compile: the
// layers switch the remote off after its first failure.
void RemoteStore::warn_failed(const char* doing, const char* what) const {
  core::log().warn("remote storage {} failed to {}: {}; compiles go on with the local cache only (`kache doctor` "
                   "checks the remote)",
                   name(), doing, what);
}

// Runs one operation of the backend under the breaker: a server the breaker holds open is not asked
// (a failure of kind error, so the layers switch it off for this compile); a RemoteError becomes the
// typed failure and counts towards opening the breaker.
template <typename T, typename Op>
StorageResult<T> RemoteStore::guarded(const char* doing, Op op) {
  const Breaker::Decision decision = breaker_ ? breaker_->decide() : Breaker::Decision::use;
  if (decision == Breaker::Decision::skip) {
    counts_["remote_skipped"]++;
    return StorageFailure{StorageFailure::Kind::error, name() + " is skipped after repeated failures"};
  }
  try {
    T value = op();
    if (breaker_) breaker_->record_success();
    return value;
  } catch (const RemoteError& e) {
    if (breaker_) breaker_->record_failure();
    const bool timeout = e.kind() == RemoteFailure::Kind::timeout;
    counts_[timeout ? "remote_timeouts" : "remote_errors"]++;
    if (e.kind() == RemoteFailure::Kind::auth) {
      // A configuration mistake, not an outage: said once per compile, until the breaker opens.
      core::log().warn("remote storage {} refused the credentials while trying to {}: {}", name(), doing, e.what());
    } else {
      warn_failed(doing, e.what());
    }
    return StorageFailure{timeout ? StorageFailure::Kind::timeout : StorageFailure::Kind::error, e.what()};
  } catch (const std::exception& e) {
    if (breaker_) breaker_->record_failure();
    counts_["remote_errors"]++;
    warn_failed(doing, e.what());
    return StorageFailure{StorageFailure::Kind::error, e.what()};
  }
}

StorageLookup RemoteStore::get(std::string_view key) {
  bool oversized = false;
  StorageLookup r = guarded<std::optional<std::string>>("read", [&]() -> std::optional<std::string> {
    try {
      return backend_->get(key);
    } catch (const OversizedValue& e) {
      // The server answered; what it holds is no entry kache wrote within the bound.
      oversized = true;
      core::log().debug("{}", e.what());
      return std::nullopt;
    }
  });
  if (!r) return r;
  if (!*r && !oversized) {
    counts_["remote_misses"]++;
    return r;
  }
  if (oversized || (*r)->size() > max_entry_size_) {
    // Never decoded: a value this large is no entry kache wrote within the configured bound.
    counts_["remote_oversized"]++;
    core::log().info("remote storage {}: a value exceeds remote.max_entry_size ({} bytes)", name(), max_entry_size_);
    return std::optional<std::string>();
  }
  counts_["remote_bytes_read"] += (*r)->size();
  switch (open_signed(signing_key_, key, **r)) {
    case Signature::valid:
      break;
    case Signature::absent:
      if (signing_key_.empty()) break;
      counts_["remote_unsigned"]++;
      core::log().info("remote storage {}: an unsigned value is refused (remote.signing_key_file is set)", name());
      return std::optional<std::string>();
    case Signature::invalid:
      counts_["remote_bad_signature"]++;
      core::log().warn("remote storage {}: a value with a wrong signature is refused", name());
      return std::optional<std::string>();
  }
  counts_["remote_hits"]++;
  return r;
}

namespace {
constexpr std::string_view kSignatureMagic = "KACHESG1";
constexpr std::size_t kTrailerSize = 32 + kSignatureMagic.size();

util::Digest value_mac(std::string_view signing_key, std::string_view key, std::string_view value) {
  std::string message = "kache-remote-1";
  message.push_back('\0');
  message.append(key);
  message.push_back('\0');
  message.append(value);
  return util::hmac_sha256(signing_key, message);
}
}  // namespace

std::string sign_value(std::string_view signing_key, std::string_view key, std::string_view value) {
  const util::Digest mac = value_mac(signing_key, key, value);
  std::string out(value);
  out.append(reinterpret_cast<const char*>(mac.bytes.data()), mac.bytes.size());
  out.append(kSignatureMagic);
  return out;
}

Signature open_signed(std::string_view signing_key, std::string_view key, std::string& value) {
  if (value.size() < kTrailerSize || !std::string_view(value).ends_with(kSignatureMagic)) return Signature::absent;
  const std::string_view payload(value.data(), value.size() - kTrailerSize);
  const std::string_view mac(value.data() + payload.size(), 32);
  Signature result = Signature::valid;
  if (!signing_key.empty()) {
    const util::Digest want = value_mac(signing_key, key, payload);
    // Constant time: the comparison must not tell a forger how many bytes were right.
    unsigned char diff = 0;
    for (std::size_t i = 0; i < 32; ++i) diff |= static_cast<unsigned char>(mac[i]) ^ want.bytes[i];
    if (diff != 0) result = Signature::invalid;
  }
  value.resize(payload.size());
  return result;
}

StorageStatus RemoteStore::put(std::string_view key, std::string_view bytes) {
  if (backend_->read_only()) return util::Done{};
  const std::string signed_value = signing_key_.empty() ? std::string() : sign_value(signing_key_, key, bytes);
  const std::string_view value = signing_key_.empty() ? bytes : std::string_view(signed_value);
  StorageStatus r = guarded<util::Done>("write", [&] {
    backend_->put(key, value);
    return util::Done{};
  });
  if (r) {
    counts_["remote_writes"]++;
    counts_["remote_bytes_written"] += value.size();
  }
  return r;
}

StorageStatus RemoteStore::remove(std::string_view key) {
  if (backend_->read_only()) return util::Done{};
  return guarded<util::Done>("remove", [&] {
    backend_->remove(key);
    return util::Done{};
  });
}

void RemoteStore::add_counts(std::map<std::string, std::uint64_t>& counts) const {
  for (const auto& [name, value] : counts_) counts[name] += value;
}

}  // namespace kache::storage::remote
