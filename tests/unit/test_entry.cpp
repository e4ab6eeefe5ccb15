// The cache entry encoding: the object last, so a store can keep it apart and hand back the head.
#include <gtest/gtest.h>

#include <stdexcept>

#include "core/entry.hpp"

namespace kache::core {
namespace {

CacheEntry sample(bool with_depfile) {
  CacheEntry e;
  e.object = std::string("\x7f" "ELF", 4) + std::string(5000, '\x01');
  if (with_depfile) e.depfile_template = "@KACHE_OUT@/x.o: @KACHE_SRC@/x.cu\n";
  e.stdout_text = "out";
  e.stderr_text = "warning: x";
  return e;
}

TEST(Entry, WholeEqualsHeadPlusObject) {
  for (bool dep : {true, false}) {
    const CacheEntry e = sample(dep);
    const std::string whole = serialize_entry(e);
    EXPECT_EQ(whole, serialize_entry_head(e) + e.object);
    const CacheEntryView v = view_entry(whole);
    EXPECT_EQ(v.object, e.object);
    EXPECT_EQ(v.depfile_template.has_value(), dep);
    if (dep) {
      EXPECT_EQ(*v.depfile_template, *e.depfile_template);
    }
    EXPECT_EQ(v.stdout_text, "out");
    EXPECT_EQ(v.stderr_text, "warning: x");
    const CacheEntry back = deserialize_entry(whole);
    EXPECT_EQ(back.object, e.object);
  }
}

TEST(Entry, HeadAloneNamesTheObjectSize) {
  const CacheEntry e = sample(true);
  const std::string head = serialize_entry_head(e);
  const CacheEntryView v = view_entry_head(head, e.object.size());
  EXPECT_TRUE(v.object.empty());
  EXPECT_EQ(v.stderr_text, "warning: x");
  // A body of another size than the head recorded is not this entry's object.
  EXPECT_THROW(view_entry_head(head, e.object.size() - 1), std::runtime_error);
  EXPECT_THROW(view_entry_head(head + "x", e.object.size()), std::runtime_error);
}

TEST(Entry, MalformedInputIsRejected) {
  const std::string whole = serialize_entry(sample(true));
  EXPECT_THROW(view_entry(whole.substr(0, whole.size() - 1)), std::runtime_error);  // object cut short
  EXPECT_THROW(view_entry(whole + "x"), std::runtime_error);
  EXPECT_THROW(view_entry(std::string(64, 'z')), std::runtime_error);
  EXPECT_THROW(view_entry(whole.substr(0, 10)), std::runtime_error);
}

}  // namespace
}  // namespace kache::core
