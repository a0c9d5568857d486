#include "runtime/tokenizer/byte_level.h"

#include <set>
#include <string>

#include "gtest/gtest.h"
#include "runtime/tokenizer/utf8.h"

namespace tessera {
namespace {

TEST(ByteLevel, KnownMappings) {
  EXPECT_EQ(byte_to_code_point('a'), U'a');
  EXPECT_EQ(byte_to_code_point('!'), U'!');
  EXPECT_EQ(byte_to_code_point(0xE9), U'\u00E9');  // printable Latin-1 keeps its value
  EXPECT_EQ(byte_to_code_point(0x00), U'\u0100');
  EXPECT_EQ(byte_to_code_point('\n'), U'\u010A');  // "Ċ"
  EXPECT_EQ(byte_to_code_point(' '), U'\u0120');   // "Ġ"
  EXPECT_EQ(byte_to_code_point(0x7F), U'\u0121');
  EXPECT_EQ(byte_to_code_point(0xA0), U'\u0142');
  EXPECT_EQ(byte_to_code_point(0xAD), U'\u0143');  // soft hyphen, the last remapped byte
  EXPECT_EQ(byte_level_encode(" hello\n"), "\xC4\xA0hello\xC4\x8A");
}

TEST(ByteLevel, IsABijectionOnAllBytes) {
  std::set<char32_t> images;
  std::string all;
  for (int b = 0; b < 256; ++b) {
    const char32_t cp = byte_to_code_point(static_cast<uint8_t>(b));
    images.insert(cp);
    ASSERT_EQ(code_point_to_byte(cp), static_cast<uint8_t>(b));
    all.push_back(static_cast<char>(b));
  }
  EXPECT_EQ(images.size(), 256u);
  const std::string encoded = byte_level_encode(all);
  EXPECT_EQ(find_invalid_utf8(encoded), std::string::npos);
  EXPECT_EQ(byte_level_decode(encoded), all);
}

TEST(ByteLevel, DecodeRejectsTextOutsideTheMap) {
  EXPECT_EQ(byte_level_decode("plain ascii with space"), std::nullopt);  // raw ' ' is unmapped
  EXPECT_EQ(byte_level_decode("\xE2\x82\xAC"), std::nullopt);            // U+20AC
  EXPECT_EQ(byte_level_decode("\xFF"), std::nullopt);                    // not UTF-8
  EXPECT_EQ(code_point_to_byte(U'\u0144'), std::nullopt);
  EXPECT_EQ(byte_level_decode(""), "");
}

}  // namespace
}  // namespace tessera
