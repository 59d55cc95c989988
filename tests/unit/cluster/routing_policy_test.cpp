#include "cluster/routing_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cluster/prefix_hash.h"

namespace th::cluster {
namespace {

CellView cell(std::string id, std::map<int32_t, int64_t> outstanding = {}, CellLoad load = {}) {
  CellView c;
  c.id = std::move(id);
  c.eligible = true;
  c.load = load;
  c.outstanding_tokens = std::move(outstanding);
  return c;
}

std::vector<CellView> cells_named(int n) {
  std::vector<CellView> cells;
  for (int i = 0; i < n; ++i) cells.push_back(cell("http://10.0.0." + std::to_string(i + 1) + ":8080"));
  return cells;
}

RouteRequest request(std::vector<uint64_t> blocks, int32_t priority = 0) {
  RouteRequest r;
  r.prefix_blocks = std::move(blocks);
  r.priority = priority;
  r.cost_tokens = 100;
  return r;
}

std::string picked_id(const RoutingPolicy& p, const RouteRequest& r, const std::vector<CellView>& cells) {
  const auto i = p.pick(r, cells);
  return i ? cells[*i].id : std::string("<none>");
}

TEST(RoutingPolicyLoadScore, IsTheDocumentedFormula) {
  CellView c = cell("a", {{-1, 100}, {0, 200}, {1, 400}},
                    {.running = 2, .waiting = 3, .kv_free_blocks = 5, .kv_total_blocks = 100});
  const LoadOptions o;  // 256 tokens a sequence, penalty below 10% free, up to 16384
  // 5 sequences * 256 = 1280; 5% free = half-way to empty: 8192.
  EXPECT_DOUBLE_EQ(load_score(c, -2, o), 0 + 1280 + 8192);
  EXPECT_DOUBLE_EQ(load_score(c, -1, o), 100 + 1280 + 8192);
  EXPECT_DOUBLE_EQ(load_score(c, 0, o), 300 + 1280 + 8192);
  EXPECT_DOUBLE_EQ(load_score(c, 1, o), 700 + 1280 + 8192);
  EXPECT_DOUBLE_EQ(load_score(c, 100, o), 700 + 1280 + 8192);
  const LoadOptions custom{.tokens_per_sequence = 10, .kv_low_fraction = 0.5, .kv_full_penalty_tokens = 1000};
  // 5% free against a 50% threshold: (0.5 - 0.05) / 0.5 * 1000 = 900.
  EXPECT_DOUBLE_EQ(load_score(c, 0, custom), 300 + 50 + 900);
}

TEST(RoutingPolicyLoadScore, KvPenaltyRampsBelowTheThreshold) {
  const LoadOptions o;
  auto kv = [&](int64_t free_blocks, int64_t total) {
    return load_score(cell("a", {}, {.kv_free_blocks = free_blocks, .kv_total_blocks = total}), 0, o);
  };
  EXPECT_DOUBLE_EQ(kv(1000, 1000), 0);
  EXPECT_DOUBLE_EQ(kv(100, 1000), 0);  // exactly at 10%: no penalty yet
  EXPECT_DOUBLE_EQ(kv(75, 1000), 16384 * 0.25);
  EXPECT_DOUBLE_EQ(kv(0, 1000), 16384);
  EXPECT_DOUBLE_EQ(kv(0, 0), 0);        // not reported
  EXPECT_DOUBLE_EQ(kv(-5, 1000), 16384);  // nonsense is clamped
  EXPECT_LT(kv(99, 1000), kv(50, 1000));
  EXPECT_DOUBLE_EQ(load_score(cell("a", {}, {.kv_free_blocks = 0, .kv_total_blocks = 10}), 0,
                              {.kv_low_fraction = 0}),
                   0);  // penalty off
}

TEST(RoutingPolicy, NoEligibleCellIsNullopt) {
  const LeastLoadPolicy load;
  const PrefixAffinityPolicy prefix;
  const RouteRequest r = request(prefix_block_hashes(std::string(1000, 'p')));
  std::vector<CellView> none;
  EXPECT_FALSE(load.pick(r, none).has_value());
  EXPECT_FALSE(prefix.pick(r, none).has_value());
  std::vector<CellView> cells = cells_named(3);
  for (auto& c : cells) c.eligible = false;
  EXPECT_FALSE(load.pick(r, cells).has_value());
  EXPECT_FALSE(prefix.pick(r, cells).has_value());
  EXPECT_FALSE(prefix.affinity_cell(r, cells).has_value());
  for (auto& c : cells) {
    c.eligible = true;
    c.load.draining = true;  // a draining cell takes nothing, whatever `eligible` says
  }
  EXPECT_FALSE(load.pick(r, cells).has_value());
  EXPECT_FALSE(prefix.pick(r, cells).has_value());
  EXPECT_FALSE(prefix.pick(request({}), cells).has_value());
}

TEST(RoutingPolicy, IneligibleCellsAreSkipped) {
  std::vector<CellView> cells = {cell("a", {{0, 5000}}), cell("b", {{0, 0}}), cell("c", {{0, 100}})};
  const LeastLoadPolicy load;
  EXPECT_EQ(picked_id(load, request({}), cells), "b");
  cells[1].eligible = false;
  EXPECT_EQ(picked_id(load, request({}), cells), "c");
  cells[2].load.draining = true;
  EXPECT_EQ(picked_id(load, request({}), cells), "a");

  // Prefix affinity never picks an ineligible cell either, for any key.
  const PrefixAffinityPolicy prefix;
  std::vector<CellView> four = cells_named(4);
  four[2].eligible = false;
  for (uint64_t key = 0; key < 500; ++key) {
    const auto i = prefix.pick(request({key * 0x9e3779b97f4a7c15ULL}), four);
    ASSERT_TRUE(i.has_value());
    EXPECT_NE(*i, 2u) << key;
  }
}

TEST(RoutingPolicy, LeastLoadCountsOnlyWorkThatDelaysTheRequest) {
  // "a" has a lot of low-priority (1) work, "b" some normal (0) work.
  const std::vector<CellView> cells = {cell("a", {{1, 10000}}), cell("b", {{0, 3000}})};
  const LeastLoadPolicy load;
  // A normal or high request runs ahead of a's low-priority work: a is free for it.
  EXPECT_EQ(picked_id(load, request({}, 0), cells), "a");
  EXPECT_EQ(picked_id(load, request({}, -1), cells), "a");
  // A low-priority request waits behind all of it.
  EXPECT_EQ(picked_id(load, request({}, 1), cells), "b");
  // High-priority work counts against everyone.
  const std::vector<CellView> high = {cell("a", {{-1, 4000}, {1, 10}}), cell("b", {{0, 3000}})};
  EXPECT_EQ(picked_id(load, request({}, -1), high), "b");
  EXPECT_EQ(picked_id(load, request({}, 0), high), "b");
}

TEST(RoutingPolicy, LeastLoadCountsWhatTheCellReports) {
  // Work other routers sent shows only in the cell's own counts.
  const std::vector<CellView> cells = {cell("a", {{0, 1000}}, {.running = 1}),
                                       cell("b", {}, {.running = 8, .waiting = 4})};
  const LeastLoadPolicy load;  // a: 1000 + 256; b: 12 * 256 = 3072
  EXPECT_EQ(picked_id(load, request({}), cells), "a");
  const LeastLoadPolicy cheap({.tokens_per_sequence = 50});  // a: 1050; b: 600
  EXPECT_EQ(picked_id(cheap, request({}), cells), "b");
}

TEST(RoutingPolicy, LeastLoadAvoidsACellOutOfKv) {
  const std::vector<CellView> cells = {cell("a", {{0, 1000}}, {.kv_free_blocks = 500, .kv_total_blocks = 1000}),
                                       cell("b", {}, {.kv_free_blocks = 10, .kv_total_blocks = 1000})};
  const LeastLoadPolicy load;  // b: 0 tokens but 1% free: 16384 * 0.9
  EXPECT_EQ(picked_id(load, request({}), cells), "a");
  const std::vector<CellView> roomy = {cells[0], cell("b", {}, {.kv_free_blocks = 200, .kv_total_blocks = 1000})};
  EXPECT_EQ(picked_id(load, request({}), roomy), "b");
}

TEST(RoutingPolicy, LeastLoadTiesGoToTheSmallestId) {
  std::vector<CellView> cells = {cell("c"), cell("a"), cell("b")};
  const LeastLoadPolicy load;
  EXPECT_EQ(load.pick(request({}), cells), std::optional<size_t>(1));
  std::reverse(cells.begin(), cells.end());
  EXPECT_EQ(picked_id(load, request({}), cells), "a");
  cells[1].outstanding_tokens[0] = 1;  // "a" is no longer tied
  EXPECT_EQ(picked_id(load, request({}), cells), "b");
}

// Which cell, by id, each key goes to.
std::vector<std::string> assign(const PrefixAffinityPolicy& p, const std::vector<uint64_t>& keys,
                                const std::vector<CellView>& cells) {
  std::vector<std::string> out;
  for (uint64_t k : keys) out.push_back(picked_id(p, request({k}), cells));
  return out;
}

std::vector<uint64_t> random_keys(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> keys(n);
  for (auto& k : keys) k = rng();
  return keys;
}

TEST(RoutingPolicyRendezvous, RemovingACellMovesOnlyItsKeys) {
  const PrefixAffinityPolicy prefix;
  const std::vector<uint64_t> keys = random_keys(1000, 11);
  const std::vector<CellView> four = cells_named(4);
  const std::vector<std::string> before = assign(prefix, keys, four);
  const std::string removed = four[2].id;

  // Removed from the list (indices shift) or just ineligible: the same.
  std::vector<CellView> three = four;
  three.erase(three.begin() + 2);
  std::vector<CellView> three_ineligible = four;
  three_ineligible[2].eligible = false;
  const std::vector<std::string> after = assign(prefix, keys, three);
  EXPECT_EQ(after, assign(prefix, keys, three_ineligible));

  int on_removed = 0, moved = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (before[i] == removed) {
      ++on_removed;
      EXPECT_NE(after[i], removed);
    } else {
      EXPECT_EQ(after[i], before[i]) << "key " << i << " moved although its cell stayed";
    }
    if (after[i] != before[i]) ++moved;
  }
  EXPECT_EQ(moved, on_removed);
  // About 1/4 of the keys (250; the standard deviation is ~14).
  EXPECT_GT(moved, 190);
  EXPECT_LT(moved, 310);
}

TEST(RoutingPolicyRendezvous, AddingACellTakesAboutItsShareOnly) {
  const PrefixAffinityPolicy prefix;
  const std::vector<uint64_t> keys = random_keys(1000, 12);
  std::vector<CellView> cells = cells_named(3);
  const std::vector<std::string> before = assign(prefix, keys, cells);
  cells.push_back(cell("http://10.0.0.99:8080"));
  const std::vector<std::string> after = assign(prefix, keys, cells);
  int moved = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (after[i] != before[i]) {
      ++moved;
      EXPECT_EQ(after[i], "http://10.0.0.99:8080");  // only to the new cell
    }
  }
  EXPECT_GT(moved, 190);
  EXPECT_LT(moved, 310);
}

