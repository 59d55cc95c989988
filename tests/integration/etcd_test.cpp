// EtcdClient, CellRegistration and CellWatcher against a real etcd (Debian's
// etcd-server, /usr/bin/etcd) started by the test on ephemeral ports. One
// etcd serves the suite, each test under a prefix of its own; the restart
// test has its own. Skipped only when there is no etcd binary. Every wait is
// bounded; the suite takes about 15 s, most of it waiting for 2-second leases.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client/http_client.h"
#include "cluster/cell_registry.h"
#include "cluster/etcd_client.h"
#include "etcd_process.h"

namespace th::cluster {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::EtcdProcess;

int64_t ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

bool eventually(const std::function<bool()>& cond, std::chrono::milliseconds limit) {
  const auto until = Clock::now() + limit;
  while (!cond()) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

// A prefix of the running test's own: "/t/Suite.Name/".
std::string test_prefix() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return cat("/t/", info->test_suite_name(), ".", info->name(), "/");
}

std::vector<std::string> ids_of(const std::vector<DiscoveredCell>& cells) {
  std::vector<std::string> out;
  for (const DiscoveredCell& c : cells) out.push_back(c.id);
  return out;
}

bool has_key(EtcdClient& etcd, const std::string& key) {
  Result<RangeResult> r = etcd.range_prefix(key);
  if (!r.ok()) return false;
  return std::any_of(r->kvs.begin(), r->kvs.end(), [&key](const KeyValue& kv) { return kv.key == key; });
}

// Quiet logs: the tests check state, not lines (kept for a failure's message).
struct LogLines {
  std::mutex mu;
  std::vector<std::string> lines;
  DiscoveryLog sink() {
    return [this](std::string_view line) {
      std::lock_guard<std::mutex> lock(mu);
      lines.emplace_back(line);
    };
  }
  std::string all() {
    std::lock_guard<std::mutex> lock(mu);
    std::string out;
    for (const std::string& l : lines) out += l + "\n";
    return out;
  }
};

class EtcdTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!EtcdProcess::available()) return;
    etcd_ = new EtcdProcess();
  }
  static void TearDownTestSuite() {
    delete etcd_;
    etcd_ = nullptr;
  }
  void SetUp() override {
    if (!EtcdProcess::available()) GTEST_SKIP() << "no etcd at " << EtcdProcess::binary() << " (apt-get install etcd-server)";
    ASSERT_TRUE(etcd_ != nullptr && etcd_->ok()) << (etcd_ ? etcd_->log() : std::string());
    Result<std::unique_ptr<EtcdClient>> c = EtcdClient::create(etcd_->endpoint());
    ASSERT_TRUE(c.ok()) << c.message();
    client_ = std::move(c).value();
  }
  CellRegistrationOptions registration_options(const std::string& prefix) {
    CellRegistrationOptions o;
    o.prefix = prefix;
    o.log = log_.sink();
    return o;
  }
  CellWatcherOptions watcher_options(const std::string& prefix) {
    CellWatcherOptions o;
    o.prefix = prefix;
    o.log = log_.sink();
    return o;
  }

  static EtcdProcess* etcd_;
  std::unique_ptr<EtcdClient> client_;
  LogLines log_;
};

EtcdProcess* EtcdTest::etcd_ = nullptr;

using EtcdKv = EtcdTest;
using EtcdLease = EtcdTest;
using EtcdWatch = EtcdTest;
using EtcdCells = EtcdTest;

