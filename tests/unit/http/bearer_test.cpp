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

TEST(Bearer, MatchesOnlyTheExactBearerToken) {
  EXPECT_TRUE(bearer_matches(std::string_view("Bearer s3cret"), "s3cret"));
  EXPECT_FALSE(bearer_matches(std::nullopt, "s3cret"));
  EXPECT_FALSE(bearer_matches(std::string_view("Bearer s3cre"), "s3cret"));
  EXPECT_FALSE(bearer_matches(std::string_view("Bearer s3creT"), "s3cret"));
  EXPECT_FALSE(bearer_matches(std::string_view("bearer s3cret"), "s3cret"));
  EXPECT_FALSE(bearer_matches(std::string_view("Bearer s3cret "), "s3cret"));
  EXPECT_FALSE(bearer_matches(std::string_view(""), "s3cret"));
}

}  // namespace
}  // namespace th::http
