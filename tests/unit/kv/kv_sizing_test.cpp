// serve's KV cache size when --kv-cache-mib is not given (kv/kv_sizing.h), and the memory
// reading it starts from (base/system_memory.h).
#include "kv/kv_sizing.h"

#include <gtest/gtest.h>

#include "base/system_memory.h"

namespace th {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

TEST(KvSizing, EnoughForEverySequenceWhenMemoryAllows) {
  // 64 sequences x 2048 positions, 16-position blocks of 1 MiB: 8192 blocks, 8 GiB; 64 GiB free.
  const KvSizing s = auto_kv_blocks(kMiB, 16, 64, 2048, 64 * 1024 * kMiB);
  EXPECT_EQ(s.blocks, 64 * 128);
  EXPECT_NE(s.why.find("64 sequences x 2048 positions"), std::string::npos) << s.why;
  EXPECT_NE(s.why.find("--kv-cache-mib"), std::string::npos) << s.why;
}

TEST(KvSizing, AtMostHalfOfWhatIsLeft) {
  // The same want with 4 GiB free: 2 GiB of blocks.
  EXPECT_EQ(auto_kv_blocks(kMiB, 16, 64, 2048, 4096 * kMiB).blocks, 2048);
  // A partial last block of a sequence counts whole: 100 positions in 16-position blocks = 7.
  EXPECT_EQ(auto_kv_blocks(kMiB, 16, 3, 100, 1024 * kMiB).blocks, 21);
}

TEST(KvSizing, AtLeastOneBlockAndNoOverflowOnOddInput) {
  EXPECT_EQ(auto_kv_blocks(kMiB, 16, 64, 2048, 0).blocks, 1);
  EXPECT_EQ(auto_kv_blocks(kMiB, 16, 64, 2048, -5).blocks, 1);
  EXPECT_EQ(auto_kv_blocks(0, 0, 0, 0, 10 * kMiB).blocks, 1);
}

TEST(SystemMemory, ParsesMemAvailable) {
  Result<int64_t> v = parse_mem_available("MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   2048 kB\n");
  ASSERT_TRUE(v.ok()) << v.message();
  EXPECT_EQ(*v, 2048 * 1024);
  EXPECT_FALSE(parse_mem_available("MemTotal: 5 kB\n").ok());
  Result<int64_t> bad = parse_mem_available("MemAvailable: lots\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("MemAvailable"), std::string::npos) << bad.message();
}

TEST(SystemMemory, ThisMachineHasSome) {
  Result<int64_t> v = available_memory_bytes();
  ASSERT_TRUE(v.ok()) << v.message();
  EXPECT_GT(*v, 0);
}

TEST(KvSizing, MaxSeqsIsMemoryOverPerSequenceMemoryTimesSevenTenths) {
  // The 1.1B model's f32 KV: 44 KiB a position, 88 MiB a 2048-position sequence; 5 GiB for the
  // cache: 58.2 x 0.7 = 40.7 -> 40.
  const SeqSizing s = auto_max_seqs(44 * 1024, 2048, 5120 * kMiB, 256);
  EXPECT_EQ(s.max_seqs, 40);
  EXPECT_NE(s.why.find("x 0.7 = 40.7"), std::string::npos) << s.why;
  EXPECT_NE(s.why.find("--max-num-seqs"), std::string::npos) << s.why;
  EXPECT_EQ(auto_max_seqs(44 * 1024, 2048, 1024 * 1024 * kMiB, 256).max_seqs, 256);  // capped
  EXPECT_EQ(auto_max_seqs(44 * 1024, 2048, 10 * kMiB, 256).max_seqs, 1);            // at least one
  EXPECT_EQ(auto_max_seqs(0, 0, -5, 0).max_seqs, 1);
}

}  // namespace
}  // namespace th
