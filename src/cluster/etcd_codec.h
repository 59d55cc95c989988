// The encoding etcd's v3 JSON gateway (grpc-gateway, served at /v3/ on the
// client URL) speaks, separate from the transport so it can be tested without
// a server:
//
// - keys and values are `bytes` in the protobufs, so base64 (RFC 4648, with
//   padding) in JSON;
// - int64/uint64 fields (revisions, lease IDs, TTLs, counts) are JSON strings
//   ("revision":"12"); fields at their zero value are left out altogether
//   (a PUT event has no "type", a lease that is gone no "TTL");
// - a prefix is the range [prefix, prefix_range_end(prefix));
// - a watch answers with one JSON object per line, `{"result":{...}}` (or
//   `{"error":{...}}` when the stream fails), checked against etcd 3.4.23:
//
//     {"result":{"header":{"revision":"7",...},"created":true}}
//     {"result":{"header":{...},"events":[{"kv":{"key":"L2Evd3gx","mod_revision":"6","value":"djE=",...}},
//                                         {"type":"DELETE","kv":{"key":"L2Evd3gx","mod_revision":"7"}}]}}
//     {"result":{"header":{...},"canceled":true,"compact_revision":"5"}}
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/status.h"

namespace th::cluster {

/// @brief Standard base64 with padding (what Go's encoding/json uses for []byte).
std::string base64_encode(std::string_view bytes);
/// @brief Decodes standard base64; padding is optional, whitespace and any
/// other character outside the alphabet is an error.
Result<std::string> base64_decode(std::string_view text);

/// @brief The range_end that makes [prefix, range_end) every key starting
/// with `prefix`: the prefix with its last byte below 0xff incremented and
/// the bytes after it dropped; "\0" (every key) when there is none.
std::string prefix_range_end(std::string_view prefix);

/// @brief An int64 field of a gateway answer: a JSON string of decimal digits
/// (or, leniently, a JSON integer); 0 when the field is absent or null.
Result<int64_t> json_int64(const nlohmann::json& object, std::string_view field);

/// @brief One change seen by a watch.
struct WatchEvent {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  std::string key;
  std::string value;         // empty for a delete
  int64_t mod_revision = 0;  // the revision of the change
};

/// @brief One message of a watch stream, decoded.
struct WatchMessage {
  int64_t header_revision = 0;  // the store's revision when the message was sent
  bool created = false;         // the answer to the create request
  bool canceled = false;        // the server ended the watch (see compact_revision, cancel_reason)
  int64_t compact_revision = 0; // > 0: the start revision was compacted away
  std::string cancel_reason;
  std::vector<WatchEvent> events;
};

/// @brief Decodes one line of a watch stream. An `{"error":...}` line, a line
/// that is not JSON, and a malformed field are errors (the message says which).
Result<WatchMessage> parse_watch_message(std::string_view line);

/// @brief The message of a gateway error body (`{"error":"...","message":"...","code":N}`
/// or the same inside `{"error":{...}}` on a stream), or the body itself, cut
/// to 200 bytes, when it is not one.
std::string gateway_error_text(std::string_view body);

}  // namespace th::cluster