TEST_F(EtcdKv, PutRangeDeleteRoundTrip) {
  const std::string p = test_prefix();
  const std::string binary("v\0\xff\n\"{", 6);
  Result<int64_t> r1 = client_->put(p + "b", "two");
  ASSERT_TRUE(r1.ok()) << r1.message();
  Result<int64_t> r2 = client_->put(p + "a", binary);
  ASSERT_TRUE(r2.ok()) << r2.message();
  EXPECT_GT(*r2, *r1);
  ASSERT_TRUE(client_->put(p + "c/deeper", "three").ok());
  ASSERT_TRUE(client_->put(p.substr(0, p.size() - 1) + "X", "outside").ok());  // shares all but the last byte

  Result<RangeResult> r = client_->range_prefix(p);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(r->kvs.size(), 3u);
  EXPECT_EQ(r->kvs[0].key, p + "a");
  EXPECT_EQ(r->kvs[0].value, binary);
  EXPECT_EQ(r->kvs[0].mod_revision, *r2);
  EXPECT_EQ(r->kvs[0].lease, 0);
  EXPECT_EQ(r->kvs[1].key, p + "b");
  EXPECT_EQ(r->kvs[1].value, "two");
  EXPECT_EQ(r->kvs[2].key, p + "c/deeper");
  EXPECT_GE(r->revision, *r2);

  // Overwrite: a new mod revision, the same create revision.
  Result<int64_t> r3 = client_->put(p + "b", "two again");
  ASSERT_TRUE(r3.ok());
  Result<RangeResult> again = client_->range_prefix(p + "b");
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->kvs.size(), 1u);
  EXPECT_EQ(again->kvs[0].value, "two again");
  EXPECT_EQ(again->kvs[0].mod_revision, *r3);
  EXPECT_EQ(again->kvs[0].create_revision, *r1);

  ASSERT_TRUE(client_->delete_key(p + "a").ok());
  ASSERT_TRUE(client_->delete_key(p + "never-there").ok());
  Result<RangeResult> after = client_->range_prefix(p);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->kvs.size(), 2u);
  EXPECT_EQ(after->kvs[0].key, p + "b");

  Result<RangeResult> empty = client_->range_prefix(p + "nothing/");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->kvs.empty());
  EXPECT_GT(empty->revision, 0);
}

TEST_F(EtcdKv, ErrorsNameTheEndpoint) {
  const int port = EtcdProcess::free_port();
  EtcdClientOptions o;
  o.request_timeout = 500ms;
  Result<std::unique_ptr<EtcdClient>> c = EtcdClient::create(cat("etcd://127.0.0.1:", port), o);
  ASSERT_TRUE(c.ok());
  Result<int64_t> put = (*c)->put("/k", "v");
  ASSERT_FALSE(put.ok());
  EXPECT_NE(put.message().find(cat("etcd http://127.0.0.1:", port, ": kv/put: ")), std::string::npos) << put.message();
  std::atomic<bool> stop{false};
  Status w = (*c)->watch_prefix("/k", 0, [](const WatchEvent&) { return true; }, &stop);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.message().find(cat("etcd http://127.0.0.1:", port, ": watch: ")), std::string::npos) << w.message();
}

TEST_F(EtcdLease, GrantAndKeepAliveKeepTheKey) {
  const std::string key = test_prefix() + "k";
  Result<int64_t> lease = client_->grant_lease(2s);
  ASSERT_TRUE(lease.ok()) << lease.message();
  EXPECT_NE(*lease, 0);
  ASSERT_TRUE(client_->put(key, "v", *lease).ok());
  Result<RangeResult> r = client_->range_prefix(key);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].lease, *lease);
  // Renewed every 0.5 s for 3 s, longer than the TTL: the key stays.
  const auto start = Clock::now();
  while (Clock::now() - start < 3s) {
    Result<int64_t> ttl = client_->keep_alive_ttl(*lease);
    ASSERT_TRUE(ttl.ok()) << ttl.message();
    EXPECT_EQ(*ttl, 2);
    ASSERT_TRUE(client_->keep_alive(*lease).ok());
    ASSERT_TRUE(has_key(*client_, key)) << "gone after " << ms_since(start) << " ms";
    std::this_thread::sleep_for(500ms);
  }
  EXPECT_TRUE(client_->revoke(*lease).ok());
}

TEST_F(EtcdLease, MinimumTtlIsTwoSeconds) {
  // etcd raises a TTL below ceil(1.5 x election timeout) = 2 s (defaults) to that.
  Result<int64_t> lease = client_->grant_lease(1s);
  ASSERT_TRUE(lease.ok()) << lease.message();
  Result<int64_t> ttl = client_->keep_alive_ttl(*lease);
  ASSERT_TRUE(ttl.ok()) << ttl.message();
  EXPECT_EQ(*ttl, 2);
  EXPECT_TRUE(client_->revoke(*lease).ok());
}

