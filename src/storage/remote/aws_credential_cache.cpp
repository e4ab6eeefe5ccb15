#include "storage/remote/aws_credential_cache.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>

#include "storage/remote/aws_credential_sources.hpp"
#include "util/beneath.hpp"
#include "util/hash.hpp"

namespace kache::storage::remote {

namespace {

constexpr std::size_t kFileLimit = 64 << 10;

bool private_directory(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid() && (st.st_mode & 077) == 0;
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The directory, created 0700 when missing; nullopt when it is not this user's alone.
std::optional<util::Beneath> credential_directory() {
  std::string base = aws_env("XDG_RUNTIME_DIR");
  if (!is_directory(base)) {
    if (aws_env("HOME").empty()) return std::nullopt;
    base = aws_env("HOME") + "/.cache";
    if (::mkdir(base.c_str(), 0700) != 0 && errno != EEXIST) return std::nullopt;
  }
  const std::string kache_dir = base + "/kache", dir = kache_dir + "/aws";
  if (::mkdir(kache_dir.c_str(), 0700) != 0 && errno != EEXIST) return std::nullopt;
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return std::nullopt;
  if (!private_directory(dir)) return std::nullopt;
  try {
    return util::Beneath(dir);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string file_name(std::string_view key) { return util::sha256(key).hex() + ".json"; }

}  // namespace

std::string serialize_aws_credentials(const AwsCredentials& credentials) {
  nlohmann::json out = {{"AccessKeyId", credentials.access_key_id},
                        {"SecretAccessKey", credentials.secret_access_key},
                        {"SessionToken", credentials.session_token},
                        {"Source", credentials.source}};
  if (credentials.expiration) out["Expiration"] = static_cast<long long>(*credentials.expiration);
  return out.dump();
}

std::optional<AwsCredentials> deserialize_aws_credentials(std::string_view text) {
  const nlohmann::json in = nlohmann::json::parse(text, nullptr, false);
  if (!in.is_object()) return std::nullopt;
  AwsCredentials found;
  for (const auto& [field, name] : {std::pair{&found.access_key_id, "AccessKeyId"},
                                    {&found.secret_access_key, "SecretAccessKey"},
                                    {&found.session_token, "SessionToken"},
                                    {&found.source, "Source"}}) {
    const auto it = in.find(name);
    if (it == in.end() || !it->is_string()) return std::nullopt;
    *field = it->get<std::string>();
  }
  if (const auto it = in.find("Expiration"); it != in.end()) {
    if (!it->is_number_integer()) return std::nullopt;
    found.expiration = static_cast<std::time_t>(it->get<long long>());
  }
  if (found.access_key_id.empty() || found.secret_access_key.empty()) return std::nullopt;
  return found;
}

std::optional<AwsCredentials> cached_aws_credentials(std::string_view key, std::time_t now) {
  const std::optional<util::Beneath> dir = credential_directory();
  if (!dir) return std::nullopt;
  const std::optional<std::string> text = dir->read_regular(file_name(key), nullptr, kFileLimit);
  if (!text) return std::nullopt;
  std::optional<AwsCredentials> found = deserialize_aws_credentials(*text);
  if (!found || !found->expiration || needs_refresh(*found, now)) return std::nullopt;
  return found;
}

void keep_aws_credentials(std::string_view key, const AwsCredentials& credentials) {
  if (!credentials.expiration) return;  // long-term keys stay where the user keeps them
  const std::optional<util::Beneath> dir = credential_directory();
  if (!dir) return;
  try {
    (void)dir->write_atomic(file_name(key), serialize_aws_credentials(credentials), 0600);
  } catch (const std::exception&) {
    // Not kept: the next process asks the service again.
  }
}

std::optional<AwsCredentials> cached_or_fetched(std::string_view key,
                                                const std::function<std::optional<AwsCredentials>()>& fetch) {
  if (auto cached = cached_aws_credentials(key, std::time(nullptr))) return cached;
  std::optional<AwsCredentials> fetched = fetch();
  if (fetched) keep_aws_credentials(key, *fetched);
  return fetched;
}

}  // namespace kache::storage::remote
