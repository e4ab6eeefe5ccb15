#include "storage/remote/aws_credential_cache.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "storage/remote/aws_credential_sources.hpp"
#include "util/beneath.hpp"
#include "util/hash.hpp"
#include "util/lock.hpp"
#include "util/scoped_file.hpp"

namespace kache::storage::remote {

namespace {

constexpr std::size_t kFileLimit = 64 << 10;

std::string& excluded_cache_dir() {
  static std::string dir;
  return dir;
}

// A directory descriptor of this user's alone: owner, no group or other permission bits.
bool private_directory(int fd) {
  struct stat st {};
  return fd >= 0 && ::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid() &&
         (st.st_mode & 077) == 0;
}

// Whether `path` is `dir` or below it, both resolved as far as they exist.
bool inside(const std::string& path, const std::string& dir) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::weakly_canonical(path, ec);
  if (ec) return true;  // unresolvable: assume the worst
  const std::filesystem::path d = std::filesystem::weakly_canonical(dir, ec);
  if (ec) return true;
  auto pi = p.begin();
  for (auto di = d.begin(); di != d.end(); ++di, ++pi) {
    if (di->empty()) continue;  // a trailing separator
    if (pi == p.end() || *pi != *di) return false;
  }
  return true;
}

}  // namespace

void set_aws_credential_cache_exclusion(std::string cache_dir) { excluded_cache_dir() = std::move(cache_dir); }

std::string aws_credential_directory_path() {
  const std::string runtime = aws_env("XDG_RUNTIME_DIR");
  std::string dir;
  if (!runtime.empty() && runtime.front() == '/') {
    util::UniqueFd fd(::open(runtime.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (private_directory(fd.get())) dir = runtime + "/kache-aws";
  }
  if (dir.empty()) {
    std::string cache_home = aws_env("XDG_CACHE_HOME");
    if (cache_home.empty() || cache_home.front() != '/') {
      if (aws_env("HOME").empty()) return "";
      cache_home = aws_env("HOME") + "/.cache";
    }
    dir = cache_home + "/kache-aws";
  }
  if (!excluded_cache_dir().empty() && inside(dir, excluded_cache_dir())) return "";
  return dir;
}

namespace {

// The directory, created 0700 when missing; nullopt when it is not this user's alone (checked on the
// descriptor then used: no link followed, no window between the check and the use).
std::optional<util::Beneath> credential_directory() {
  const std::string dir = aws_credential_directory_path();
  if (dir.empty()) return std::nullopt;
  const std::string parent = dir.substr(0, dir.rfind('/'));
  if (!parent.empty() && ::mkdir(parent.c_str(), 0700) != 0 && errno != EEXIST) return std::nullopt;
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return std::nullopt;
  const util::UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!private_directory(fd.get())) return std::nullopt;
  try {
    return util::Beneath(fd.get(), dir);
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
  std::string unprintable;
  if (!printable_aws_credentials(credentials, unprintable)) return;
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
  // Parallel compiles would all ask the service at once: one fetches under the key's lock while the
  // others wait (bounded: past the lock timeout each fetches on its own), then they read what it kept.
  util::UniqueFd lock;
  if (const std::optional<util::Beneath> dir = credential_directory()) {
    try {
      lock = dir->open_replacing_plant(util::sha256(key).hex() + ".lock", O_RDWR | O_CREAT, 0600);
      if (lock.get() >= 0) util::lock_bounded(lock.get(), LOCK_EX, "of the kept AWS credentials");
    } catch (const std::exception&) {
      lock.reset();  // fetched without it
    }
    if (auto cached = cached_aws_credentials(key, std::time(nullptr))) return cached;
  }
  std::optional<AwsCredentials> fetched = fetch();
  if (fetched) keep_aws_credentials(key, *fetched);
  return fetched;
}

}  // namespace kache::storage::remote