TEST_F(EtcdLease, UnrenewedLeaseExpiresWithItsKey) {
  const std::string key = test_prefix() + "k";
  Result<int64_t> lease = client_->grant_lease(2s);
  ASSERT_TRUE(lease.ok()) << lease.message();
  const auto start = Clock::now();
  ASSERT_TRUE(client_->put(key, "v", *lease).ok());
  ASSERT_TRUE(has_key(*client_, key));
  ASSERT_TRUE(eventually([&] { return !has_key(*client_, key); }, 5s));
  const int64_t gone_ms = ms_since(start);
  // The TTL, plus up to the 0.5 s etcd takes between its looks for expired leases.
  EXPECT_GE(gone_ms, 1900);
  EXPECT_LE(gone_ms, 3200);
  std::printf("[ info ] lease of 2 s: key gone after %lld ms\n", static_cast<long long>(gone_ms));
  Result<int64_t> ttl = client_->keep_alive_ttl(*lease);
  ASSERT_TRUE(ttl.ok()) << ttl.message();
  EXPECT_EQ(*ttl, 0);
  Status s = client_->keep_alive(*lease);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not found"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(etcd_->endpoint()), std::string::npos) << s.message();
}

TEST_F(EtcdLease, RevokeRemovesTheKeyAtOnce) {
  const std::string key = test_prefix() + "k";
  Result<int64_t> lease = client_->grant_lease(30s);
  ASSERT_TRUE(lease.ok()) << lease.message();
  ASSERT_TRUE(client_->put(key, "v", *lease).ok());
  ASSERT_TRUE(has_key(*client_, key));
  ASSERT_TRUE(client_->revoke(*lease).ok());
  EXPECT_FALSE(has_key(*client_, key));  // no waiting: the revoke deleted it
  Status again = client_->revoke(*lease);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.message().find("lease/revoke"), std::string::npos) << again.message();
  EXPECT_NE(again.message().find("lease not found"), std::string::npos) << again.message();
  Result<int64_t> put = client_->put(key, "v", *lease);
  ASSERT_FALSE(put.ok());
  EXPECT_NE(put.message().find("lease not found"), std::string::npos) << put.message();
}

struct Recorded {
  WatchEvent::Type type;
  std::string key, value;
  int64_t revision;
};

