#pragma once
// A remote server as one store of the layered storage (storage/layered.hpp). The backends (Redis, HTTP)
// speak the server's protocol and throw RemoteError; RemoteStore turns that into the typed failures the
// layers expect, asks the cross-process breaker first (a server that keeps failing is skipped without a
// connection attempt), and counts what it did for `kache -s`.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/doctor_rows.hpp"
#include "core/remote_url.hpp"
#include "storage/remote/breaker.hpp"
#include "storage/remote/remote_failure.hpp"
#include "storage/storage.hpp"

namespace kache::storage::remote {

// What `kache doctor` says of one remote, one row each (core/doctor_rows.hpp, section "remote"): the
// backend probes its server (each protocol knows what can go wrong with it), commands/doctor only prints
// the rows.
inline core::DoctorRow remote_row(std::string name, core::DoctorStatus status, std::string value,
                                  std::string message = "", std::string fix = "") {
  return {"remote", std::move(name), status, std::move(value), std::move(message), std::move(fix)};
}

// One server's protocol: get/put/remove that throw RemoteError on failure (a miss is nullopt).
// Whether the server may be written is decided here, once, when the backend is made: never when its
// URL says read-only or remote.read_only holds for every remote. put and remove of a read-only remote
// do nothing; RemoteStore and kache doctor ask read_only() before they write.
class RemoteBackend {
 public:
  RemoteBackend(const core::RemoteUrl& url, bool every_remote_read_only)
      : read_only_(url.read_only || every_remote_read_only) {}
  virtual ~RemoteBackend() = default;
  virtual std::string name() const = 0;  // the redacted URL
  virtual std::optional<std::string> get(std::string_view key) = 0;
  bool read_only() const { return read_only_; }
  void put(std::string_view key, std::string_view value) {
    if (!read_only_) write(key, value);
  }
  void remove(std::string_view key) {
    if (!read_only_) erase(key);
  }
  // The doctor's rows: by default a read of probe_key (reachable, the credentials accepted) and, unless
  // read-only, a write of it and its removal. Throws nothing.
  virtual std::vector<core::DoctorRow> probe(std::string_view probe_key);
  // Evicts by age or trims to a size where the backend keeps its own files (a shared directory); nullopt
  // where it has nothing to do (a server evicts by itself; a read-only remote is never changed). Throws
  // RemoteError when it fails.
  virtual std::optional<MaintenanceOutcome> maintain(const Maintenance& what) {
    (void)what;
    return std::nullopt;
  }

 protected:
  virtual void write(std::string_view key, std::string_view value) = 0;
  virtual void erase(std::string_view key) = 0;

 private:
  bool read_only_;
};

struct RemoteStoreOptions {
  std::string ca_file;                          // remote.ca_file: an extra CA for https, trusted beside the system's
  std::string key_prefix = "kache:";            // Redis keys are <prefix><key>
  std::string breaker_dir;                      // the breakers' state files (empty: no breaker)
  std::string cache_dir;                        // the local cache dir (S3 keeps no credentials below it)
  bool read_only = false;                       // remote.read_only: never written, whatever the URL says
  std::uint64_t max_entry_size = 256ull << 20;  // remote.max_entry_size: a larger value is a miss
  // remote.signing_key_file's content. Set: every value written carries an HMAC-SHA-256 over its key
  // and bytes, and a value read without a valid one is refused (a miss, counted).
  std::string signing_key;
};

// The signature trailer: value + HMAC-SHA-256("kache-remote-1\0" + key + "\0" + value) + "KACHESG1".
std::string sign_value(std::string_view signing_key, std::string_view key, std::string_view value);
enum class Signature { valid, invalid, absent };
// Checks and strips the trailer (with an empty signing key: strips it unchecked, reports valid or absent).
Signature open_signed(std::string_view signing_key, std::string_view key, std::string& value);

class RemoteStore final : public Storage {
 public:
  RemoteStore(std::unique_ptr<RemoteBackend> backend, std::string identity, const RemoteStoreOptions& options);
  std::string name() const override { return backend_->name(); }
  StorageLookup get(std::string_view key) override;
  StorageStatus put(std::string_view key, std::string_view bytes) override;
  StorageStatus remove(std::string_view key) override;
  void add_counts(std::map<std::string, std::uint64_t>& counts) const override;

 private:
  template <typename T, typename Op>
  StorageResult<T> guarded(const char* doing, Op op);
  void warn_failed(const char* doing, const char* what) const;

  std::unique_ptr<RemoteBackend> backend_;
  std::optional<Breaker> breaker_;
  std::uint64_t max_entry_size_;
  std::string signing_key_;
  std::map<std::string, std::uint64_t> counts_;
};

}  // namespace kache::storage::remote
