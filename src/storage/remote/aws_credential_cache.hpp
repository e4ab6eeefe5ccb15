#pragma once
// Temporary AWS credentials kept between kache processes: each compile is a process of its own, and
// asking STS, the SSO portal, ECS, instance metadata or a credential_process on every one would cost a
// round trip (or a program run) per compile and invite throttling. Kept in a private per-user directory,
// never the cache dir (which may be group-shared): $XDG_RUNTIME_DIR/kache/aws when XDG_RUNTIME_DIR names
// a directory, else ~/.cache/kache/aws; mode 0700, owned by this user (checked, else nothing is kept),
// one file per source (0600, written whole by rename, read below the directory without following links),
// named by the SHA-256 of the source's key (profile name, role ARN, endpoint). Used until
// kAwsRefreshMarginS before their expiration, then fetched anew.
#include <ctime>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "storage/remote/aws_credentials.hpp"

namespace kache::storage::remote {

// The credentials kept for `key` that are still good at `now`; nullopt otherwise.
std::optional<AwsCredentials> cached_aws_credentials(std::string_view key, std::time_t now);
// Keeps temporary credentials (with an expiration) for `key`; quietly nothing when the directory is
// not private or cannot be written (the next process asks the service again).
void keep_aws_credentials(std::string_view key, const AwsCredentials& credentials);

// The cached credentials for `key`, else fetch()'s, kept when they expire.
std::optional<AwsCredentials> cached_or_fetched(std::string_view key,
                                                const std::function<std::optional<AwsCredentials>()>& fetch);

// The serialized form kept on disk (JSON; expiration in seconds since the epoch), and back.
std::string serialize_aws_credentials(const AwsCredentials& credentials);
std::optional<AwsCredentials> deserialize_aws_credentials(std::string_view text);

}  // namespace kache::storage::remote
