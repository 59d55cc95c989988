// The timed runs behind `tokenhive bench model`: they run on a real model,
// take positive time, and reject shapes that make no sense.
#include "engine/model_bench.h"

#include <gtest/gtest.h>

#include "format/gguf.h"
#include "test_util.h"

namespace th {
namespace {

TEST(ModelBench, PrefillAndDecodeRunOnStories260K) {
  Result<GgufFile> f = GgufFile::open(test::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(f.ok()) << f.message();
  std::unique_ptr<Backend> backend = make_cpu_backend();
  auto m = LlamaModel::load(*f, *backend);
  ASSERT_TRUE(m.ok()) << m.message();
  // A prompt that does not divide into whole chunks, and one longer than a KV block.
  for (int64_t ubatch : {1, 7, 64}) {
    Result<double> t = time_prefill(**m, *backend, 37, ubatch, 1);
    ASSERT_TRUE(t.ok()) << t.message();
    EXPECT_GT(*t, 0);
  }
  for (int64_t seqs : {1, 3}) {
    Result<double> t = time_decode(**m, *backend, seqs, 8, 20, 2);
    ASSERT_TRUE(t.ok()) << t.message();
    EXPECT_GT(*t, 0);
  }
  EXPECT_FALSE(time_prefill(**m, *backend, 0, 8, 1).ok());
  EXPECT_FALSE(time_prefill(**m, *backend, 8, 0, 1).ok());
  EXPECT_FALSE(time_decode(**m, *backend, 0, 8, 8, 1).ok());
  EXPECT_FALSE(time_decode(**m, *backend, 1, 0, 8, 1).ok());
  EXPECT_FALSE(time_decode(**m, *backend, 1, 8, 0, 1).ok());
}

}  // namespace
}  // namespace th