TEST(RoutingPolicyRendezvous, KeysSpreadEvenly) {
  const PrefixAffinityPolicy prefix;
  for (int n : {2, 4, 7}) {
    const std::vector<CellView> cells = cells_named(n);
    const std::vector<uint64_t> keys = random_keys(7000, 13 + n);
    std::map<std::string, int> count;
    for (const std::string& id : assign(prefix, keys, cells)) ++count[id];
    ASSERT_EQ(count.size(), static_cast<size_t>(n)) << n;
    const double expected = 7000.0 / n;
    double chi2 = 0;
    for (const auto& entry : count) {
      chi2 += (entry.second - expected) * (entry.second - expected) / expected;
      EXPECT_NEAR(entry.second, expected, expected * 0.12) << n << " " << entry.first;
    }
    // n-1 degrees of freedom: far below this unless the spread is skewed.
    EXPECT_LT(chi2, 25.0) << n;
  }
}

TEST(RoutingPolicyRendezvous, AffinityCellIsTheHighestWeight) {
  const PrefixAffinityPolicy prefix;  // affinity_blocks 8
  const std::vector<CellView> cells = cells_named(5);
  auto expected = [&](uint64_t key) {
    size_t best = 0;
    for (size_t i = 1; i < cells.size(); ++i)
      if (rendezvous_weight(key, cells[i].id) > rendezvous_weight(key, cells[best].id)) best = i;
    return best;
  };
  std::vector<uint64_t> blocks = random_keys(12, 14);
  // The key is block min(n, 8) - 1.
  for (size_t n = 1; n <= blocks.size(); ++n) {
    const RouteRequest r = request({blocks.begin(), blocks.begin() + static_cast<std::ptrdiff_t>(n)});
    EXPECT_EQ(prefix.affinity_cell(r, cells), expected(blocks[std::min<size_t>(n, 8) - 1])) << n;
    EXPECT_EQ(prefix.pick(r, cells), prefix.affinity_cell(r, cells)) << n;  // idle cells: no fallback
  }
  EXPECT_NE(rendezvous_weight(1, "a"), rendezvous_weight(2, "a"));
  EXPECT_NE(rendezvous_weight(1, "a"), rendezvous_weight(1, "b"));
}

