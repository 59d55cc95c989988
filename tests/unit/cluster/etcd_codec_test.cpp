// The etcd gateway's encoding without a server: base64, prefix ranges, int64
// strings, watch messages as etcd 3.4.23 sent them, cell ids and values.
#include "cluster/etcd_codec.h"

#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "cluster/cell_registry.h"
#include "cluster/etcd_client.h"

namespace th::cluster {
namespace {

TEST(EtcdCodec, Base64Rfc4648Vectors) {
  // RFC 4648 section 10.
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foob"), "Zm9vYg==");
  EXPECT_EQ(base64_encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  for (const char* s : {"", "f", "fo", "foo", "foob", "fooba", "foobar"}) {
    Result<std::string> d = base64_decode(base64_encode(s));
    ASSERT_TRUE(d.ok()) << d.message();
    EXPECT_EQ(*d, s);
  }
}

TEST(EtcdCodec, Base64RoundTripsEveryByte) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += char(i);
  for (size_t n = 0; n <= all.size(); n += 37) {
    const std::string s = all.substr(0, n);
    Result<std::string> d = base64_decode(base64_encode(s));
    ASSERT_TRUE(d.ok()) << d.message();
    EXPECT_EQ(*d, s);
  }
  EXPECT_EQ(base64_encode("/tokenhive/cells/"), "L3Rva2VuaGl2ZS9jZWxscy8=");
  EXPECT_EQ(base64_encode(std::string("\xff\xfe", 2)), "//4=");
}

TEST(EtcdCodec, Base64RefusesWhatGoRefuses) {
  EXPECT_FALSE(base64_decode("Zm9v!").ok());
  EXPECT_FALSE(base64_decode("Zm9 v").ok());
  EXPECT_FALSE(base64_decode("Z").ok());      // a lone character is no byte
  EXPECT_FALSE(base64_decode("Zh==").ok());   // nonzero bits after the last byte
  EXPECT_FALSE(base64_decode("Zm8==").ok());  // padding past a multiple of 4
  Result<std::string> unpadded = base64_decode("Zm8");
  ASSERT_TRUE(unpadded.ok());
  EXPECT_EQ(*unpadded, "fo");
}

TEST(EtcdCodec, PrefixRangeEnd) {
  EXPECT_EQ(prefix_range_end("/a/"), "/a0");
  EXPECT_EQ(prefix_range_end("a"), "b");
  EXPECT_EQ(prefix_range_end(std::string("a\xff", 2)), "b");
  EXPECT_EQ(prefix_range_end(std::string("\xff\xff", 2)), std::string(1, '\0'));
  EXPECT_EQ(prefix_range_end(""), std::string(1, '\0'));
}

TEST(EtcdCodec, Int64FieldsAreStrings) {
  const nlohmann::json j = nlohmann::json::parse(R"({"a":"12","b":7,"c":"-3","d":"x1","e":"","f":null,"g":1.5})");
  EXPECT_EQ(*json_int64(j, "a"), 12);
  EXPECT_EQ(*json_int64(j, "b"), 7);
  EXPECT_EQ(*json_int64(j, "c"), -3);
  EXPECT_FALSE(json_int64(j, "d").ok());
  EXPECT_FALSE(json_int64(j, "e").ok());
  EXPECT_EQ(*json_int64(j, "f"), 0);
  EXPECT_FALSE(json_int64(j, "g").ok());
  EXPECT_EQ(*json_int64(j, "absent"), 0);  // zero values are left out by the gateway
  EXPECT_EQ(*json_int64(nlohmann::json::parse(R"({"ID":"4111120354931956998"})"), "ID"), 4111120354931956998);
}

TEST(EtcdCodec, WatchMessagesAsEtcdSendsThem) {
  // Lines captured from etcd 3.4.23's /v3/watch.
  Result<WatchMessage> created = parse_watch_message(
      R"({"result":{"header":{"cluster_id":"15118495548433857066","member_id":"13668033151171901709","revision":"7","raft_term":"2"},"created":true}})");
  ASSERT_TRUE(created.ok()) << created.message();
  EXPECT_TRUE(created->created);
  EXPECT_FALSE(created->canceled);
  EXPECT_EQ(created->header_revision, 7);
  EXPECT_TRUE(created->events.empty());

  Result<WatchMessage> events = parse_watch_message(
      R"({"result":{"header":{"cluster_id":"1","member_id":"2","revision":"7","raft_term":"2"},"events":[{"kv":{"key":"L2Evd3gx","create_revision":"6","mod_revision":"6","version":"1","value":"djE="}},{"type":"DELETE","kv":{"key":"L2Evd3gx","mod_revision":"7"}}]}})");
  ASSERT_TRUE(events.ok()) << events.message();
  ASSERT_EQ(events->events.size(), 2u);
  EXPECT_EQ(events->events[0].type, WatchEvent::Type::kPut);
  EXPECT_EQ(events->events[0].key, "/a/wx1");
  EXPECT_EQ(events->events[0].value, "v1");
  EXPECT_EQ(events->events[0].mod_revision, 6);
  EXPECT_EQ(events->events[1].type, WatchEvent::Type::kDelete);
  EXPECT_EQ(events->events[1].key, "/a/wx1");
  EXPECT_EQ(events->events[1].value, "");
  EXPECT_EQ(events->events[1].mod_revision, 7);

  Result<WatchMessage> compacted = parse_watch_message(
      R"({"result":{"header":{"cluster_id":"1","member_id":"2","raft_term":"3"},"canceled":true,"compact_revision":"5"}})");
  ASSERT_TRUE(compacted.ok()) << compacted.message();
  EXPECT_TRUE(compacted->canceled);
  EXPECT_EQ(compacted->compact_revision, 5);
  EXPECT_EQ(compacted->header_revision, 0);

  Result<WatchMessage> stream_error =
      parse_watch_message(R"({"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader","http_status":"Service Unavailable"}})");
  ASSERT_FALSE(stream_error.ok());
  EXPECT_NE(stream_error.message().find("no leader"), std::string::npos) << stream_error.message();

  EXPECT_FALSE(parse_watch_message("not json").ok());
  EXPECT_FALSE(parse_watch_message(R"({"result":{"events":[{"kv":{"key":"!!"}}]}})").ok());
  EXPECT_FALSE(parse_watch_message(R"({"result":{"events":[{"type":"MOVE","kv":{}}]}})").ok());
}

TEST(EtcdCodec, GatewayErrorText) {
  EXPECT_EQ(gateway_error_text(R"({"error":"etcdserver: requested lease not found","message":"etcdserver: requested lease not found","code":5})"),
            "etcdserver: requested lease not found (grpc code 5)");
  EXPECT_EQ(gateway_error_text("404 page not found\n"), "404 page not found");
  EXPECT_EQ(gateway_error_text(""), "(empty body)");
}

TEST(EtcdCodec, EndpointForms) {
  for (const char* ok : {"etcd://127.0.0.1:2379", "http://127.0.0.1:2379", "ETCD://localhost:2379/", "etcd://[::1]:2379"}) {
    Result<std::unique_ptr<EtcdClient>> c = EtcdClient::create(ok);
    ASSERT_TRUE(c.ok()) << ok << ": " << c.message();
  }
  EXPECT_EQ((*EtcdClient::create("etcd://127.0.0.1:2379/"))->endpoint(), "http://127.0.0.1:2379");
  for (const char* bad : {"https://127.0.0.1:2379", "127.0.0.1:2379", "etcd://", "etcd://h:99999", "etcd://h:1/v3"}) {
    Result<std::unique_ptr<EtcdClient>> c = EtcdClient::create(bad);
    EXPECT_FALSE(c.ok()) << bad;
    if (!c.ok()) {
      EXPECT_NE(c.message().find("etcd endpoint"), std::string::npos) << c.message();
    }
  }
}

TEST(EtcdCodec, CellIdsAndValues) {
  EXPECT_TRUE(validate_cell_id("cell-0").ok());
  EXPECT_TRUE(validate_cell_id("host.example:8080_a").ok());
  EXPECT_FALSE(validate_cell_id("").ok());
  EXPECT_FALSE(validate_cell_id("a/b").ok());
  EXPECT_FALSE(validate_cell_id("a b").ok());
  EXPECT_FALSE(validate_cell_id(std::string(129, 'a')).ok());
  EXPECT_EQ(cell_value_json("c1", "http://127.0.0.1:8080"), R"({"url":"http://127.0.0.1:8080","id":"c1"})");
}

}  // namespace
}  // namespace th::cluster