TEST_F(EtcdWatch, SeesPutsAndDeletesInOrderAndStopsPromptly) {
  const std::string p = test_prefix();
  Result<RangeResult> start = client_->range_prefix(p);
  ASSERT_TRUE(start.ok());
  std::mutex mu;
  std::vector<Recorded> seen;
  std::atomic<bool> stop{false};
  Status watch_status;
  Clock::time_point returned;
  std::thread watcher([&] {
    watch_status = client_->watch_prefix(
        p, start->revision + 1,
        [&](const WatchEvent& e) {
          std::lock_guard<std::mutex> lock(mu);
          seen.push_back({e.type, e.key, e.value, e.mod_revision});
          return true;
        },
        &stop);
    returned = Clock::now();
  });
  std::this_thread::sleep_for(200ms);  // the watch exists (events before it would come from history anyway)
  std::vector<int64_t> revs;
  revs.push_back(*client_->put(p + "a", "1"));
  revs.push_back(*client_->put(p + "b", "2"));
  ASSERT_TRUE(client_->delete_key(p + "a").ok());
  revs.push_back(0);
  revs.push_back(*client_->put(p + "b", "3"));
  ASSERT_TRUE(client_->put("/elsewhere/" + p, "not ours").ok());
  ASSERT_TRUE(eventually([&] { std::lock_guard<std::mutex> lock(mu); return seen.size() >= 4; }, 3s));
  std::this_thread::sleep_for(300ms);  // no event comes for a while: the watch just waits
  const auto stop_at = Clock::now();
  stop = true;
  watcher.join();
  const int64_t stop_ms = std::chrono::duration_cast<std::chrono::milliseconds>(returned - stop_at).count();
  EXPECT_TRUE(watch_status.ok()) << watch_status.message();
  EXPECT_LE(stop_ms, 150) << "stop took " << stop_ms << " ms";
  std::printf("[ info ] watch stopped %lld ms after it was asked\n", static_cast<long long>(stop_ms));

  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0].type, WatchEvent::Type::kPut);
  EXPECT_EQ(seen[0].key, p + "a");
  EXPECT_EQ(seen[0].value, "1");
  EXPECT_EQ(seen[0].revision, revs[0]);
  EXPECT_EQ(seen[1].type, WatchEvent::Type::kPut);
  EXPECT_EQ(seen[1].key, p + "b");
  EXPECT_EQ(seen[1].value, "2");
  EXPECT_EQ(seen[2].type, WatchEvent::Type::kDelete);
  EXPECT_EQ(seen[2].key, p + "a");
  EXPECT_EQ(seen[2].value, "");
  EXPECT_EQ(seen[3].type, WatchEvent::Type::kPut);
  EXPECT_EQ(seen[3].value, "3");
  EXPECT_EQ(seen[3].revision, revs[3]);
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_GT(seen[i].revision, seen[i - 1].revision);

  // The same changes again from history: a watch from the first put's revision,
  // ended by its callback.
  std::vector<Recorded> replay;
  Status s = client_->watch_prefix(
      p, revs[0],
      [&](const WatchEvent& e) {
        replay.push_back({e.type, e.key, e.value, e.mod_revision});
        return replay.size() < 4;
      },
      nullptr);
  EXPECT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(replay.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(replay[i].type, seen[i].type);
    EXPECT_EQ(replay[i].key, seen[i].key);
    EXPECT_EQ(replay[i].revision, seen[i].revision);
  }
}

TEST_F(EtcdWatch, CompactedStartRevisionIsAnError) {
  const std::string p = test_prefix();
  const int64_t first = *client_->put(p + "a", "1");
  const int64_t second = *client_->put(p + "a", "2");
  // Compaction is not part of EtcdClient; the gateway's endpoint directly.
  Result<std::unique_ptr<client::HttpClient>> http = client::HttpClient::create(etcd_->endpoint());
  ASSERT_TRUE(http.ok());
  Result<client::Response> c = (*http)->request("POST", "/v3/kv/compaction", cat(R"({"revision":")", second, R"("})"));
  ASSERT_TRUE(c.ok()) << c.message();
  ASSERT_EQ(c->status, 200) << c->body;
  std::atomic<bool> stop{false};
  const auto start = Clock::now();
  Status s = client_->watch_prefix(p, first, [](const WatchEvent&) { return true; }, &stop);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("compacted"), std::string::npos) << s.message();
  EXPECT_LT(ms_since(start), 2000);
}

