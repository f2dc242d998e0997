#include "util/utf8.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>

// Its own namespace, so that test files can share a unity batch.
namespace utf8_test {

namespace {

using tensordict::detail::utf8_decode;
using tensordict::detail::utf8_invalid_offset;
using tensordict::detail::utf8_valid;

constexpr size_t kNpos = std::string_view::npos;

// Decodes the one sequence `bytes` should be; returns its code point.
uint32_t decode_whole(const std::string& bytes) {
  uint32_t cp = 0xFFFFFFFF;
  EXPECT_EQ(utf8_decode(bytes, 0, cp), bytes.size()) << bytes;
  return cp;
}

TEST(Utf8Test, DecodesEachLengthAtItsBounds) {
  EXPECT_EQ(decode_whole(std::string(1, '\0')), 0x0u);
  EXPECT_EQ(decode_whole("\x7F"), 0x7Fu);
  EXPECT_EQ(decode_whole("\xC2\x80"), 0x80u);
  EXPECT_EQ(decode_whole("\xC3\xA9"), 0xE9u);  // é
  EXPECT_EQ(decode_whole("\xDF\xBF"), 0x7FFu);
  EXPECT_EQ(decode_whole("\xE0\xA0\x80"), 0x800u);
  EXPECT_EQ(decode_whole("\xED\x9F\xBF"), 0xD7FFu);
  EXPECT_EQ(decode_whole("\xEE\x80\x80"), 0xE000u);
  EXPECT_EQ(decode_whole("\xEF\xBF\xBF"), 0xFFFFu);
  EXPECT_EQ(decode_whole("\xF0\x90\x80\x80"), 0x10000u);
  EXPECT_EQ(decode_whole("\xF0\x9F\x98\x80"), 0x1F600u);  // an emoji
  EXPECT_EQ(decode_whole("\xF4\x8F\xBF\xBF"), 0x10FFFFu);
}

TEST(Utf8Test, AcceptsMixedText) {
  EXPECT_TRUE(utf8_valid(""));
  EXPECT_TRUE(utf8_valid("obs.next/reward"));
  EXPECT_TRUE(utf8_valid("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80!"));
  EXPECT_EQ(utf8_invalid_offset("caf\xC3\xA9"), kNpos);
}

TEST(Utf8Test, RefusesOverlongForms) {
  // '/' as two, three and four bytes: the classic path-traversal spellings.
  EXPECT_FALSE(utf8_valid("\xC0\xAF"));
  EXPECT_FALSE(utf8_valid("\xE0\x80\xAF"));
  EXPECT_FALSE(utf8_valid("\xF0\x80\x80\xAF"));
  EXPECT_FALSE(utf8_valid("\xC1\xBF"));          // U+7F in two bytes
  EXPECT_FALSE(utf8_valid("\xE0\x9F\xBF"));      // U+7FF in three
  EXPECT_FALSE(utf8_valid("\xF0\x8F\xBF\xBF"));  // U+FFFF in four
  uint32_t cp = 7;
  EXPECT_EQ(utf8_decode("\xC0\xAF", 0, cp), 0u);
  EXPECT_EQ(cp, 7u);  // left alone on failure
}

TEST(Utf8Test, RefusesSurrogatesAndCodePointsPastTheLast) {
  EXPECT_FALSE(utf8_valid("\xED\xA0\x80"));              // U+D800
  EXPECT_FALSE(utf8_valid("\xED\xBF\xBF"));              // U+DFFF
  EXPECT_FALSE(utf8_valid("\xED\xA0\xBD\xED\xB8\x80"));  // a CESU-8 pair
  EXPECT_FALSE(utf8_valid("\xF4\x90\x80\x80"));          // U+110000
  EXPECT_FALSE(utf8_valid("\xF5\x80\x80\x80"));
  EXPECT_FALSE(utf8_valid("\xF8\x88\x80\x80\x80"));  // old five-byte form
  EXPECT_FALSE(utf8_valid("\xFE"));
  EXPECT_FALSE(utf8_valid("\xFF"));
}

TEST(Utf8Test, RefusesTruncatedAndBrokenSequences) {
  EXPECT_FALSE(utf8_valid("\xC3"));
  EXPECT_FALSE(utf8_valid("\xE2\x82"));
  EXPECT_FALSE(utf8_valid("\xF0\x9F\x98"));
  EXPECT_FALSE(utf8_valid("\x80"));      // a stray continuation byte
  EXPECT_FALSE(utf8_valid("\xC3\x28"));  // second byte not 10xxxxxx
  EXPECT_FALSE(utf8_valid("\xE2\x28\xA1"));
  EXPECT_FALSE(utf8_valid("\xF0\x9F\x28\x80"));
  // The decoder never reads past the end of the view it was given.
  const std::string_view cut("\xE2\x82\xAC", 2);
  uint32_t cp = 0;
  EXPECT_EQ(utf8_decode(cut, 0, cp), 0u);
}

TEST(Utf8Test, ReportsTheOffsetOfTheFirstBadSequence) {
  EXPECT_EQ(
      utf8_invalid_offset("ab\xC3\xA9"
                          "c\xC0\xAF"
                          "d"),
      5u);
  EXPECT_EQ(utf8_invalid_offset("\xE2\x82\xAC\xE2\x82"), 3u);
  EXPECT_EQ(
      utf8_invalid_offset("\x80"
                          "abc"),
      0u);
  const std::string with_nul("a\0b", 3);
  EXPECT_EQ(utf8_invalid_offset(with_nul), kNpos);
}

}  // namespace

}  // namespace utf8_test
