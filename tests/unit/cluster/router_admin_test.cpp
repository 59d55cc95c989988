#include <gtest/gtest.h>

#include "cluster/router_service.h"

namespace th::cluster {
namespace {

TEST(RouterAdmin, OnlyLoopbackAddressesAreLoopback) {
  for (const char* h : {"127.0.0.1", "127.1.2.3", "::1", "localhost"}) EXPECT_TRUE(is_loopback_host(h)) << h;
  for (const char* h : {"0.0.0.0", "::", "10.0.0.7", "128.0.0.1", "::ffff:127.0.0.1", "example.com", "", "127.0.0.1 "})
    EXPECT_FALSE(is_loopback_host(h)) << h;
}

TEST(RouterAdmin, AdminCallsNeedATokenOrALoopbackListener) {
  RouterServiceOptions o;
  o.admin_loopback_only = true;
  EXPECT_EQ(admin_mode(o), "loopback");
  o.admin_loopback_only = false;
  EXPECT_EQ(admin_mode(o), "refused");
  o.admin_token = "s3cret";
  EXPECT_EQ(admin_mode(o), "token");
}

}  // namespace
}  // namespace th::cluster
