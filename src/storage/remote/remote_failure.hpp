#pragma once
// How a remote store fails. Backends in this directory throw RemoteError from get/put/remove; a miss
// is never a failure (get returns nullopt). The kind tells the caller what to do for the rest of the
// run: an error or a timeout means "this server is not usable now" (skip it, count it in the breaker),
// auth means "the configuration is wrong" (skip it and say so once; retrying will not help).
#include <stdexcept>
#include <string>

namespace kache::storage::remote {

struct RemoteFailure {
  enum class Kind { error, timeout, auth };
  Kind kind = Kind::error;
  std::string message;  // one sentence, credentials redacted
};

inline const char* kind_name(RemoteFailure::Kind kind) {
  switch (kind) {
    case RemoteFailure::Kind::error:
      return "error";
    case RemoteFailure::Kind::timeout:
      return "timeout";
    case RemoteFailure::Kind::auth:
      return "auth";
  }
  return "error";
}

class RemoteError : public std::runtime_error {
 public:
  explicit RemoteError(RemoteFailure failure) : std::runtime_error(failure.message), failure_(std::move(failure)) {}
  RemoteError(RemoteFailure::Kind kind, std::string message) : RemoteError(RemoteFailure{kind, std::move(message)}) {}
  const RemoteFailure& failure() const { return failure_; }
  RemoteFailure::Kind kind() const { return failure_.kind; }

 private:
  RemoteFailure failure_;
};

// A value the server holds but larger than the configured bound (remote.max_entry_size): a miss,
// counted apart, and never read whole into memory. Not a failure of the server.
class OversizedValue : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace kache::storage::remote
