#pragma once
// Temporary AWS credentials kept between kache processes: each compile is a process of its own, and
// asking STS, the SSO portal, ECS, instance metadata or a credential_process on every one would cost a
// round trip (or a program run) per compile and invite throttling. Kept in a private per-user directory
// outside kache's cache dir (which may be group-shared): $XDG_RUNTIME_DIR/kache-aws when XDG_RUNTIME_DIR
// is a directory of this user's with mode 0700, else $XDG_CACHE_HOME/kache-aws, else ~/.cache/kache-aws.
// It is opened with O_DIRECTORY|O_NOFOLLOW and used only when fstat of that descriptor says it is this
// user's with no group or other permission bits, and when it lies outside the configured cache dir; then
// every file is opened below that descriptor without following links (util::Beneath). Else nothing is
// kept (credentials are fetched anew by each process). One file per source and identity (0600, written
// whole by rename), named by the SHA-256 of the source's key (profile name, role ARN, endpoint, and the
// digest of the token that proves the identity). Used until kAwsRefreshMarginS before their expiration,
// then fetched anew; `<name>.lock` beside it lets one process fetch while the others wait.
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

// The local cache dir (its configuration's); the credential directory is never below it.
void set_aws_credential_cache_exclusion(std::string cache_dir);
// The directory credentials are kept in (see above), "" when none qualifies.
std::string aws_credential_directory_path();

// The cached credentials for `key`, else fetch()'s, kept when they expire.
std::optional<AwsCredentials> cached_or_fetched(std::string_view key,
                                                const std::function<std::optional<AwsCredentials>()>& fetch);

// The serialized form kept on disk (JSON; expiration in seconds since the epoch), and back.
std::string serialize_aws_credentials(const AwsCredentials& credentials);
std::optional<AwsCredentials> deserialize_aws_credentials(std::string_view text);

}  // namespace kache::storage::remote
