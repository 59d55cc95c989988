#include "cluster/cell_load.h"

#include <gtest/gtest.h>

#include <string>

namespace th::cluster {
namespace {

TEST(CellLoad, ReadsAHeartbeat) {
  Result<CellLoad> l = parse_cell_load(
      R"({"running":3,"waiting":1,"kv_free_blocks":10,"kv_total_blocks":20,"tokens_per_second":12.5,"ready":true})");
  ASSERT_TRUE(l.ok()) << l.message();
  EXPECT_EQ(l->running, 3);
  EXPECT_EQ(l->waiting, 1);
  EXPECT_EQ(l->kv_free_blocks, 10);
  EXPECT_EQ(l->kv_total_blocks, 20);
  EXPECT_DOUBLE_EQ(l->tokens_per_second, 12.5);
  EXPECT_FALSE(l->draining);
  // Wrong types read as nothing: a float count (1e300 would not fit an int64), no ready.
  Result<CellLoad> odd = parse_cell_load(R"({"running":1e300,"waiting":"2","ready":"yes"})");
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(odd->running, 0);
  EXPECT_EQ(odd->waiting, 0);
  EXPECT_TRUE(odd->draining);
}

TEST(CellLoad, AHeartbeatThatIsNotAnObjectFails) {
  for (const std::string& bad : {std::string("ok"), std::string("[1]"), std::string(""),
                                 "{\"running\":" + std::string(200'000, '[') + std::string(200'000, ']') + "}",
                                 "{\"x\":\"" + std::string(2u << 20, 'a') + "\"}"})
    EXPECT_FALSE(parse_cell_load(bad).ok()) << bad.substr(0, 30);
}

}  // namespace
}  // namespace th::cluster
