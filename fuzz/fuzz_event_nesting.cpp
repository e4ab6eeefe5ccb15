// Fuzzes the event log's reader against nesting (issue 41): a damaged or planted line of arrays and
// objects nested 600 000 deep crashed `kache report` and `kache doctor` (a recursive parser out of
// stack). libFuzzer's inputs are short, so each input byte is amplified: the byte's low bits pick a
// token ('[', '{', ']', '}', '"', ',', a key, a number) and its high bits how many times it repeats
// (up to 65536), inside a record's "counts" or as a whole line. Properties: parsing never crashes, a
// line nested deeper than kMaxEventNesting is never a record, and the nesting check agrees with a
// count of the brackets outside strings.
#include <algorithm>
#include <string>

#include "core/events.hpp"
#include "fuzz_check.hpp"
#include "util/text.hpp"

using namespace kache;

namespace {

std::string amplified(std::string_view input) {
  static constexpr std::string_view kTokens[] = {"[", "{", "]", "}", "\"", ",", "\"k\":", "1"};
  std::string out;
  for (const char c : input) {
    const auto byte = static_cast<unsigned char>(c);
    const std::size_t repeat = std::min<std::size_t>(std::size_t(1) << (3 * (byte >> 5)), 65536);  // 1, 8, ..
    for (std::size_t i = 0; i < repeat; ++i) out += kTokens[byte & 7];
  }
  return out;
}

// The deepest nesting of the text's brackets outside strings, counted the simple way.
std::size_t deepest(std::string_view text) {
  std::size_t depth = 0, most = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (in_string) {
      if (text[i] == '\\') ++i;
      else if (text[i] == '"') in_string = false;
    } else if (text[i] == '"') {
      in_string = true;
    } else if (text[i] == '[' || text[i] == '{') {
      most = std::max(most, ++depth);
    } else if ((text[i] == ']' || text[i] == '}') && depth > 0) {
      --depth;
    }
  }
  return most;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string body = amplified(kache::fuzz::as_view(data, size));
  for (const std::string& line : {body, R"({"v":1,"outcome":"miss","counts":)" + body + "}"}) {
    const bool shallow = deepest(line) <= core::kMaxEventNesting;
    KACHE_FUZZ_CHECK(util::json_nesting_within(line, core::kMaxEventNesting) == shallow);
    const std::optional<core::CompileEvent> e = core::parse_event(line);
    KACHE_FUZZ_CHECK(shallow || !e.has_value());
  }
  return 0;
}
