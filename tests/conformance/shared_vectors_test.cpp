// The shared reference files are present and well-formed (the other
// conformance tests depend on them).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "test_util.h"

namespace th {
namespace {

TEST(SharedVectors, GreedyReferenceHas256Ids) {
  std::ifstream in(test::shared_path("models/stories260K.greedy-from-bos.ids"));
  ASSERT_TRUE(in) << "missing ../shared/models/stories260K.greedy-from-bos.ids";
  std::vector<int> ids;
  for (int id; in >> id;) ids.push_back(id);
  EXPECT_EQ(ids.size(), 256u);
  for (int id : ids) EXPECT_TRUE(id >= 0 && id < 512);
}

}  // namespace
}  // namespace th