TEST_F(EtcdCells, WatcherSeesTwoRegistrations) {
  const std::string p = test_prefix();
  // Declared before the watcher, so they outlive its thread (its callback writes them).
  std::mutex mu;
  std::vector<std::vector<std::string>> sets;
  Result<std::unique_ptr<CellWatcher>> w = CellWatcher::start(etcd_->endpoint(), watcher_options(p));
  ASSERT_TRUE(w.ok()) << w.message();
  ASSERT_TRUE((*w)->wait_synced(3s)) << (*w)->last_error();
  (*w)->on_change([&](const std::vector<DiscoveredCell>& cells) {
    std::lock_guard<std::mutex> lock(mu);
    sets.push_back(ids_of(cells));
  });
  Result<std::unique_ptr<CellRegistration>> a =
      CellRegistration::start(etcd_->endpoint(), "cell-a", "http://127.0.0.1:9001", registration_options(p));
  ASSERT_TRUE(a.ok()) << a.message();
  Result<std::unique_ptr<CellRegistration>> b =
      CellRegistration::start(etcd_->endpoint(), "cell-b", "http://127.0.0.1:9002", registration_options(p));
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_EQ((*a)->key(), p + "cell-a");
  ASSERT_TRUE(eventually([&] { return (*w)->cells().size() == 2; }, 2s)) << log_.all();
  const std::vector<DiscoveredCell> cells = (*w)->cells();
  EXPECT_EQ(cells[0].id, "cell-a");
  EXPECT_EQ(cells[0].url, "http://127.0.0.1:9001");
  EXPECT_EQ(cells[1].id, "cell-b");
  EXPECT_EQ(cells[1].url, "http://127.0.0.1:9002");
  EXPECT_GT(cells[1].mod_revision, cells[0].mod_revision);

  // The value is the documented JSON.
  Result<RangeResult> r = client_->range_prefix(p + "cell-a");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].value, R"({"url":"http://127.0.0.1:9001","id":"cell-a"})");
  EXPECT_EQ(r->kvs[0].lease, (*a)->lease());

  // on_change: the empty set it was set with, then one cell, then two (or both at once, when
  // etcd delivers the two puts in one watch message, as it may on a busy machine).
  (*w)->stop();  // no callback after this (the registrations' revokes come as they go)
  std::lock_guard<std::mutex> lock(mu);
  std::string seen;
  for (const auto& s : sets) {
    seen += "[";
    for (const std::string& id : s) seen += id + " ";
    seen += "] ";
  }
  ASSERT_GE(sets.size(), 2u) << seen;
  ASSERT_LE(sets.size(), 3u) << seen;
  EXPECT_TRUE(sets.front().empty());
  if (sets.size() == 3) {
    EXPECT_EQ(sets[1], std::vector<std::string>({"cell-a"}));
  }
  EXPECT_EQ(sets.back(), std::vector<std::string>({"cell-a", "cell-b"}));
}

TEST_F(EtcdCells, StoppedRegistrationLeavesWithinASecond) {
  const std::string p = test_prefix();
  Result<std::unique_ptr<CellRegistration>> a =
      CellRegistration::start(etcd_->endpoint(), "a", "http://127.0.0.1:9001", registration_options(p));
  Result<std::unique_ptr<CellRegistration>> b =
      CellRegistration::start(etcd_->endpoint(), "b", "http://127.0.0.1:9002", registration_options(p));
  ASSERT_TRUE(a.ok() && b.ok());
  Result<std::unique_ptr<CellWatcher>> w = CellWatcher::start(etcd_->endpoint(), watcher_options(p));
  ASSERT_TRUE(w.ok()) << w.message();
  ASSERT_TRUE(eventually([&] { return (*w)->cells().size() == 2; }, 2s)) << log_.all();
  const auto start = Clock::now();
  Status s = (*a)->stop();
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE((*a)->stop().ok());  // idempotent
  ASSERT_TRUE(eventually([&] { return ids_of((*w)->cells()) == std::vector<std::string>({"b"}); }, 1s)) << log_.all();
  std::printf("[ info ] stopped cell gone from the watcher after %lld ms\n", static_cast<long long>(ms_since(start)));
  EXPECT_FALSE(has_key(*client_, p + "a"));
  a->reset();  // the destructor after stop() does nothing more
  EXPECT_EQ(ids_of((*w)->cells()), std::vector<std::string>({"b"}));
}

TEST_F(EtcdCells, AbandonedRegistrationLeavesAfterTheTtl) {
  const std::string p = test_prefix();
  Result<std::unique_ptr<CellRegistration>> a =
      CellRegistration::start(etcd_->endpoint(), "a", "http://127.0.0.1:9001", registration_options(p));
  ASSERT_TRUE(a.ok()) << a.message();
  Result<std::unique_ptr<CellWatcher>> w = CellWatcher::start(etcd_->endpoint(), watcher_options(p));
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(eventually([&] { return (*w)->cells().size() == 1; }, 2s)) << log_.all();
  std::this_thread::sleep_for(1500ms);  // past the TTL of the first lease: renewals keep it
  ASSERT_EQ((*w)->cells().size(), 1u);
  const auto start = Clock::now();
  (*a)->abandon();  // a crash: no more renewals, no revoke
  std::this_thread::sleep_for(1000ms);
  EXPECT_EQ((*w)->cells().size(), 1u) << "gone before the TTL";
  ASSERT_TRUE(eventually([&] { return (*w)->cells().empty(); }, 3s)) << log_.all();
  const int64_t gone_ms = ms_since(start);
  std::printf("[ info ] abandoned cell gone after %lld ms (TTL 2 s, last renewal up to 0.67 s before)\n",
              static_cast<long long>(gone_ms));
  EXPECT_LE(gone_ms, 3000);
}

