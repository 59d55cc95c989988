#include "http/bearer.h"

#include <gtest/gtest.h>

#include <string_view>

namespace th::http {
namespace {

TEST(Bearer, ConstantTimeEqual) {
  uint8_t a[300], b[300];
  for (int i = 0; i < 300; ++i) a[i] = b[i] = static_cast<uint8_t>(i * 7);
  EXPECT_TRUE(constant_time_equal(a, b, 300));
  EXPECT_TRUE(constant_time_equal(a, b, 0));
  for (int i = 0; i < 300; ++i) {
    for (uint8_t bit = 1; bit != 0; bit = static_cast<uint8_t>(bit << 1)) {
      b[i] ^= bit;  // every single-bit difference at every position
      ASSERT_FALSE(constant_time_equal(a, b, 300)) << i << " " << int(bit);
      ASSERT_TRUE(constant_time_equal(a, b, static_cast<size_t>(i)));  // the prefix before it still equal
      b[i] ^= bit;
    }
  }
}

TEST(Bearer, MatchesOnlyTheBearerToken) {
  EXPECT_TRUE(bearer_matches(std::string_view("Bearer s3cret"), "s3cret"));
  EXPECT_FALSE(bearer_matches(std::nullopt, "s3cret"));
  EXPECT_FALSE(bearer_matches(std::string_view("Bearer s3cre"), "s3cret"));
  EXPECT_FALSE(bearer_matches(std::string_view("Bearer s3crets"), "s3cret"));
  EXPECT_FALSE(bearer_matches(std::string_view("Bearer s3creT"), "s3cret"));
  EXPECT_FALSE(bearer_matches(std::string_view("Bearer s3cret\0", 14), "s3cret"));
  EXPECT_FALSE(bearer_matches(std::string_view("Basic s3cret"), "s3cret"));
  EXPECT_FALSE(bearer_matches(std::string_view("Bearers3cret"), "s3cret"));
  EXPECT_FALSE(bearer_matches(std::string_view("Bearer"), "s3cret"));
  EXPECT_FALSE(bearer_matches(std::string_view(""), "s3cret"));
  EXPECT_FALSE(bearer_matches(std::string_view("Bearer "), ""));
}

// RFC 9110: the scheme is case-insensitive; blanks around it and the token are the
// header's whitespace, as ApiKeyStore::authenticate reads a key.
TEST(Bearer, SchemeInAnyCaseAndBlanksAroundTheParts) {
  EXPECT_TRUE(bearer_matches(std::string_view("bearer s3cret"), "s3cret"));
  EXPECT_TRUE(bearer_matches(std::string_view("BEARER s3cret"), "s3cret"));
  EXPECT_TRUE(bearer_matches(std::string_view("  Bearer \t s3cret \t"), "s3cret"));
  EXPECT_FALSE(bearer_matches(std::string_view("Bearer s3 cret"), "s3cret"));
}

}  // namespace
}  // namespace th::http
