#include "util/hash.hpp"

#include "util/scoped_file.hpp"

#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

// OpenSSL's SHA-256 block functions (SHA-NI accelerated on this CPU), called directly instead of
// through EVP: EVP's first digest fetch initializes the provider machinery, measured at ~6 million
// instructions (about 2 ms) per process, which is most of a cache hit's budget. The direct API costs
// ~0.1 million. It is deprecated in OpenSSL 3 but present throughout 3.x.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <xxhash.h>

#include <cerrno>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <vector>

namespace kache::util {

namespace {

constexpr char kHexDigits[] = "0123456789abcdef";

SHA256_CTX* as_ctx(void* p) { return static_cast<SHA256_CTX*>(p); }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Fixed little-endian encoding so keys do not depend on the host's byte order.
void put_u64_le(char* out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

}  // namespace

std::string Digest::hex() const {
  std::string s;
  s.reserve(bytes.size() * 2);
  for (std::uint8_t b : bytes) {
    s.push_back(kHexDigits[b >> 4]);
    s.push_back(kHexDigits[b & 0xf]);
  }
  return s;
}

bool Digest::from_hex(std::string_view hex, Digest& out) {
  if (hex.size() != out.bytes.size() * 2) return false;
  Digest d;
  for (std::size_t i = 0; i < d.bytes.size(); ++i) {
    int hi = hex_value(hex[2 * i]);
    int lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    d.bytes[i] = static_cast<std::uint8_t>((hi << 4) | lo);
  }
  out = d;
  return true;
}

Hasher::Hasher() : ctx_(new SHA256_CTX) {
  if (SHA256_Init(as_ctx(ctx_)) != 1) {
    delete as_ctx(ctx_);
    throw std::runtime_error("SHA256_Init failed");
  }
}

Hasher::~Hasher() { delete as_ctx(ctx_); }

void Hasher::update(std::string_view data) {
  if (data.empty()) return;
  if (SHA256_Update(as_ctx(ctx_), data.data(), data.size()) != 1) throw std::runtime_error("SHA256_Update failed");
}

void Hasher::add_field(std::string_view name, std::string_view value) {
  char len[8];
  put_u64_le(len, name.size());
  update(std::string_view(len, sizeof len));
  update(name);
  put_u64_le(len, value.size());
  update(std::string_view(len, sizeof len));
  update(value);
}

Digest Hasher::finish() {
  Digest d;
  if (SHA256_Final(d.bytes.data(), as_ctx(ctx_)) != 1) throw std::runtime_error("SHA256_Final failed");
  // Re-arm so the object stays usable.
  SHA256_Init(as_ctx(ctx_));
  return d;
}

Digest sha256(std::string_view data) {
  Hasher h;
  h.update(data);
  return h.finish();
}

Digest hmac_sha256(std::string_view key, std::string_view data) {
  Digest d;
  unsigned int len = 0;
  if (::HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
             reinterpret_cast<const unsigned char*>(data.data()), data.size(), d.bytes.data(), &len) == nullptr ||
      len != d.bytes.size()) {
    throw std::runtime_error("HMAC-SHA-256 failed");
  }
  return d;
}

namespace {

// Reads fd to its end, passing each chunk to `take`; throws on a read error. The buffer is this
// thread's, left uninitialized: zeroing 256 KiB cost a hit more instructions (and page faults) than
// hashing the source it reads, which is usually a few KiB; only the pages read() fills are touched.
template <typename Take>
void read_chunks(int fd, const std::string& path, Take take) {
  constexpr std::size_t kBufSize = 256 * 1024;
  static thread_local std::unique_ptr<char[]> buf(new char[kBufSize]);
  for (;;) {
    ssize_t n = ::read(fd, buf.get(), kBufSize);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "read " + path);
    }
    if (n == 0) break;
    take(std::string_view(buf.get(), static_cast<std::size_t>(n)));
  }
}

// SHA-256 of what fd reads to its end.
Digest hash_fd(int fd, const std::string& path) {
  Hasher h;
  read_chunks(fd, path, [&](std::string_view chunk) { h.update(chunk); });
  return h.finish();
}

}  // namespace

Digest hash_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "open " + path);
  try {
    const Digest d = hash_fd(fd, path);
    ::close(fd);
    return d;
  } catch (...) {
    ::close(fd);
    throw;
  }
}

std::optional<Digest> hash_file_as(const std::string& path, const FileIdentity& expected) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<Digest> out;
  try {
    if (auto before = fd_identity(fd); before && *before == expected) {
      const Digest d = hash_fd(fd, path);
      if (auto after = fd_identity(fd); after && *after == expected) out = d;
    }
  } catch (const std::exception&) {
    out.reset();
  }
  ::close(fd);
  return out;
}

