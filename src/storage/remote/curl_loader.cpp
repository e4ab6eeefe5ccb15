#include "storage/remote/curl_loader.hpp"

#include <dlfcn.h>

#include <type_traits>
#include <utility>

namespace kache::storage::remote {

CurlLibrary load_curl_library(const char* soname) {
  CurlLibrary out;
  void* lib = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = ::dlerror();
    out.why = std::string(soname) + " could not be loaded (" + (err ? err : "unknown reason") +
              "), so http and https remotes are disabled";
    return out;
  }
  bool missing = false;
  const auto find = [&](auto& slot, const char* name) {
    void* symbol = ::dlsym(lib, name);
    if (!symbol) {
      if (!missing) out.why = std::string(soname) + " lacks " + name + ", so http and https remotes are disabled";
      missing = true;
      return;
    }
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(symbol);
  };
  find(out.api.global_init, "curl_global_init");
  find(out.api.easy_init, "curl_easy_init");
  find(out.api.easy_reset, "curl_easy_reset");
  find(out.api.easy_setopt, "curl_easy_setopt");
  find(out.api.easy_perform, "curl_easy_perform");
  find(out.api.easy_getinfo, "curl_easy_getinfo");
  find(out.api.easy_cleanup, "curl_easy_cleanup");
  find(out.api.easy_strerror, "curl_easy_strerror");
  find(out.api.slist_append, "curl_slist_append");
  find(out.api.slist_free_all, "curl_slist_free_all");
  if (missing) return out;
  if (out.api.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    out.why = "libcurl failed to initialize, so http and https remotes are disabled";
    return out;
  }
  out.ok = true;
  return out;
}

namespace {
std::string& refusal() {
  static std::string why;
  return why;
}
}  // namespace

void refuse_curl_loading(std::string why) { refusal() = std::move(why); }

const std::string& curl_loading_refusal() { return refusal(); }

const CurlApi* load_curl(std::string* why) {
  if (!refusal().empty()) {
    if (why) *why = refusal();
    return nullptr;
  }
  static const CurlLibrary loaded =
      load_curl_library("libcurl.so.4");  // thread-safe once; curl_global_init is not thread-safe itself
  if (!loaded.ok) {
    if (why) *why = loaded.why;
    return nullptr;
  }
  return &loaded.api;
}

}  // namespace kache::storage::remote
