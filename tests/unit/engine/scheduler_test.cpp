#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <limits>

namespace th {
namespace {

constexpr double kStrict = std::numeric_limits<double>::infinity();

SchedulerState state(int64_t blocks, int64_t budget = 64, int64_t max_seqs = 8, int64_t host = 0) {
  SchedulerState st;
  st.block_size = 4;
  st.token_budget = budget;
  st.max_seqs = max_seqs;
  st.available_blocks = blocks;
  st.host_free_blocks = host;
  return st;
}

// A running sequence: n_tokens known, n_computed of them in `held` blocks (all its own).
SeqSummary running(int64_t id, int64_t n_tokens, int64_t n_computed, int32_t prio = 0) {
  SeqSummary s;
  s.id = id;
  s.phase = SeqPhase::Running;
  s.priority = prio;
  s.arrival = static_cast<double>(id);
  s.arrival_no = static_cast<uint64_t>(id);
  s.n_tokens = n_tokens;
  s.n_computed = n_computed;
  s.blocks_held = (n_computed + 3) / 4;
  s.blocks_released = s.blocks_held;
  return s;
}

SeqSummary waiting(int64_t id, int64_t n_tokens, int32_t prio = 0, double arrival = -1) {
  SeqSummary s;
  s.id = id;
  s.phase = SeqPhase::Waiting;
  s.priority = prio;
  s.arrival = arrival >= 0 ? arrival : static_cast<double>(id);
  s.arrival_no = static_cast<uint64_t>(id);
  s.n_tokens = n_tokens;
  return s;
}

SeqSummary swapped(int64_t id, int64_t n_tokens, int64_t n_computed, int32_t prio = 0) {
  SeqSummary s = running(id, n_tokens, n_computed, prio);
  s.phase = SeqPhase::Swapped;
  s.blocks_released = 0;
  return s;
}

std::vector<std::pair<int64_t, int64_t>> work(const Decision& d) {
  std::vector<std::pair<int64_t, int64_t>> v;
  for (const auto& w : d.run) v.emplace_back(w.id, w.n_tokens);
  return v;
}

using W = std::vector<std::pair<int64_t, int64_t>>;

// Preempted and not advanced since (SeqSummary::awaiting_advance).
SeqSummary unadvanced(SeqSummary s) {
  s.awaiting_advance = true;
  return s;
}

TEST(Scheduler, DecodesFirstThenPromptChunksInRankOrder) {
  SchedulerState st = state(100, /*budget=*/20);
  st.seqs = {waiting(5, 30), running(1, 9, 8), running(2, 13, 12), waiting(6, 7), running(3, 40, 10)};
  const Decision d = PriorityScheduler().schedule(st);
  EXPECT_TRUE(d.preempt.empty());
  // Three decodes set aside 2 tokens (the running prefill of 3 is not a decode); 18 left:
  // sequence 3's chunk takes them all, in rank (arrival) order before the waiting ones.
  EXPECT_EQ(work(d), (W{{1, 1}, {2, 1}, {3, 18}}));
}

TEST(Scheduler, ChunksShrinkToTheBlocksThereAre) {
  SchedulerState st = state(/*blocks=*/3, /*budget=*/64);
  st.seqs = {waiting(1, 40)};
  EXPECT_EQ(work(PriorityScheduler().schedule(st)), (W{{1, 12}}));
  // A prefix hit of 2 blocks that nobody else uses costs 2 of the 3: one block is left for 4 more tokens.
  st.seqs[0].n_computed = 8;
  st.seqs[0].blocks_held = 2;
  st.seqs[0].hit_cost = 2;
  EXPECT_EQ(work(PriorityScheduler().schedule(st)), (W{{1, 4}}));
  // Shared with a running sequence (cost 0): three new blocks, 12 tokens.
  st.seqs[0].hit_cost = 0;
  EXPECT_EQ(work(PriorityScheduler().schedule(st)), (W{{1, 12}}));
}

TEST(Scheduler, AdmitsByPriorityThenArrivalWithinMaxSeqs) {
  SchedulerState st = state(100, 64, /*max_seqs=*/2);
  st.seqs = {waiting(1, 4, 1), waiting(2, 4, 0), waiting(3, 4, -1), waiting(4, 4, -1)};
  EXPECT_EQ(work(PriorityScheduler(kStrict).schedule(st)), (W{{3, 4}, {4, 4}}));
  EXPECT_EQ(work(FcfsScheduler().schedule(st)), (W{{1, 4}, {2, 4}}));
}

// Prefix clustering: of the waiting sequences whose next prompt block is the same, the first
// is admitted and the others wait for it; one whose block a running sequence is computing
// waits too; the queue goes on past them (sequence 5 shares nothing).
TEST(Scheduler, SequencesSharingTheirNextBlockWaitForTheFirst) {
  SchedulerState st = state(100, 64);
  SeqSummary a = waiting(1, 12), b = waiting(2, 12), c = waiting(3, 12), d = waiting(4, 12), e = waiting(5, 12);
  a.next_block = b.next_block = c.next_block = 77;
  d.next_block = 99;
  d.next_block_pending = true;
  st.seqs = {a, b, c, d, e};
  for (const Decision& dec : {PriorityScheduler(kStrict).schedule(st), FcfsScheduler().schedule(st)})
    EXPECT_EQ(work(dec), (W{{1, 12}, {5, 12}}));
  // Without a shared block, each is admitted.
  for (SeqSummary& s : st.seqs) s.next_block = 0, s.next_block_pending = false;
  EXPECT_EQ(work(FcfsScheduler().schedule(st)).size(), 5u);
}

TEST(Scheduler, HighPriorityArrivalPreemptsTheLowestMostRecentRunning) {
  SchedulerState st = state(/*blocks=*/0, 64, 8, /*host=*/100);
  // The decodes stay inside their last block: only the arrival needs blocks.
  st.seqs = {running(1, 8, 7, 1), running(2, 8, 7, 1), running(3, 8, 7, 0), waiting(4, 6, -1)};
  const Decision d = PriorityScheduler(kStrict).schedule(st);
  // 4 needs 2 blocks: the lowest priority, most recent (2) gives up its 2 blocks, swapped to host.
  ASSERT_EQ(d.preempt.size(), 1u);
  EXPECT_EQ(d.preempt[0].id, 2);
  EXPECT_EQ(d.preempt[0].mode, PreemptMode::Swap);
  EXPECT_EQ(work(d), (W{{4, 6}, {3, 1}, {1, 1}}));
  // Without room in the host tier it is dropped, to be recomputed.
  st.host_free_blocks = 1;
  const Decision r = PriorityScheduler(kStrict).schedule(st);
  ASSERT_EQ(r.preempt.size(), 1u);
  EXPECT_EQ(r.preempt[0].mode, PreemptMode::Recompute);
  // First come, first served: the new request waits.
  const Decision f = FcfsScheduler().schedule(st);
  EXPECT_TRUE(f.preempt.empty());
  EXPECT_EQ(work(f), (W{{1, 1}, {2, 1}, {3, 1}}));
}

TEST(Scheduler, AFullSlotTableIsRoomToo) {
  SchedulerState st = state(100, 64, /*max_seqs=*/2);
  st.seqs = {running(1, 9, 8, 1), running(2, 9, 8, 1), waiting(3, 5, 0)};
  const Decision d = PriorityScheduler(kStrict).schedule(st);
  ASSERT_EQ(d.preempt.size(), 1u);
  EXPECT_EQ(d.preempt[0].id, 2);
  EXPECT_EQ(work(d), (W{{3, 5}, {1, 1}}));
}

TEST(Scheduler, NoPreemptionWhenItWouldNotBeEnough) {
  // Swapped 3 needs its 10 blocks back at once; preempting 2 would free only 2: nothing is
  // preempted, 3 waits, and the smaller 4 behind it does not overtake it.
  SchedulerState st = state(/*blocks=*/1);
  st.seqs = {running(1, 8, 7, -1), running(2, 8, 7, 1), swapped(3, 37, 36, 0), waiting(4, 2, 0)};
  const Decision d = PriorityScheduler(kStrict).schedule(st);
  EXPECT_TRUE(d.preempt.empty());
  EXPECT_EQ(work(d), (W{{1, 1}, {2, 1}}));
  // A waiting prompt, though, starts with the chunk that fits (chunked prefill).
  st.seqs[2] = waiting(3, 40, 0);
  EXPECT_EQ(work(PriorityScheduler(kStrict).schedule(st)).front(), (std::pair<int64_t, int64_t>{1, 1}));
  EXPECT_EQ(work(PriorityScheduler(kStrict).schedule(st))[1], (std::pair<int64_t, int64_t>{3, 4}));
}

TEST(Scheduler, DecodeOutOfBlocksPreemptsBelowOrYieldsItself) {
  // Both decodes cross into a new block and one block is left: the later gives way.
  SchedulerState st = state(/*blocks=*/1);
  st.seqs = {running(1, 9, 8), running(2, 9, 8)};
  Decision d = PriorityScheduler().schedule(st);
  ASSERT_EQ(d.preempt.size(), 1u);
  EXPECT_EQ(d.preempt[0].id, 2);
  EXPECT_EQ(work(d), (W{{1, 1}}));
  // No block at all: 1 preempts 2 and takes its blocks.
  st.available_blocks = 0;
  d = PriorityScheduler().schedule(st);
  EXPECT_EQ(work(d), (W{{1, 1}}));
  ASSERT_EQ(d.preempt.size(), 1u);
  // Alone and out of blocks, it yields itself (the engine caps a sequence at the pool, so this
  // only happens while others hold blocks it will get back).
  st.seqs = {running(1, 9, 8)};
  d = PriorityScheduler().schedule(st);
  ASSERT_EQ(d.preempt.size(), 1u);
  EXPECT_EQ(d.preempt[0].id, 1);
  EXPECT_TRUE(d.run.empty());
}

TEST(Scheduler, SwappedSequencesComeBackWhenRoomFrees) {
  SchedulerState st = state(/*blocks=*/2);
  st.seqs = {swapped(1, 9, 8), waiting(2, 4)};
  // 1 needs 3 blocks to come back and decode; 2 blocks are not enough, and 2 waits behind it.
  EXPECT_TRUE(PriorityScheduler().schedule(st).run.empty());
  st.available_blocks = 4;
  EXPECT_EQ(work(PriorityScheduler().schedule(st)), (W{{1, 1}, {2, 4}}));
}

TEST(Scheduler, AgeingLetsOldLowPriorityWorkAhead) {
  SchedulerState st = state(100, 64, /*max_seqs=*/1);
  st.seqs = {waiting(1, 4, /*prio=*/1, /*arrival=*/0.0), waiting(2, 4, /*prio=*/-1, /*arrival=*/50.0)};
  // At 10 s per level the low one's 50 s head start is worth 5 levels, more than the 2 between
  // them (keys 0 + 10 vs 50 - 10); at 60 s per level it is not (60 vs -10).
  EXPECT_EQ(work(PriorityScheduler(10.0).schedule(st)), (W{{1, 4}}));
  EXPECT_EQ(work(PriorityScheduler(60.0).schedule(st)), (W{{2, 4}}));
  EXPECT_EQ(work(PriorityScheduler(kStrict).schedule(st)), (W{{2, 4}}));
}

TEST(Scheduler, LowerPriorityPromptsWaitWhileAHigherOneIsComputing) {
  SchedulerState st = state(100, /*budget=*/64);
  st.seqs = {running(1, 9, 8, 1), running(2, 40, 8, 1), waiting(3, 20, -1), waiting(4, 10, 1), waiting(5, 10, -1)};
  // Decodes run at every priority; the high prompts (3, 5) get the budget, the low prompt chunks wait.
  EXPECT_EQ(work(PriorityScheduler(kStrict).schedule(st)), (W{{3, 20}, {5, 10}, {1, 1}}));
  // FCFS fills the budget in arrival order.
  EXPECT_EQ(work(FcfsScheduler().schedule(st)), (W{{1, 1}, {2, 32}, {3, 20}, {4, 10}, {5, 1}}));
}

TEST(Scheduler, LowPriorityPromptsCanBeCappedPerStep) {
  SchedulerState st = state(100, /*budget=*/64);
  st.seqs = {running(1, 8, 7, 1), running(2, 40, 8, 1), waiting(3, 20, 1)};
  EXPECT_EQ(work(PriorityScheduler(kStrict).schedule(st)), (W{{1, 1}, {2, 32}, {3, 20}}));
  // 16 low-priority prompt tokens per step: 2 takes them, 3 waits (without blocking admission).
  EXPECT_EQ(work(PriorityScheduler(kStrict, 16).schedule(st)), (W{{1, 1}, {2, 16}}));
  st.seqs.push_back(waiting(5, 1, 1));  // a one-token prompt is a decode: not capped
  EXPECT_EQ(work(PriorityScheduler(kStrict, 16).schedule(st)), (W{{1, 1}, {2, 16}, {5, 1}}));
}

// Issue #15's thrash: a preempted sequence came back into the few blocks left, chunk by chunk,
// and was preempted again before it generated anything. It now comes back whole or not at all.
TEST(Scheduler, APreemptedSequenceComesBackOnlyWhenItCanAdvance) {
  SchedulerState st = state(/*blocks=*/3);
  st.seqs = {unadvanced(waiting(1, 40)), waiting(2, 4)};
  // 10 blocks to reach its next token, 3 there: it waits, and 2 does not overtake it.
  EXPECT_TRUE(PriorityScheduler().schedule(st).run.empty());
  EXPECT_TRUE(FcfsScheduler().schedule(st).run.empty());
  // A fresh prompt in its place starts with the chunk that fits (chunked prefill).
  st.seqs[0].awaiting_advance = false;
  EXPECT_EQ(work(PriorityScheduler().schedule(st)), (W{{1, 12}}));
  // Its own cached blocks count: 2 of its 10 are a prefix hit nobody shares (cost 2).
  st.seqs[0] = unadvanced(waiting(1, 40));
  st.seqs[0].n_computed = 8;
  st.seqs[0].blocks_held = 2;
  st.seqs[0].hit_cost = 2;
  st.available_blocks = 9;
  EXPECT_TRUE(PriorityScheduler().schedule(st).run.empty());
  st.available_blocks = 10;
  EXPECT_EQ(work(PriorityScheduler().schedule(st)), (W{{1, 32}}));
  // Behind running work it also leaves each running sequence that outranks it a block to grow
  // into, so that it is not their next victim as soon as one of them crosses into a new block:
  // 10 + 1 for decode 0. (A block worth waiting for, not preempting for.)
  st.seqs.push_back(running(0, 8, 7));
  Decision d = PriorityScheduler().schedule(st);
  EXPECT_TRUE(d.preempt.empty());
  EXPECT_EQ(work(d), (W{{0, 1}}));
  st.available_blocks = 11;
  EXPECT_EQ(work(PriorityScheduler().schedule(st)), (W{{0, 1}, {1, 32}, {2, 4}}));
  // Running work it outranks cannot preempt it: nothing to spare for 3, ranked below.
  st.seqs = {st.seqs[0], running(3, 8, 7)};
  st.available_blocks = 10;
  EXPECT_EQ(work(PriorityScheduler().schedule(st)), (W{{1, 32}, {3, 1}}));
}

TEST(Scheduler, AdmissionLeavesTheRunningSetTheBlocksItNeedsToAdvance) {
  // 1 (low priority) decodes into a new block next; 2 (high) arrives with 3 blocks free. It gets
  // 2 of them and 1 its block, where it used to take all 3 and make 1 yield itself.
  SchedulerState st = state(/*blocks=*/3);
  st.seqs = {running(1, 9, 8, 1), waiting(2, 12, 0)};
  Decision d = PriorityScheduler(kStrict).schedule(st);
  EXPECT_TRUE(d.preempt.empty());
  EXPECT_EQ(work(d), (W{{2, 8}, {1, 1}}));
  // The rest of a running prompt is owed too: low-priority 3 has 8 of its 40 tokens, 8 blocks
  // to go. With 9 blocks free, high-priority 4 takes the one nobody is owed; with 8, it comes in
  // only by preempting 3 (which now would not have had its blocks).
  st = state(/*blocks=*/9);
  st.seqs = {running(3, 40, 8, 1), waiting(4, 4, 0)};
  d = PriorityScheduler(kStrict).schedule(st);
  EXPECT_TRUE(d.preempt.empty());
  EXPECT_EQ(work(d), (W{{4, 4}}));  // (3's chunk waits while a more important prompt computes)
  st.available_blocks = 8;
  d = PriorityScheduler(kStrict).schedule(st);
  ASSERT_EQ(d.preempt.size(), 1u);
  EXPECT_EQ(d.preempt[0].id, 3);
  EXPECT_EQ(work(d), (W{{4, 4}}));
}

TEST(Scheduler, ASequenceThatHasNotAdvancedSinceItsPreemptionIsNoVictim) {
  // 1 needs a block, none is free: the worst-ranked running sequence that has advanced gives way.
  SchedulerState st = state(/*blocks=*/0);
  st.seqs = {running(1, 9, 8), running(2, 9, 8), unadvanced(running(3, 6, 4))};
  Decision d = PriorityScheduler().schedule(st);
  ASSERT_EQ(d.preempt.size(), 1u);
  EXPECT_EQ(d.preempt[0].id, 2);
  EXPECT_EQ(work(d), (W{{1, 1}, {3, 2}}));
  // Out of blocks with only unadvanced ones below, a sequence that has advanced yields itself...
  st.seqs = {running(1, 9, 8), unadvanced(running(2, 6, 4))};
  d = PriorityScheduler().schedule(st);
  ASSERT_EQ(d.preempt.size(), 1u);
  EXPECT_EQ(d.preempt[0].id, 1);
  EXPECT_EQ(work(d), (W{{2, 2}}));
  // ...but an unadvanced one waits (keeps its blocks) while others make progress.
  st.available_blocks = 1;
  st.seqs = {running(1, 9, 8), unadvanced(running(2, 9, 8))};
  d = PriorityScheduler().schedule(st);
  EXPECT_TRUE(d.preempt.empty());
  EXPECT_EQ(work(d), (W{{1, 1}}));
}

TEST(Scheduler, AStepThatWouldDoNothingMakesRoomAfterAll) {
  // Every running sequence waits on blocks only unadvanced ones hold: the worst-ranked of them
  // gives way, so the next step runs the others (the engine treats an empty step as a failure).
  SchedulerState st = state(/*blocks=*/0);
  st.seqs = {unadvanced(running(1, 9, 8)), unadvanced(running(2, 9, 8))};
  const Decision d = PriorityScheduler().schedule(st);
  ASSERT_EQ(d.preempt.size(), 1u);
  EXPECT_EQ(d.preempt[0].id, 2);
  EXPECT_TRUE(d.run.empty());
}

}  // namespace
}  // namespace th
