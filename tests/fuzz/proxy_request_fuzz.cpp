// libFuzzer target for the router's request and stream rewriting
// (cluster/proxy_request). The first byte picks the endpoint (mod 3:
// completions, chat, generate); the rest is split at 0xFF bytes into the
// request body, then the SSE payloads a cell sends. Whatever they hold, the
// router must not crash, and: what it sends on is a JSON object, without the
// token ids the client did not ask for, with the first chunk's id; the body it
// would resume with is a JSON object carrying the seed. Every part also goes
// through the router's other readers (bounded_json.h): a cell's whole answer,
// a heartbeat, an etcd watch line and error body. None may crash on any depth
// or width (#15: 100,000 levels of '[' once overflowed the stack), and what any
// of them accepts is within the limits it was read with.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/bounded_json.h"
#include "cluster/cell_load.h"
#include "cluster/etcd_codec.h"
#include "cluster/proxy_request.h"

namespace {

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "proxy_request_fuzz: %s\n", what);
  std::abort();
}

// The readers of what cells and etcd send, none of which may crash.
void read_as_everything(std::string_view part) {
  using namespace th::cluster;
  const bool within_answer = check_json_limits(part, kCellAnswerLimits).ok();
  if (check_cell_answer(200, part).ok() && !within_answer) die("a cell answer over the limits passed");
  if (check_cell_answer(999, part).ok()) die("status 999 passed");
  const bool within_control = check_json_limits(part, kControlLimits).ok();
  if (parse_cell_load(part).ok() && !within_control) die("a heartbeat over the limits was read");
  if (parse_json_bounded(part, kControlLimits).ok() && !within_control) die("parsed past the limits");
  (void)parse_watch_message(part);
  (void)gateway_error_text(part);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using th::cluster::ProxyEndpoint;
  if (size < 1) return 0;
  const auto endpoint = static_cast<ProxyEndpoint>(data[0] % 3);
  std::vector<std::string_view> parts;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  for (;;) {
    const size_t cut = rest.find('\xff');
    parts.push_back(rest.substr(0, cut));
    if (cut == std::string_view::npos) break;
    rest.remove_prefix(cut + 1);
  }
  for (std::string_view part : parts) read_as_everything(part);
  th::Result<th::cluster::ProxyRequest> q = th::cluster::inspect_request(endpoint, parts[0], 12345);
  if (!q.ok()) {
    if (th::cluster::check_json_limits(parts[0], th::cluster::kRequestBodyLimits).ok() &&
        nlohmann::ordered_json::accept(parts[0]) &&
        nlohmann::ordered_json::parse(parts[0], nullptr, false).is_object())
      die("a JSON object within the limits refused");
    return 0;
  }
  if (!q->body.is_object() || !q->body.contains("seed")) die("inspected body without a seed");
  if (q->movable && !q->stream) die("movable but not streamed");
  th::cluster::StreamSnapshot snap;
  for (size_t i = 1; i < parts.size(); ++i) {
    std::optional<std::string> out = th::cluster::rewrite_chunk(parts[i], *q, snap);
    if (!snap.invalid.empty()) {
      if (out) die("an invalid chunk was sent on");
      snap.invalid.clear();  // the proxy moves on to another cell
      continue;
    }
    if (!out) continue;
    const nlohmann::ordered_json j = nlohmann::ordered_json::parse(*out, nullptr, false);
    if (!j.is_object()) die("sent something that is not a JSON object");
    if (!q->wants_ids && j.contains("choices") && j["choices"].is_array())
      for (const auto& c : j["choices"])
        if (c.is_object() && (c.contains("token_ids") || c.contains("prompt_token_ids"))) die("ids the client did not ask for");
    if (j.contains("id") && !snap.id.is_null() && j["id"] != snap.id) die("id not kept");
    for (const auto& [index, c] : snap.choices)
      if (c.text_bytes < 0) die("negative text bytes");
  }
  const nlohmann::ordered_json again = nlohmann::ordered_json::parse(th::cluster::resume_body(*q, snap), nullptr, false);
  if (!again.is_object() || again["seed"] != q->body["seed"]) die("resume body lost the request");
  if (th::cluster::choice_count(*q) == 1 && !snap.choice(0).prompt_ids.empty() && !again.contains("continuation"))
    die("resume body without the continuation");
  for (const auto& [index, c] : snap.choices) {
    if (index < 0 || index >= th::cluster::choice_count(*q)) continue;
    const nlohmann::ordered_json one =
        nlohmann::ordered_json::parse(th::cluster::choice_resume_body(*q, snap, index), nullptr, false);
    if (!one.is_object() || (th::cluster::choice_count(*q) > 1 && one["n"] != 1)) die("a choice's body is not one choice");
  }
  if (std::optional<std::string> usage = th::cluster::usage_chunk(*q, snap))
    if (!nlohmann::ordered_json::parse(*usage, nullptr, false).is_object()) die("usage chunk not JSON");
  return 0;
}
