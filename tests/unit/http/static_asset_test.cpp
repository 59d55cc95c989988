#include "http/static_asset.h"

#include <regex>
#include <string>

#include <gtest/gtest.h>

namespace th::http {
namespace {

std::string header(const HttpResponse& r, std::string_view name) {
  for (const HttpHeader& h : r.headers)
    if (h.name == name) return h.value;
  return "";
}

TEST(StaticAsset, NotBuiltPageSaysSoWithThePolicy) {
  const HttpResponse r = ui_not_built_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("web UI was not built"), std::string::npos);
  EXPECT_EQ(header(r, "Content-Security-Policy"), kPageCsp);
  EXPECT_EQ(header(r, "X-Content-Type-Options"), "nosniff");
}

TEST(StaticAsset, PolicyAllowsOnlyThisOrigin) {
  for (const char* directive : {"default-src 'self'", "script-src 'self'", "connect-src 'self'", "font-src 'self'",
                                "style-src 'self'", "frame-ancestors 'none'"})
    EXPECT_NE(kPageCsp.find(directive), std::string_view::npos) << directive;
  EXPECT_EQ(kPageCsp.find("unsafe"), std::string_view::npos);
  EXPECT_EQ(kPageCsp.find("http"), std::string_view::npos);
}

// Every page of the bundle loads only files of the bundle, by absolute paths of this origin,
// with no inline script or style (the policy would refuse them).
TEST(StaticAsset, PagesReferenceOnlyEmbeddedFiles) {
  if (embedded_assets().empty()) GTEST_SKIP() << "the web UI was not built (no node or npm ci at build time)";
  const std::regex ref(R"re((?:src|href)="([^"]*)")re");
  int pages = 0;
  for (const StaticAsset& a : embedded_assets()) {
    EXPECT_EQ(find_asset(a.path), &a);
    EXPECT_EQ(asset_response(a).body, a.bytes);
    EXPECT_EQ(header(asset_response(a), "Content-Type"), a.content_type);
    if (!a.path.ends_with(".html")) continue;
    ++pages;
    const std::string html(a.bytes);
    EXPECT_EQ(html.find("<script>"), std::string::npos) << a.path;
    EXPECT_EQ(html.find("<style"), std::string::npos) << a.path;
    EXPECT_EQ(html.find("style=\""), std::string::npos) << a.path;
    for (std::sregex_iterator it(html.begin(), html.end(), ref), end; it != end; ++it) {
      const std::string target = (*it)[1];
      ASSERT_FALSE(target.empty()) << a.path;
      if (target == "data:,") continue;  // the empty favicon: no request at all
      EXPECT_EQ(target[0], '/') << a.path << ": " << target;
      if (target.starts_with("/ui/")) {
        EXPECT_NE(find_asset(target), nullptr) << a.path << ": " << target;
      }
    }
  }
  EXPECT_EQ(pages, 3);  // playground, dashboard, cluster
}

}  // namespace
}  // namespace th::http