TEST(RoutingPolicyRendezvous, PromptsSharingAPrefixShareACell) {
  const PrefixAffinityPolicy prefix;
  const std::vector<CellView> cells = cells_named(4);
  std::mt19937_64 rng(15);
  auto text = [&](size_t n) {
    std::string s(n, ' ');
    for (char& c : s) c = static_cast<char>('a' + rng() % 26);
    return s;
  };
  std::set<std::string> used;
  for (int sys = 0; sys < 40; ++sys) {
    const std::string system_prompt = text(600);  // more than 8 blocks of 64 bytes
    std::set<std::string> cells_for_this_prompt;
    for (int user = 0; user < 10; ++user)
      cells_for_this_prompt.insert(picked_id(prefix, request(prefix_block_hashes(system_prompt + text(50 + user * 37))), cells));
    EXPECT_EQ(cells_for_this_prompt.size(), 1u) << sys;
    used.insert(*cells_for_this_prompt.begin());
  }
  EXPECT_EQ(used.size(), 4u);  // 40 prefixes over 4 cells: all are used
}

TEST(RoutingPolicyAffinity, FallsBackToLeastLoadOnImbalance) {
  const PrefixAffinityPolicy prefix;  // max_imbalance_tokens 2048
  std::vector<CellView> cells = cells_named(3);
  const RouteRequest r = request(random_keys(8, 16));
  const size_t home = *prefix.affinity_cell(r, cells);
  const size_t other = (home + 1) % 3, third = (home + 2) % 3;
  cells[other].outstanding_tokens[0] = 500;
  cells[third].outstanding_tokens[0] = 700;

  cells[home].outstanding_tokens[0] = 500 + 2048;  // exactly the allowed imbalance: stays
  EXPECT_EQ(prefix.pick(r, cells), home);
  cells[home].outstanding_tokens[0] = 500 + 2049;  // one more: the least-loaded cell
  EXPECT_EQ(prefix.pick(r, cells), other);

  // Low-priority work on the home cell does not count against a normal request.
  cells[home].outstanding_tokens = {{1, 100000}};
  EXPECT_EQ(prefix.pick(r, cells), home);
  EXPECT_EQ(prefix.pick(request(r.prefix_blocks, 1), cells), other);

  // A full KV cache counts too.
  cells[home].outstanding_tokens.clear();
  cells[home].load.kv_total_blocks = 100;
  cells[home].load.kv_free_blocks = 0;
  EXPECT_EQ(prefix.pick(r, cells), other);

  // A larger allowance keeps it home.
  PolicyOptions o;
  o.max_imbalance_tokens = 20000;
  EXPECT_EQ(PrefixAffinityPolicy(o).pick(r, cells), home);
}

