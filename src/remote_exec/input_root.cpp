#include "remote_exec/input_root.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <set>
#include <fmt/format.h>

#include "util/fs.hpp"

namespace kache::remote_exec {

bool plain_name(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

bool relative_inside(std::string_view path) {
  if (path.starts_with('/') || path.find('\0') != std::string_view::npos) return false;
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t slash = std::min(path.find('/', start), path.size());
    if (path.substr(start, slash - start) == "..") return false;
    start = slash + 1;
  }
  return true;
}

bool acceptable_digest(const BlobDigest& digest) {
  if (digest.size_bytes < 0 || digest.size_bytes > kMaxBlobBytes || digest.hash.size() != 64) return false;
  return digest.hash.find_first_not_of("0123456789abcdef") == std::string::npos;
}

namespace {

// One input root's walk: the entries counted against kMaxInputEntries across the whole tree.
class Materializer {
 public:
  Materializer(const util::Beneath& action_dir, InputSource& source) : dir_(action_dir), source_(source) {}

  // Builds the directory `digest` at `relative` ("" the action directory itself); "" or why not.
  std::string build(const BlobDigest& digest, const std::string& relative, int depth) {
    if (depth > kMaxInputDepth) return fmt::format("the input root is deeper than {} directories", kMaxInputDepth);
    if (!acceptable_digest(digest)) return "the input root names a malformed or oversized digest";
    std::optional<InputDirectory> d = source_.directory(digest);
    if (!d) return "a directory of the input root cannot be read";
    if (std::string why = check_names(*d, relative); !why.empty()) return why;
    for (const InputFileNode& f : d->files) {
      if (std::string why = write_file(f, join(relative, f.name)); !why.empty()) return why;
    }
    for (const InputDirectoryNode& sub : d->directories) {
      const std::string path = join(relative, sub.name);
      std::string refused;
      if (!dir_.create_directories(path, 0700, &refused)) return fmt::format("{} of the input root: {}", path, refused);
      if (std::string why = build(sub.digest, path, depth + 1); !why.empty()) return why;
    }
    return "";
  }

 private:
  static std::string join(const std::string& dir, const std::string& name) {
    return dir.empty() ? name : dir + "/" + name;
  }

  // Every name one plain component, none twice (a file and a directory of one name included).
  std::string check_names(const InputDirectory& d, const std::string& relative) {
    std::set<std::string_view> seen;
    auto add = [&](const std::string& name) -> std::string {
      if (!plain_name(name)) return fmt::format("the input root names an entry '{}' in '{}'", name, relative);
      if (!seen.insert(name).second) return fmt::format("the input root names '{}' twice in '{}'", name, relative);
      if (++entries_ > kMaxInputEntries) return "the input root holds too many entries";
      return "";
    };
    for (const auto& f : d.files) {
      if (std::string why = add(f.name); !why.empty()) return why;
    }
    for (const auto& sub : d.directories) {
      if (std::string why = add(sub.name); !why.empty()) return why;
    }
    return "";
  }

  std::string write_file(const InputFileNode& f, const std::string& path) {
    if (!acceptable_digest(f.digest)) return fmt::format("{}: a malformed or oversized digest", path);
    std::optional<std::string> bytes = source_.blob(f.digest);
    if (!bytes || static_cast<std::int64_t>(bytes->size()) != f.digest.size_bytes) {
      return fmt::format("{}: its content cannot be read", path);
    }
    std::string refused;
    util::UniqueFd fd = dir_.open_regular(path, O_WRONLY | O_CREAT | O_EXCL, f.executable ? 0755 : 0644, &refused);
    if (fd.get() < 0) return fmt::format("{}: {} stands there", path, refused.empty() ? "something" : refused);
    util::write_fully(fd.get(), *bytes, path);
    return "";
  }

  const util::Beneath& dir_;
  InputSource& source_;
  std::size_t entries_ = 0;
};

}  // namespace

std::string materialize_input_root(const util::Beneath& action_dir, const BlobDigest& root, InputSource& source) {
  try {
    return Materializer(action_dir, source).build(root, "", 0);
  } catch (const std::exception& e) {
    return std::string("the input root cannot be written: ") + e.what();
  }
}

std::optional<util::Beneath> open_work_dir(const std::string& path, std::string* why) {
  try {
    const std::string parent = util::dirname(path);
    if (!parent.empty() && parent != path) util::create_directories(parent);
    if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
      *why = fmt::format("cannot create the work dir {}: {}", path, std::strerror(errno));
      return std::nullopt;
    }
    util::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat st {};
    if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || st.st_uid != ::geteuid() || (st.st_mode & 022) != 0) {
      *why = fmt::format("the work dir {} is not a directory of this user's that only it can write: remove it, or "
                         "give --work-dir a path the worker creates itself",
                         path);
      return std::nullopt;
    }
    return util::Beneath(fd.get(), path);
  } catch (const std::exception& e) {
    *why = fmt::format("the work dir {} cannot be used: {}", path, e.what());
    return std::nullopt;
  }
}

std::optional<std::string> read_output(const util::Beneath& action_dir, std::string_view relative, std::string* error) {
  error->clear();
  std::string refused;
  std::optional<std::string> bytes;
  try {
    bytes = action_dir.read_regular(relative, &refused, static_cast<std::size_t>(kMaxBlobBytes));
  } catch (const std::exception& e) {
    refused = e.what();
  }
  if (!bytes && !refused.empty()) *error = fmt::format("the output {} is {}, not a regular file", relative, refused);
  return bytes;
}

}  // namespace kache::remote_exec
