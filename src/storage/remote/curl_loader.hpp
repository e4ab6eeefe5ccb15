#pragma once
// libcurl, loaded at run time. kache's release binary links everything it can statically (a hit must
// not pay the dynamic loader for libraries it never uses), and Debian's libcurl cannot be linked
// statically (nghttp2, krb5, ldap, ... ship no archives). So libcurl.so.4 is dlopen'ed when an http(s)
// remote is first used, and only its few entry points are looked up, typed with curl's own declarations.
#include <curl/curl.h>

#include <string>

namespace kache::storage::remote {

struct CurlApi {
  decltype(&curl_global_init) global_init;
  decltype(&curl_easy_init) easy_init;
  decltype(&curl_easy_reset) easy_reset;
  decltype(&curl_easy_setopt) easy_setopt;
  decltype(&curl_easy_perform) easy_perform;
  decltype(&curl_easy_getinfo) easy_getinfo;
  decltype(&curl_easy_cleanup) easy_cleanup;
  decltype(&curl_easy_strerror) easy_strerror;
  decltype(&curl_slist_append) slist_append;
  decltype(&curl_slist_free_all) slist_free_all;
};

struct CurlLibrary {
  CurlApi api{};
  bool ok = false;
  std::string why;  // when not ok: one sentence saying what is missing and that http remotes are off
};
// Loads and initializes the library of that name (tests pass a missing one to see the refusal).
CurlLibrary load_curl_library(const char* soname);

// The loaded library (loaded and initialized once per process; never unloaded), or nullptr with a
// one-sentence reason in *why when libcurl.so.4 or one of its functions is missing.
const CurlApi* load_curl(std::string* why);

// A statically linked kache must never dlopen (its libc cannot initialize a second copy): it calls this
// first thing, and load_curl then answers nullptr with `why` without trying.
void refuse_curl_loading(std::string why);
// The reason given to refuse_curl_loading, empty when loading is allowed (a dynamically linked kache).
const std::string& curl_loading_refusal();

}  // namespace kache::storage::remote