TEST_F(EtcdCells, TwoWatchersSeeTheSameSet) {
  const std::string p = test_prefix();
  Result<std::unique_ptr<CellWatcher>> w1 = CellWatcher::start(etcd_->endpoint(), watcher_options(p));
  ASSERT_TRUE(w1.ok());
  std::vector<std::unique_ptr<CellRegistration>> regs;
  for (const char* id : {"x", "y", "z"}) {
    Result<std::unique_ptr<CellRegistration>> r =
        CellRegistration::start(etcd_->endpoint(), id, cat("http://127.0.0.1:1000/", id), registration_options(p));
    ASSERT_TRUE(r.ok()) << r.message();
    regs.push_back(std::move(r).value());
  }
  // The second one starts after the registrations: it reads them, the first one watched them come.
  Result<std::unique_ptr<CellWatcher>> w2 = CellWatcher::start(etcd_->endpoint(), watcher_options(p));
  ASSERT_TRUE(w2.ok());
  ASSERT_TRUE(eventually([&] { return (*w1)->cells().size() == 3 && (*w2)->cells().size() == 3; }, 2s)) << log_.all();
  EXPECT_EQ((*w1)->cells(), (*w2)->cells());
  ASSERT_TRUE(regs[1]->stop().ok());
  ASSERT_TRUE(eventually([&] { return (*w1)->cells().size() == 2 && (*w2)->cells().size() == 2; }, 1s)) << log_.all();
  EXPECT_EQ((*w1)->cells(), (*w2)->cells());
  EXPECT_EQ(ids_of((*w1)->cells()), std::vector<std::string>({"x", "z"}));
}

TEST_F(EtcdCells, LostLeaseIsGrantedAgainAndDeletedKeyPutBack) {
  const std::string p = test_prefix();
  Result<std::unique_ptr<CellRegistration>> a =
      CellRegistration::start(etcd_->endpoint(), "a", "http://127.0.0.1:9001", registration_options(p));
  ASSERT_TRUE(a.ok()) << a.message();
  Result<std::unique_ptr<CellWatcher>> w = CellWatcher::start(etcd_->endpoint(), watcher_options(p));
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(eventually([&] { return (*w)->cells().size() == 1; }, 2s));

  // The lease vanishes under the registration (as when etcd lost it): the next renewal finds out.
  const int64_t first_lease = (*a)->lease();
  ASSERT_TRUE(client_->revoke(first_lease).ok());
  ASSERT_TRUE(eventually([&] { return (*a)->reregistrations() == 1; }, 2s)) << log_.all();
  EXPECT_NE((*a)->lease(), first_lease);
  ASSERT_TRUE(eventually([&] { return (*w)->cells().size() == 1; }, 1s)) << log_.all();
  EXPECT_TRUE(has_key(*client_, p + "a"));

  // The key deleted while its lease lives: put back within verify_every renewals (3 x 0.67 s).
  ASSERT_TRUE(client_->delete_key(p + "a").ok());
  ASSERT_TRUE(eventually([&] { return (*w)->cells().empty(); }, 1s));
  ASSERT_TRUE(eventually([&] { return (*w)->cells().size() == 1; }, 3s)) << log_.all();
  // The registration counts the put after etcd has answered it, so the watcher can see the key
  // first (it did under ASan): wait for the count, then check it is exactly the second.
  EXPECT_TRUE(eventually([&] { return (*a)->reregistrations() >= 2; }, 1s)) << log_.all();
  EXPECT_EQ((*a)->reregistrations(), 2u);
}

