#include "core/build_features.hpp"

#include <ares.h>
#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <openssl/crypto.h>
#include <zstd.h>

#include <cstdio>

namespace kache::core {

namespace {

// No program interpreter is linked in (and so no dynamic loader runs) when the program is static; a
// dynamically linked program has _DYNAMIC, the static link of glibc leaves it undefined (weak: null).
extern "C" const char _DYNAMIC[] __attribute__((weak));  // NOLINT(bugprone-reserved-identifier)

bool linked_statically() { return _DYNAMIC == nullptr; }

}  // namespace

std::string build_features() {
  return fmt::format(
      "remote storage: redis://, redis+unix:// (hiredis {}.{}.{}), http://, https:// (Boost.Beast), s3:// "
      "(SigV4), file:// (a shared directory)\n"
      "tls: {}\n"
      "host names: c-ares {}\n"
      "compression: zstd {}\n"
      "linked: {}\n",
      HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH, ::OpenSSL_version(OPENSSL_VERSION), ::ares_version(nullptr),
      ::ZSTD_versionString(), linked_statically() ? "statically (needs no shared library)" : "dynamically");
}

}  // namespace kache::core
