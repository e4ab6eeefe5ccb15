#pragma once
// `kache worker`'s side of an action's files (remote_exec/grpc/worker.cpp), free of gRPC and protobuf so
// that the unit tests and a fuzz target (fuzz/fuzz_input_root.cpp) drive it: the input root, as the
// server describes it, materialized below the action's own directory, and the outputs read back from
// there. The server and its other clients choose every name and every size here: a name that is not one
// plain component, two entries of one name, a tree deeper than kMaxInputDepth, a blob larger than
// kMaxBlobBytes or not the size its digest says, are an action error (a reason string), never a crash.
// Every open goes through util::Beneath: nothing the action or anyone else plants (a symbolic link, a
// FIFO) redirects a write or a read out of the action's directory.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/beneath.hpp"

namespace kache::remote_exec {

// The largest blob the worker reads or writes (an input, an output, a Directory message).
inline constexpr std::int64_t kMaxBlobBytes = std::int64_t(1) << 30;
// Deeper input roots are refused (a Directory naming its own ancestor would recurse forever).
inline constexpr int kMaxInputDepth = 64;
// The most files and directories one input root may hold.
inline constexpr std::size_t kMaxInputEntries = 1 << 20;

struct BlobDigest {
  std::string hash;
  std::int64_t size_bytes = 0;
};

struct InputFileNode {
  std::string name;
  BlobDigest digest;
  bool executable = false;
};

struct InputDirectoryNode {
  std::string name;
  BlobDigest digest;
};

// One REAPI Directory message, as the worker needs it (symbolic links are not materialized).
struct InputDirectory {
  std::vector<InputFileNode> files;
  std::vector<InputDirectoryNode> directories;
};

// Where the input root's parts come from (the server's CAS in the worker).
class InputSource {
 public:
  virtual ~InputSource() = default;
  // nullopt: missing, unreadable or not a Directory.
  virtual std::optional<InputDirectory> directory(const BlobDigest& digest) = 0;
  // nullopt: missing or not the bytes of the digest.
  virtual std::optional<std::string> blob(const BlobDigest& digest) = 0;
};

// One plain path component: not empty, not "." or "..", no '/' and no NUL.
bool plain_name(std::string_view name);
// A relative path of the command (its working directory, an output): not absolute, no ".." component,
// no NUL. "" is the root itself.
bool relative_inside(std::string_view path);
// Whether a digest may be fetched at all: a SHA-256 hex hash, a size in 0..kMaxBlobBytes.
bool acceptable_digest(const BlobDigest& digest);

// The worker's work dir, created 0700 by the worker itself (its parents as the umask says); an existing
// one is used only when it is a real directory owned by this user and writable by no one else (another
// user who made it first could swap an action's directory for a link). nullopt with *why (one sentence
// with the fix) otherwise.
std::optional<util::Beneath> open_work_dir(const std::string& path, std::string* why);

// Materializes the input root `root` below action_dir (files 0644, executables 0755, directories 0700;
// every file created exclusively). "" when done, else why not (the action fails with it).
std::string materialize_input_root(const util::Beneath& action_dir, const BlobDigest& root, InputSource& source);

// An output of the action, read below action_dir: nullopt with *error empty when the command did not
// write it; nullopt with *error set when what stands there is no regular file (a link, a FIFO, a
// directory) or is larger than kMaxBlobBytes.
std::optional<std::string> read_output(const util::Beneath& action_dir, std::string_view relative, std::string* error);

}  // namespace kache::remote_exec