TEST_F(EtcdCells, RegistrationRefusesBadInput) {
  EXPECT_FALSE(CellRegistration::start(etcd_->endpoint(), "a/b", "http://127.0.0.1:1").ok());
  EXPECT_FALSE(CellRegistration::start(etcd_->endpoint(), "a", "").ok());
  EXPECT_FALSE(CellRegistration::start("https://127.0.0.1:1", "a", "http://127.0.0.1:1").ok());
  CellRegistrationOptions o;
  o.etcd.request_timeout = 500ms;
  Result<std::unique_ptr<CellRegistration>> down =
      CellRegistration::start(cat("etcd://127.0.0.1:", EtcdProcess::free_port()), "a", "http://127.0.0.1:1", o);
  ASSERT_FALSE(down.ok());
  EXPECT_NE(down.message().find("lease/grant"), std::string::npos) << down.message();
}

// Its own etcd: killed (SIGKILL) and started again on the same data dir and port.
TEST(EtcdRestart, RegistrationAndWatcherSurviveAnEtcdRestart) {
  if (!EtcdProcess::available()) GTEST_SKIP() << "no etcd at " << EtcdProcess::binary();
  EtcdProcess etcd;
  ASSERT_TRUE(etcd.ok()) << etcd.log();
  LogLines log;
  CellRegistrationOptions ro;
  ro.log = log.sink();
  Result<std::unique_ptr<CellRegistration>> a =
      CellRegistration::start("etcd://127.0.0.1:" + std::to_string(etcd.port()), "a", "http://127.0.0.1:9001", ro);
  ASSERT_TRUE(a.ok()) << a.message();
  CellWatcherOptions wo;
  wo.log = log.sink();
  Result<std::unique_ptr<CellWatcher>> w = CellWatcher::start(etcd.endpoint(), wo);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(eventually([&] { return (*w)->cells().size() == 1; }, 2s)) << log.all();
  ASSERT_EQ((*w)->resyncs(), 1u);

  etcd.kill();
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ((*w)->cells().size(), 1u) << "the watcher keeps the last set while etcd is away";
  const auto restart = Clock::now();
  ASSERT_TRUE(etcd.restart()) << etcd.log();
  const int64_t up_ms = ms_since(restart);

  // The watcher reads the set again and watches anew; the registration is renewed (or made again).
  ASSERT_TRUE(eventually([&] { return (*w)->resyncs() >= 2 && (*w)->last_error().empty(); }, 5s)) << log.all();
  std::printf("[ info ] etcd back after %lld ms, watcher re-read after %lld ms\n", static_cast<long long>(up_ms),
              static_cast<long long>(ms_since(restart)));
  Result<std::unique_ptr<EtcdClient>> c = EtcdClient::create(etcd.endpoint());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(eventually([&] { return has_key(**c, "/tokenhive/cells/a"); }, 3s)) << log.all();
  EXPECT_EQ(ids_of((*w)->cells()), std::vector<std::string>({"a"}));
  ASSERT_TRUE(eventually([&] { return (*c)->keep_alive((*a)->lease()).ok(); }, 3s)) << log.all();
  // The key outlives a TTL after the restart: the registration renews it.
  std::this_thread::sleep_for(2500ms);
  EXPECT_TRUE(has_key(**c, "/tokenhive/cells/a")) << log.all();

  // And the new watch sees what happens after the restart.
  Result<std::unique_ptr<CellRegistration>> b =
      CellRegistration::start(etcd.endpoint(), "b", "http://127.0.0.1:9002", ro);
  ASSERT_TRUE(b.ok()) << b.message();
  ASSERT_TRUE(eventually([&] { return (*w)->cells().size() == 2; }, 2s)) << log.all();
  ASSERT_TRUE((*a)->stop().ok());
  ASSERT_TRUE(eventually([&] { return ids_of((*w)->cells()) == std::vector<std::string>({"b"}); }, 1s)) << log.all();
}

}  // namespace
}  // namespace th::cluster
