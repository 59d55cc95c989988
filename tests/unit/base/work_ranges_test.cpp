#include "base/work_ranges.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace th {
namespace {

// Every item of [0, n) handed out exactly once, pieces on grain boundaries and capped.
void check_pieces(const std::vector<std::pair<int64_t, int64_t>>& pieces, int64_t n, int64_t grain, int64_t cap) {
  std::vector<int> seen(static_cast<size_t>(n), 0);
  for (auto [b, e] : pieces) {
    ASSERT_LT(b, e);
    ASSERT_LE(e, n);
    EXPECT_EQ(b % grain, 0) << b;
    if (e != n) {
      EXPECT_EQ(e % grain, 0) << e;
    }
    if (cap > 0) {
      EXPECT_LE(e - b, cap);
    }
    for (int64_t i = b; i < e; ++i) ++seen[static_cast<size_t>(i)];
  }
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[static_cast<size_t>(i)], 1) << "item " << i;
}

TEST(WorkRanges, OneWorkerTakesItsRangeInOrderInShrinkingPieces) {
  WorkRanges r(1);
  r.reset(1000, 16);
  std::vector<std::pair<int64_t, int64_t>> pieces;
  int64_t b, e, last = 0;
  while (r.next(0, &b, &e)) {
    EXPECT_EQ(b, last);  // contiguous, in order
    last = e;
    pieces.emplace_back(b, e);
  }
  check_pieces(pieces, 1000, 16, 0);
  EXPECT_EQ(pieces.front().second, 256);  // a quarter of 1000, rounded up to 16
  EXPECT_LE(pieces.back().second - pieces.back().first, 16);
}

TEST(WorkRanges, AWorkerThatNeverComesHasItsRangeStolen) {
  WorkRanges r(4);
  r.reset(777, 8, 64);
  std::vector<std::pair<int64_t, int64_t>> pieces;
  int64_t b, e;
  while (r.next(2, &b, &e)) pieces.emplace_back(b, e);  // workers 0, 1 and 3 never call next
  check_pieces(pieces, 777, 8, 64);
  EXPECT_FALSE(r.next(0, &b, &e));
}

TEST(WorkRanges, ARemainderUnderTwiceMinStealStaysWithItsOwner) {
  WorkRanges r(2);
  r.reset(256, 16, 0, 48);  // worker 0: 0..128, worker 1: 128..256
  std::vector<std::pair<int64_t, int64_t>> pieces;
  int64_t b, e, stolen_from = 256;
  // Worker 1: its own 128..256, then the back half of worker 0's 128 (>= 2 x 48): 64..128.
  while (r.next(1, &b, &e)) {
    pieces.emplace_back(b, e);
    stolen_from = std::min(stolen_from, b);
  }
  EXPECT_EQ(stolen_from, 64);
  // The 64 left (under 2 x 48) were not stolen: still worker 0's, all of them.
  int64_t own = 0;
  while (r.next(0, &b, &e)) {
    pieces.emplace_back(b, e);
    EXPECT_LE(e, 64);
    own += e - b;
  }
  EXPECT_EQ(own, 64);
  check_pieces(pieces, 256, 16, 0);
}

TEST(WorkRanges, EachWorkerStartsOnItsOwnContiguousRange) {
  WorkRanges r(2);
  r.reset(100, 16);
  int64_t b, e;
  ASSERT_TRUE(r.next(1, &b, &e));
  EXPECT_EQ(b, 48);  // 7 grains: worker 0 gets 3 (0..48), worker 1 the rest
  ASSERT_TRUE(r.next(0, &b, &e));
  EXPECT_EQ(b, 0);
}

// initial_range says where reset puts each worker (what CpuBackend's prefetch of the next
// region relies on): a worker's first claim starts there, and its range ends there.
TEST(WorkRanges, InitialRangeIsWhereEachWorkerStarts) {
  for (int workers : {1, 2, 3, 5}) {
    for (int64_t n : {0, 1, 15, 16, 100, 2560, 11264}) {
      WorkRanges r(workers);
      r.reset(n, 16);
      int64_t covered = 0;
      for (int w = 0; w < workers; ++w) {
        int64_t b0, e0;
        WorkRanges::initial_range(n, 16, workers, w, &b0, &e0);
        ASSERT_LE(b0, e0);
        covered += e0 - b0;
        int64_t b, e, last = b0;
        for (bool first = true; b0 < e0; first = false) {  // the owner alone: its range in order
          ASSERT_TRUE(r.next(w, &b, &e)) << workers << " " << n << " " << w;
          if (first) {
            EXPECT_EQ(b, b0) << workers << " " << n << " " << w;
          }
          EXPECT_EQ(b, last);
          last = e;
          if (e == e0) break;
        }
      }
      EXPECT_EQ(covered, n);
    }
  }
}

TEST(WorkRanges, EmptyAndTinyRanges) {
  WorkRanges r(3);
  int64_t b, e;
  r.reset(0, 16);
  EXPECT_FALSE(r.next(0, &b, &e));
  r.reset(5, 16);  // one grain, less than one full: one worker's
  std::vector<std::pair<int64_t, int64_t>> pieces;
  for (int w = 0; w < 3; ++w)
    while (r.next(w, &b, &e)) pieces.emplace_back(b, e);
  check_pieces(pieces, 5, 16, 0);
}

TEST(WorkRanges, ThreadsRacingEveryItemOnce) {
  constexpr int kThreads = 4;
  WorkRanges r(kThreads);
  for (int round = 0; round < 200; ++round) {
    const int64_t n = 1 + round * 37 % 5000, grain = 1 + round % 16, cap = round % 3 == 0 ? 0 : 4 * grain;
    r.reset(n, grain, cap, round % 4 == 0 ? 3 * grain : 0);
    std::vector<std::vector<std::pair<int64_t, int64_t>>> got(kThreads);
    std::atomic<int> go{0};
    std::vector<std::thread> ts;
    for (int w = 0; w < kThreads; ++w)
      ts.emplace_back([&, w] {
        while (go.load() == 0) {
        }
        int64_t b, e;
        // Uneven workers: worker 0 dawdles over each piece, so the others steal from it.
        while (r.next(w, &b, &e)) {
          got[static_cast<size_t>(w)].emplace_back(b, e);
          if (w == 0) std::this_thread::yield();
        }
      });
    go.store(1);
    for (auto& t : ts) t.join();
    std::vector<std::pair<int64_t, int64_t>> all;
    for (auto& g : got) all.insert(all.end(), g.begin(), g.end());
    check_pieces(all, n, grain, cap);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace th