TEST(RoutingPolicyAffinity, NoFullBlockMeansLeastLoad) {
  const PrefixAffinityPolicy prefix;
  const std::vector<CellView> cells = {cell("a", {{0, 300}}), cell("b", {{0, 100}}), cell("c", {{0, 200}})};
  const RouteRequest short_prompt = request(prefix_block_hashes("hello, a prompt shorter than a block"));
  ASSERT_TRUE(short_prompt.prefix_blocks.empty());
  EXPECT_FALSE(prefix.affinity_cell(short_prompt, cells).has_value());
  EXPECT_EQ(picked_id(prefix, short_prompt, cells), "b");
}

TEST(RoutingPolicyAffinity, AffinityBlocksIsHonoured) {
  PolicyOptions o;
  o.affinity_blocks = 1;
  const auto policy = make_routing_policy("prefix", o);
  ASSERT_TRUE(policy.ok()) << policy.message();
  const std::vector<CellView> cells = cells_named(4);
  // Sharing only the first block: one cell under affinity_blocks 1.
  std::set<std::string> one;
  for (uint64_t second = 0; second < 50; ++second) one.insert(picked_id(**policy, request({42, second}), cells));
  EXPECT_EQ(one.size(), 1u);
  // Under the default 8, the second block is the key: they spread.
  const PrefixAffinityPolicy eight;
  std::set<std::string> spread;
  for (uint64_t second = 0; second < 50; ++second)
    spread.insert(picked_id(eight, request({42, second * 0x9e3779b97f4a7c15ULL}), cells));
  EXPECT_GT(spread.size(), 1u);
}

