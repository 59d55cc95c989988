// `tokenhive bench engine` as a user runs it, on stories260K with small sizes:
// the scenarios run and print what they promise.
#include <gtest/gtest.h>

#include "run_process.h"
#include "test_util.h"

namespace th {
namespace {

using test::ProcessResult;
using test::run_process;

TEST(BenchEngineCli, PrefixAndThroughputScenariosReport) {
  const std::string model = test::shared_path("models/stories260K.gguf");
  ProcessResult r = run_process({test::binary_path(), "bench", "engine", "-m", model, "--scenario", "prefix",
                                 "--prompt-tokens", "200"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("prefix reuse: 200-token prompt"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(192 prompt tokens from the prefix cache)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(0 from the cache: tenants never share)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("speedup"), std::string::npos) << r.out;

  r = run_process({test::binary_path(), "bench", "engine", "-m", model, "--scenario", "throughput", "--streams", "4",
                   "--gen-tokens", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("aggregate vs one stream:"), std::string::npos) << r.out;

  r = run_process({test::binary_path(), "bench", "engine", "-m", model, "--scenario", "nonsense"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("tokenhive bench:"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace th
