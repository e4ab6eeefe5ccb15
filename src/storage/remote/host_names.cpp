#include "storage/remote/host_names.hpp"

#include "storage/remote/curl_loader.hpp"
#include "storage/remote/remote_failure.hpp"

namespace kache::storage::remote {

void require_resolvable(const RemoteUrl& url) {
  if (url.scheme == Scheme::redis_unix || url.host_is_address()) return;
  // The static front refuses dynamic loading first thing in main (refuse_curl_loading): a refusal on
  // record is what says this process is linked statically.
  if (curl_loading_refusal().empty()) return;
  throw RemoteError(RemoteFailure::Kind::error,
                    url.redacted() + ": this kache is linked statically and cannot resolve host names; use a "
                                     "numeric address, or install kache-http beside it");
}

}  // namespace kache::storage::remote