TEST(RoutingPolicy, DeterministicAndIndependentOfCellOrder) {
  std::mt19937_64 rng(17);
  const LeastLoadPolicy load;
  const PrefixAffinityPolicy prefix;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<CellView> cells = cells_named(6);
    for (auto& c : cells) {
      c.eligible = rng() % 5 != 0;
      c.outstanding_tokens[static_cast<int32_t>(rng() % 3) - 1] = static_cast<int64_t>(rng() % 4000);
      c.load.running = static_cast<int64_t>(rng() % 8);
      c.load.kv_total_blocks = 1000;
      c.load.kv_free_blocks = static_cast<int64_t>(rng() % 1000);
    }
    const RouteRequest r = request(random_keys(rng() % 10, rng()), static_cast<int32_t>(rng() % 3) - 1);
    for (const RoutingPolicy* p : {static_cast<const RoutingPolicy*>(&load), static_cast<const RoutingPolicy*>(&prefix)}) {
      const std::string first = picked_id(*p, r, cells);
      EXPECT_EQ(picked_id(*p, r, cells), first);
      std::vector<CellView> shuffled = cells;
      std::shuffle(shuffled.begin(), shuffled.end(), rng);
      EXPECT_EQ(picked_id(*p, r, shuffled), first) << p->name() << " trial " << trial;
      // Whatever it picked is eligible, and only "<none>" when nothing is.
      const bool any = std::any_of(cells.begin(), cells.end(), [](const CellView& c) { return c.eligible; });
      EXPECT_EQ(first != "<none>", any);
    }
  }
}

TEST(RoutingPolicyFactory, MakesPoliciesByName) {
  const auto load = make_routing_policy("load", {});
  ASSERT_TRUE(load.ok()) << load.message();
  EXPECT_EQ((*load)->name(), "load");
  EXPECT_NE(dynamic_cast<const LeastLoadPolicy*>(load->get()), nullptr);
  const auto prefix = make_routing_policy("prefix", {});
  ASSERT_TRUE(prefix.ok()) << prefix.message();
  EXPECT_EQ((*prefix)->name(), "prefix");
  EXPECT_NE(dynamic_cast<const PrefixAffinityPolicy*>(prefix->get()), nullptr);

  // The factory's policy picks what the class does.
  std::vector<CellView> cells = {cell("a", {{0, 300}}), cell("b", {{0, 100}})};
  EXPECT_EQ(picked_id(**load, request({}), cells), "b");
}

TEST(RoutingPolicyFactory, RefusesUnknownNamesAndBadOptions) {
  for (const char* name : {"", "Load", "round-robin", "prefix "}) {
    const auto p = make_routing_policy(name, {});
    EXPECT_FALSE(p.ok()) << name;
    EXPECT_NE(p.message().find("unknown routing policy"), std::string::npos) << p.message();
  }
  EXPECT_NE(make_routing_policy("random", {}).message().find("'random'"), std::string::npos);
  PolicyOptions zero_blocks;
  zero_blocks.affinity_blocks = 0;
  EXPECT_FALSE(make_routing_policy("prefix", zero_blocks).ok());
  EXPECT_TRUE(make_routing_policy("load", zero_blocks).ok());  // not used by "load"
  PolicyOptions negative;
  negative.max_imbalance_tokens = -1;
  EXPECT_FALSE(make_routing_policy("prefix", negative).ok());
  PolicyOptions fraction;
  fraction.load.kv_low_fraction = 1.5;
  EXPECT_FALSE(make_routing_policy("load", fraction).ok());
  PolicyOptions per_sequence;
  per_sequence.load.tokens_per_sequence = -1;
  EXPECT_FALSE(make_routing_policy("load", per_sequence).ok());
}

}  // namespace
}  // namespace th::cluster
