// Fuzzes the remote storage URL parser: arbitrary bytes as the configured list (remote.storage).
// Properties: parsing throws nothing but RemoteUrlError; every URL parsed prints (with secrets) a form
// that parses back to the same URL and prints the same again; the redacted form parses too, to the
// same URL with "***" as the URL's password, so it shows no secret; an error message quotes the URL
// with its credentials replaced by "***" (and its query and attributes redacted), and holds no control
// byte.
#include <string>
#include <vector>

#include "core/remote_url.hpp"
#include "fuzz_check.hpp"
#include "storage/remote/schemes.hpp"

using namespace kache::core;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = kache::fuzz::as_view(data, size);
  const RemoteSecrets secrets{"env-password", "env-token"};
  const RemoteSchemes schemes = kache::storage::remote::remote_schemes();  // every backend's rules
  std::vector<RemoteUrl> urls;
  try {
    urls = parse_remote_urls(text, secrets, schemes);
  } catch (const RemoteUrlError& e) {
    // One URL with credentials ("scheme://CREDENTIALS@..."): the message quotes it exactly as the input
    // with everything between "://" and the last '@' before the attributes replaced by "***" (the rest
    // of a message is fixed wording).
    const std::string_view message = e.what();
    for (char c : message) KACHE_FUZZ_CHECK(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f);
    bool plain_text = true;  // control bytes are shown escaped, so compare only inputs without them
    for (char c : text) plain_text = plain_text && static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
    const std::size_t scheme = text.find("://");
    const std::size_t at = text.rfind('@', text.find('|'));
    if (plain_text && text.find(' ') == std::string_view::npos && scheme != std::string_view::npos &&
        at != std::string_view::npos && at > scheme) {
      // The address up to its query is kept, credentials replaced; the query and the attributes are
      // redacted by their own rules (a value that may hold a secret shows as "***").
      const std::string_view address = text.substr(0, text.find('|')).substr(at);
      const std::string kept = std::string(text.substr(0, scheme + 3)) + "***" +
                               std::string(address.substr(0, address.find('?')));
      const std::string shown = redact_unparsed(text, schemes);
      KACHE_FUZZ_CHECK(shown.starts_with(kept));
      KACHE_FUZZ_CHECK(message.find("'" + shown + "'") != std::string_view::npos);
    }
    return 0;
  }
  for (const RemoteUrl& url : urls) {
    const std::string full = url.to_string(true);
    const RemoteUrl again = parse_remote_url(full, secrets, schemes);
    KACHE_FUZZ_CHECK(again == url);
    KACHE_FUZZ_CHECK(again.to_string(true) == full);
    const RemoteUrl shown = parse_remote_url(url.redacted(), secrets, schemes);
    RemoteUrl expected = url;
    if (url.password_in_url) expected.password = "***";
    KACHE_FUZZ_CHECK(shown == expected);
  }
  return 0;
}
