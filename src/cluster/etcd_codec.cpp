#include "cluster/etcd_codec.h"

#include <charconv>

#include <nlohmann/json.hpp>

#include "cluster/bounded_json.h"

namespace th::cluster {

namespace {

using json = nlohmann::json;

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// A bytes field (base64 in a JSON string); "" when absent.
Result<std::string> json_bytes(const json& object, std::string_view field) {
  const auto it = object.find(field);
  if (it == object.end() || it->is_null()) return std::string();
  if (!it->is_string()) return Status::errorf("field ", field, " is not a string");
  Result<std::string> decoded = base64_decode(it->get_ref<const std::string&>());
  if (!decoded.ok()) return Status::errorf("field ", field, ": ", decoded.message());
  return decoded;
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = (uint32_t(uint8_t(bytes[i])) << 16) | (uint32_t(uint8_t(bytes[i + 1])) << 8) | uint8_t(bytes[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (const size_t left = bytes.size() - i; left > 0) {
    uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
    if (left == 2) v |= uint32_t(uint8_t(bytes[i + 1])) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += left == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

Result<std::string> base64_decode(std::string_view text) {
  size_t end = text.size();
  size_t pad = 0;
  while (end > 0 && text[end - 1] == '=' && pad < 2) {
    --end;
    ++pad;
  }
  if (pad > 0 && text.size() % 4 != 0) return Status::error("bad base64: wrong padding");
  if (end % 4 == 1) return Status::error("bad base64: truncated");
  std::string out;
  out.reserve(end / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < end; ++i) {
    const int v = base64_value(text[i]);
    if (v < 0) return Status::errorf("bad base64: unexpected character at offset ", i);
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += char((acc >> bits) & 0xff);
    }
  }
  // The bits left over must be zero (canonical encoding), as Go's decoder requires.
  if (bits > 0 && (acc & ((1u << bits) - 1)) != 0) return Status::error("bad base64: nonzero trailing bits");
  return out;
}

std::string prefix_range_end(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    if (uint8_t(end.back()) < 0xff) {
      end.back() = char(uint8_t(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

Result<int64_t> json_int64(const json& object, std::string_view field) {
  if (!object.is_object()) return Status::errorf("field ", field, ": not inside an object");
  const auto it = object.find(field);
  if (it == object.end() || it->is_null()) return int64_t{0};
  if (it->is_number_integer()) return it->get<int64_t>();
  if (!it->is_string()) return Status::errorf("field ", field, " is not an integer string");
  const std::string& s = it->get_ref<const std::string&>();
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || s.empty())
    return Status::errorf("field ", field, " is not an integer: \"", s.substr(0, 40), "\"");
  return v;
}

Result<WatchMessage> parse_watch_message(std::string_view line) {
  const Result<json> parsed = parse_json_bounded(line, kEtcdLimits);
  if (!parsed.ok() || !parsed->is_object()) return Status::errorf("watch: not a JSON object: ", line.substr(0, 200));
  const json& j = *parsed;
  if (j.contains("error")) return Status::errorf("watch: ", gateway_error_text(line));
  const auto res = j.find("result");
  if (res == j.end() || !res->is_object()) return Status::errorf("watch: no result in ", line.substr(0, 200));
  WatchMessage m;
  if (const auto h = res->find("header"); h != res->end() && h->is_object()) {
    TH_ASSIGN_OR_RETURN(m.header_revision, json_int64(*h, "revision"));
  }
  m.created = res->value("created", false);
  m.canceled = res->value("canceled", false);
  TH_ASSIGN_OR_RETURN(m.compact_revision, json_int64(*res, "compact_revision"));
  if (const auto r = res->find("cancel_reason"); r != res->end() && r->is_string()) m.cancel_reason = r->get<std::string>();
  if (const auto evs = res->find("events"); evs != res->end() && !evs->is_null()) {
    if (!evs->is_array()) return Status::error("watch: events is not an array");
    for (const json& e : *evs) {
      if (!e.is_object()) return Status::error("watch: an event is not an object");
      WatchEvent ev;
      const std::string type = e.value("type", std::string("PUT"));
      if (type == "PUT") {
        ev.type = WatchEvent::Type::kPut;
      } else if (type == "DELETE") {
        ev.type = WatchEvent::Type::kDelete;
      } else {
        return Status::errorf("watch: unknown event type ", type.substr(0, 40));
      }
      const auto kv = e.find("kv");
      if (kv == e.end() || !kv->is_object()) return Status::error("watch: an event without kv");
      TH_ASSIGN_OR_RETURN(ev.key, json_bytes(*kv, "key"));
      TH_ASSIGN_OR_RETURN(ev.value, json_bytes(*kv, "value"));
      TH_ASSIGN_OR_RETURN(ev.mod_revision, json_int64(*kv, "mod_revision"));
      m.events.push_back(std::move(ev));
    }
  }
  return m;
}

std::string gateway_error_text(std::string_view body) {
  const Result<json> parsed = parse_json_bounded(body, kEtcdLimits);
  if (parsed.ok() && parsed->is_object()) {
    const json& j = *parsed;
    const json* e = &j;
    if (const auto it = j.find("error"); it != j.end() && it->is_object()) e = &*it;
    for (const char* field : {"message", "error"}) {
      if (const auto it = e->find(field); it != e->end() && it->is_string() && !it->get_ref<const std::string&>().empty()) {
        std::string text = it->get<std::string>();
        if (const auto code = e->find("code"); code != e->end() && code->is_number_integer())
          text += cat(" (grpc code ", code->get<int64_t>(), ")");
        return text;
      }
    }
  }
  std::string text(body.substr(0, 200));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text.empty() ? std::string("(empty body)") : text;
}

}  // namespace th::cluster
