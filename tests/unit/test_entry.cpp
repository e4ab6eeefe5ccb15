// The cache entry record: typed outputs, the body last, so a store can keep it apart and hand back the
// head. Round trips, and damaged input as a typed failure (never an exception or a crash).
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "core/entry.hpp"

namespace kache::core {
namespace {

CacheEntry sample(bool with_depfile) {
  CacheEntry e;
  if (with_depfile) e.outputs.push_back({OutputType::depfile, "@KACHE_OUT@/x.o: @KACHE_SRC@/x.cu\n"});
  e.outputs.push_back({OutputType::object, std::string("\x7f"
                                                       "ELF",
                                                       4) +
                                               std::string(5000, '\x01')});
  e.stdout_text = "out";
  e.stderr_text = "warning: x";
  return e;
}

TEST(Entry, WholeEqualsHeadPlusBody) {
  for (bool dep : {true, false}) {
    const CacheEntry e = sample(dep);
    const std::string whole = serialize_entry(e);
    EXPECT_EQ(whole, serialize_entry_head(e) + std::string(entry_body(e)));
    const auto v = view_entry(whole);
    ASSERT_TRUE(v);
    EXPECT_EQ(v->find(OutputType::object), e.outputs.back().data);
    EXPECT_TRUE(v->body_is(OutputType::object));
    EXPECT_EQ(v->find(OutputType::depfile).has_value(), dep);
    if (dep) {
      EXPECT_EQ(*v->find(OutputType::depfile), e.outputs.front().data);
    }
    EXPECT_EQ(v->stdout_text, "out");
    EXPECT_EQ(v->stderr_text, "warning: x");
  }
}

// decode(encode(x)) == x, for entries of every shape: no outputs, one, several, types this kache does
// not know yet (a later kache's .dwo or fatbin), empty and binary data.
TEST(Entry, RoundTrip) {
  std::vector<CacheEntry> entries = {sample(true), sample(false), CacheEntry{}};
  CacheEntry several;
  several.outputs = {
      {OutputType::depfile, ""}, {static_cast<OutputType>(7), std::string(3, '\0')}, {OutputType::object, ""}};
  several.stderr_text = std::string("\0\xff", 2);
  entries.push_back(several);
  for (const auto& e : entries) {
    const auto back = deserialize_entry(serialize_entry(e));
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, e);
    EXPECT_EQ(serialize_entry(*back), serialize_entry(e));
  }
}

TEST(Entry, HeadAloneNamesTheBodySize) {
  const CacheEntry e = sample(true);
  const std::string head = serialize_entry_head(e);
  const auto v = view_entry_head(head, e.outputs.back().data.size());
  ASSERT_TRUE(v);
  EXPECT_TRUE(v->find(OutputType::object)->empty());  // restored separately
  EXPECT_EQ(*v->find(OutputType::depfile), e.outputs.front().data);
  EXPECT_EQ(v->stderr_text, "warning: x");
  // A body of another size than the head recorded is not this entry's object.
  EXPECT_EQ(view_entry_head(head, e.outputs.back().data.size() - 1).error(), FormatError::malformed);
  EXPECT_EQ(view_entry_head(head + "x", e.outputs.back().data.size()).error(), FormatError::malformed);
}

TEST(Entry, DamagedInputIsATypedFailure) {
  const std::string whole = serialize_entry(sample(true));
  EXPECT_EQ(view_entry(whole.substr(0, whole.size() - 1)).error(), FormatError::malformed);  // body cut short
  EXPECT_EQ(view_entry(whole + "x").error(), FormatError::malformed);
  EXPECT_EQ(view_entry(std::string(64, 'z')).error(), FormatError::unknown_format);
  EXPECT_EQ(view_entry(whole.substr(0, 10)).error(), FormatError::truncated);
  EXPECT_EQ(view_entry("").error(), FormatError::unknown_format);
  // Every prefix, and every single flipped byte: a failure or some entry, never a crash or a throw.
  for (std::size_t n = 0; n < 200; ++n) EXPECT_FALSE(view_entry(whole.substr(0, n))) << n;
  for (std::size_t i = 0; i < 200; ++i) {
    std::string bad = whole;
    bad[i] = static_cast<char>(bad[i] ^ 0xff);
    (void)view_entry(bad);
    (void)deserialize_entry(bad);
  }
}

// The record before typed outputs ("KEN2": flags and fixed fields) reads as unknown: a miss.
TEST(Entry, OlderRecordIsUnknown) {
  std::string ken2 = "2NEK";  // little-endian magic 0x4b454e32
  ken2 += std::string(1, '\1') + std::string(8, '\0') + std::string(16, '\0') + std::string(8, '\0');
  EXPECT_EQ(view_entry(ken2).error(), FormatError::unknown_format);
}

}  // namespace
}  // namespace kache::core