namespace {

std::string canonical_hex(XXH128_hash_t h) {
  std::string s(32, '0');
  // Canonical order: high 64 bits first, like XXH128_canonicalFromHash.
  for (int i = 0; i < 16; ++i) {
    std::uint64_t half = i < 8 ? h.high64 : h.low64;
    int shift = 8 * (7 - (i % 8));
    auto b = static_cast<std::uint8_t>((half >> shift) & 0xff);
    s[2 * i] = kHexDigits[b >> 4];
    s[2 * i + 1] = kHexDigits[b & 0xf];
  }
  return s;
}

// Where a SIGBUS raised by this thread's mapped read jumps to; null outside one.
thread_local sigjmp_buf* volatile t_mapped_read_escape = nullptr;
struct sigaction g_previous_sigbus {};

// A SIGBUS outside a mapped read is not ours: the previous action comes back and the faulting access
// runs again under it, as if this handler had never been installed.
void on_sigbus(int, siginfo_t*, void*) {
  if (sigjmp_buf* escape = t_mapped_read_escape) siglongjmp(*escape, 1);
  ::sigaction(SIGBUS, &g_previous_sigbus, nullptr);
}

void install_sigbus_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = on_sigbus;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &g_previous_sigbus);
  });
}

// XXH3 of mapped bytes; false when a page of them is gone (SIGBUS).
bool hash_mapped(const void* data, std::size_t size, XXH128_hash_t& out) {
  sigjmp_buf escape;
  if (sigsetjmp(escape, 1) != 0) {
    t_mapped_read_escape = nullptr;
    return false;
  }
  t_mapped_read_escape = &escape;
  out = XXH3_128bits(data, size);
  t_mapped_read_escape = nullptr;
  return true;
}

// Streaming XXH3 through read(), for files that cannot be mapped.
XXH128_hash_t xxh128_read(int fd, const std::string& path) {
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(), &XXH3_freeState);
  if (!state || XXH3_128bits_reset(state.get()) != XXH_OK) throw std::runtime_error("XXH3 state");
  read_chunks(fd, path, [&](std::string_view chunk) { XXH3_128bits_update(state.get(), chunk.data(), chunk.size()); });
  return XXH3_128bits_digest(state.get());
}

}  // namespace

std::string xxh128_hex(std::string_view data) { return xxh128_hex(data, 0); }

std::string xxh128_hex(std::string_view data, std::uint64_t seed) {
  return canonical_hex(XXH3_128bits_withSeed(data.data(), data.size(), seed));
}

std::optional<std::string> xxh128_mapped_hex(int fd, std::size_t size) {
  if (size == 0) return canonical_hex(XXH3_128bits(nullptr, 0));
  install_sigbus_handler();
  // No MAP_POPULATE: it holds the address space's lock while it fills the page tables, and a probe
  // hashes while its other threads start compilers (a thread's stack and posix_spawn need that lock):
  // measured, the host compiler's questions started only once the hashing was done. Page faults take
  // no such lock, and cost about the same here.
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (data == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap");
  XXH128_hash_t h{};
  const bool whole = hash_mapped(data, size, h);
  ::munmap(data, size);
  if (!whole) return std::nullopt;
  return canonical_hex(h);
}

namespace {

// XXH3-128 of an open file, mapped when it is a regular file that can be mapped.
std::string xxh128_fd_hex(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw std::system_error(errno, std::generic_category(), "fstat " + path);
  if (!S_ISREG(st.st_mode)) return canonical_hex(xxh128_read(fd, path));
  std::optional<std::string> hex;
  try {
    hex = xxh128_mapped_hex(fd, static_cast<std::size_t>(st.st_size));
  } catch (const std::system_error&) {
    // A file system that cannot map it: read it.
    return canonical_hex(xxh128_read(fd, path));
  }
  if (!hex) throw std::system_error(EIO, std::generic_category(), "file shrank while it was hashed: " + path);
  return *hex;
}

}  // namespace

std::string xxh128_file_hex(const std::string& path) {
  const UniqueFd owned(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  const int fd = owned.get();
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "open " + path);
  return xxh128_fd_hex(fd, path);
}

std::optional<std::string> xxh128_file_hex_as(const std::string& path, const FileIdentity& expected) {
  const UniqueFd owned(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  const int fd = owned.get();
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "open " + path);
  // The file opened must be the one stat'ed (the path may reach another by now: a flipped symlink),
  // and keep that identity while it is read.
  auto before = fd_identity(fd);
  if (!before || !(*before == expected)) return std::nullopt;
  std::string hex = xxh128_fd_hex(fd, path);
  auto after = fd_identity(fd);
  if (!after || !(*after == expected)) return std::nullopt;
  return hex;
}

std::uint64_t xxh64(std::string_view data) { return XXH3_64bits(data.data(), data.size()); }

}  // namespace kache::util
