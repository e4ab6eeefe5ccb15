// The stored containers (core/entry_format.hpp): what every store keeps, read by one decoder.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/entry.hpp"
#include "core/entry_format.hpp"

namespace kache::core {
namespace {

std::string random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

std::string decoded(std::string bytes) {
  auto v = decode_value(std::move(bytes));
  EXPECT_TRUE(v) << (v ? "" : format_error_name(v.error()));
  return v ? *v : std::string("<failed>");
}

// Every container gives back the value it was given (split ones: head + body).
TEST(EntryFormat, RoundTripThroughEveryContainer) {
  const std::vector<std::string> values = {"", "x", random_bytes(10'000, 1), std::string(200'000, 'a')};
  for (const auto& v : values) {
    EXPECT_EQ(decoded(encode_raw(v)), v);
    EXPECT_EQ(decoded(encode_zstd(v, 3)), v);
    const std::string_view head = std::string_view(v).substr(0, v.size() / 3);
    const std::string_view body = std::string_view(v).substr(v.size() / 3);
    EXPECT_EQ(decoded(encode_split(head, body)), v);
    EXPECT_EQ(decoded(encode_split_zstd(head, body, 1)), v);
    EXPECT_EQ(decoded(encode_parts(head, body, {true, 3})), v);
    EXPECT_EQ(decoded(encode_parts(head, body, {false, 3})), v);
  }
}

// An entry record through a container, as a hit reads it back.
TEST(EntryFormat, EntryThroughAContainer) {
  CacheEntry e;
  e.outputs = {{OutputType::depfile, "a.o: a.cu\n"}, {OutputType::object, random_bytes(5000, 2)}};
  e.stderr_text = "warning";
  const std::string bytes = encode_parts(serialize_entry_head(e), entry_body(e), {true, 3});
  const auto back = deserialize_entry(decoded(bytes));
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, e);
}

TEST(EntryFormat, MagicNamesTheContainer) {
  EXPECT_EQ(encode_raw("v").substr(0, 8), std::string("KACHE\0R1", 8));
  EXPECT_EQ(encode_zstd("v", 3).substr(0, 8), std::string("KACHE\0E1", 8));
  EXPECT_EQ(encode_split("h", "b").substr(0, 8), std::string("KACHE\0B1", 8));
  EXPECT_EQ(encode_split_zstd("h", "b", 3).substr(0, 8), std::string("KACHE\0E2", 8));
  EXPECT_EQ(encode_split("h", "b").size(), 4096u + 1);  // the body on a block boundary
}

// Damaged bytes are a typed failure: every prefix, every flipped byte, of every container.
TEST(EntryFormat, DamageIsATypedFailure) {
  const std::string v = random_bytes(3000, 3);
  const std::vector<std::string> containers = {encode_raw(v), encode_zstd(v, 3), encode_split("head", v),
                                               encode_split_zstd("head", v, 3)};
  for (const auto& c : containers) {
    for (std::size_t n = 0; n < c.size(); n += (n < 200 ? 1 : 97)) {
      EXPECT_FALSE(decode_value(c.substr(0, n))) << c.substr(6, 2) << " cut at " << n;
    }
    for (std::size_t i = 0; i < c.size(); i += (i < 200 ? 1 : 89)) {
      std::string bad = c;
      bad[i] = static_cast<char>(bad[i] ^ 0x01);
      auto r = decode_value(std::move(bad));
      // A flip in the split container's zero padding changes nothing the value is made of.
      if (r) {
        EXPECT_EQ(*r, c.substr(6, 2) == "B1" ? "head" + v : v) << c.substr(6, 2) << " flipped at " << i;
      }
    }
  }
  EXPECT_EQ(decode_value("").error(), FormatError::unknown_format);
  EXPECT_EQ(decode_value("not a kache container").error(), FormatError::unknown_format);
  EXPECT_EQ(decode_value(encode_raw(v).substr(0, 20)).error(), FormatError::truncated);
  std::string flipped = encode_raw(v);
  flipped.back() ^= 1;
  EXPECT_EQ(decode_value(std::move(flipped)).error(), FormatError::checksum);
}

}  // namespace
}  // namespace kache::core
