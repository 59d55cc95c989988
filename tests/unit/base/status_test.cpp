#include "base/status.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>

#include "base/mapped_file.h"
#include "test_util.h"

namespace th {
namespace {

Result<int> parse_positive(int x) {
  if (x <= 0) return Status::errorf("not positive: ", x);
  return x;
}

Result<int> twice(int x) {
  TH_ASSIGN_OR_RETURN(int v, parse_positive(x));
  return 2 * v;
}

TEST(Status, OkAndError) {
  EXPECT_TRUE(ok_status().ok());
  Status e = Status::errorf("bad ", 3);
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.message(), "bad 3");
}

TEST(Result, PropagatesErrors) {
  EXPECT_EQ(*twice(4), 8);
  Result<int> r = twice(-1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "not positive: -1");
}

TEST(MappedFile, MapsAndReportsMissing) {
  const std::string path = test::temp_path("mapped_file_test.bin");
  { std::ofstream(path) << "hello"; }
  Result<MappedFile> f = MappedFile::open(path);
  ASSERT_TRUE(f.ok()) << f.message();
  ASSERT_EQ(f->size(), 5u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f->data()), 5), "hello");
  Result<MappedFile> missing = MappedFile::open(path + ".missing");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("cannot open"), std::string::npos);
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace th
