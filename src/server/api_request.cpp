#include "server/api_request.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "server/request_fields.h"

namespace th::server {
namespace {

using Json = nlohmann::ordered_json;

// Keys, messages and other text from the body go into error messages cut to
// this many bytes, so that a message stays short and one line.
constexpr size_t kMaxEchoBytes = 64;


/// @brief Builds the body's DOM from nlohmann's SAX events, with two guards
/// the stock DOM parser lacks: nesting deeper than `max_depth` stops the
/// parse before the deeper value exists (so a megabyte of '[' costs nothing),
/// and an object's duplicate keys are found through a hash index rather than
/// ordered_map's linear search (which is quadratic in an object's size). A
/// duplicate key keeps its first position and its last value, as Python's
/// json module (OpenAI's and vLLM's servers) does.
class DomBuilder {
 public:
  explicit DomBuilder(size_t max_depth) : max_depth_(max_depth) {}

  bool null() { return scalar(Json(nullptr)); }
  bool boolean(bool v) { return scalar(Json(v)); }
  bool number_integer(Json::number_integer_t v) { return scalar(Json(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return scalar(Json(v)); }
  bool number_float(Json::number_float_t v, const Json::string_t&) { return scalar(Json(v)); }
  bool string(Json::string_t& v) { return scalar(Json(std::move(v))); }
  bool binary(Json::binary_t&) { return false; }  // never produced by JSON text

  bool start_object(size_t) { return open(Json::object()); }
  bool start_array(size_t) { return open(Json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(Json::string_t& k) {
    frames_.back().key = std::move(k);
    frames_.back().key_pending = true;
    return true;
  }

  bool parse_error(size_t position, const std::string&, const nlohmann::detail::exception& ex) {
    error_ = http::ApiError{cat("invalid JSON at byte ", position, ": ", reason(ex)), "", path(), std::nullopt};
    return false;
  }

  Json& root() { return root_; }
  /// @brief Why the parse stopped: a syntax error or too deep a nesting.
  http::ApiError error() const {
    if (error_) return *error_;
    return http::ApiError{cat("invalid JSON: arrays and objects nested deeper than ", max_depth_, " levels"), "",
                    std::nullopt, std::nullopt};
  }

 private:
  struct Frame {
    explicit Frame(Json* v) : value(v) {}
    Json* value;
    std::string key;           // objects: the member being read
    bool key_pending = false;  // objects: `key` names a value not yet complete
    bool child_open = false;   // a nested array or object is being read
    // Objects with more than kLinearKeys members: key -> position.
    std::unique_ptr<std::unordered_map<std::string, size_t>> index;
  };
  static constexpr size_t kLinearKeys = 8;

  // Places `v` in the open container (or as the root); the stored value.
  Json* place(Json&& v) {
    if (frames_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& f = frames_.back();
    if (f.value->is_array()) {
      f.value->get_ref<Json::array_t&>().push_back(std::move(v));
      return &f.value->get_ref<Json::array_t&>().back();
    }
    auto& members = f.value->get_ref<Json::object_t&>();
    std::optional<size_t> at;
    if (f.index) {
      if (auto it = f.index->find(f.key); it != f.index->end()) at = it->second;
    } else {
      for (size_t i = 0; i < members.size(); ++i)
        if (members.begin()[i].first == f.key) at = i;
    }
    if (at) {
      Json& slot = members.begin()[*at].second;
      slot = std::move(v);
      return &slot;
    }
    if (f.index) f.index->emplace(f.key, members.size());
    members.emplace_back(f.key, std::move(v));
    if (!f.index && members.size() > kLinearKeys) {
      f.index = std::make_unique<std::unordered_map<std::string, size_t>>();
      for (size_t i = 0; i < members.size(); ++i) f.index->emplace(members.begin()[i].first, i);
    }
    return &members.back().second;
  }

  bool scalar(Json&& v) {
    place(std::move(v));
    if (!frames_.empty()) frames_.back().key_pending = false;
    return true;
  }

  bool open(Json&& container) {
    if (frames_.size() >= max_depth_) return false;
    Json* v = place(std::move(container));
    if (!frames_.empty()) frames_.back().child_open = true;
    frames_.emplace_back(v);
    return true;
  }

  bool close() {
    frames_.pop_back();
    if (!frames_.empty()) {
      frames_.back().child_open = false;
      frames_.back().key_pending = false;
    }
    return true;
  }

  // Where the parse stopped, as a param ("messages[2].content"); none at the top.
  std::optional<std::string> path() const {
    std::string p;
    for (const Frame& f : frames_) {
      if (f.value->is_array()) {
        const size_t n = f.value->size();
        p += cat('[', f.child_open ? n - 1 : n, ']');
      } else if (f.key_pending || f.child_open) {
        if (!p.empty()) p += '.';
        p += one_line(f.key);
      } else {
        break;
      }
      if (!f.child_open) break;
    }
    if (p.empty()) return std::nullopt;
    return p;
  }

  // nlohmann's message without its prefix ("[json.exception.parse_error.101]
  // parse error at line 1, column 7: ") and the raw bytes it quotes ("; last
  // read: '...'"), which may be invalid UTF-8 or span lines.
  static std::string reason(const nlohmann::detail::exception& ex) {
    if (ex.id == 406) return "number out of range (it overflows a double)";
    std::string s = ex.what();
    if (size_t at = s.find("syntax error"); at != std::string::npos) s.erase(0, at);
    if (size_t at = s.find("; last read: '"); at != std::string::npos) {
      size_t end = s.rfind("'; expected ");
      end = (end == std::string::npos || end < at) ? s.size() : end + 1;
      s.erase(at, end - at);
    }
    std::string out;
    for (char c : s) {
      const auto u = static_cast<unsigned char>(c);
      out += (u < 0x20 || u >= 0x7F) ? '?' : c;
    }
    return out;
  }

  size_t max_depth_;
  Json root_;
  std::vector<Frame> frames_;
  std::optional<http::ApiError> error_;
};

/// @brief "a string", "an integer", ...: what a value is, for messages.
std::string_view kind(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "an integer";
    case Json::value_t::number_float: return "a number with a fraction or exponent";
    case Json::value_t::string: return "a string";
    case Json::value_t::array: return "an array";
    case Json::value_t::object: return "an object";
    default: return "an unknown value";
  }
}

/// @brief ", got 1.5" / ", got a string": what was sent, for messages.
std::string got(const Json& v) {
  if (v.is_number() || v.is_boolean()) return ", got " + v.dump();
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (s.size() <= 32) return ", got \"" + one_line(s) + '"';
  }
  return cat(", got ", kind(v));
}

/// @brief "messages[3]": a param for an element (cheaper than cat(), which streams).
std::string indexed(std::string_view base, size_t i) {
  std::string s(base);
  s += '[';
  s += std::to_string(i);
  s += ']';
  return s;
}

std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

/// @brief The body's fields read one by one; the first problem is kept in
/// `error` and every reader returns false from then on.
class RequestReader {
 public:
  RequestReader(ApiEndpoint endpoint, Json& body, const ApiRequestLimits& limits)
      : endpoint_(endpoint), limits_(limits) {
    // One pass over the members: each field is then found in O(1), whatever
    // the body's size.
    for (auto& [k, v] : body.get_ref<Json::object_t&>()) fields_.emplace(k, &v);
  }

  std::optional<http::ApiError> error;

  bool fail(std::string param, std::string message) {
    error = http::ApiError{param + ' ' + message, "", std::move(param), std::nullopt};
    return false;
  }

  /// @brief The field, or null when it is absent or null (null means absent).
  Json* field(std::string_view name) {
    asked_.insert(name);
    auto it = fields_.find(name);
    if (it == fields_.end() || it->second->is_null()) return nullptr;
    return it->second;
  }

  // -- values (an array's element as well as a field) --

  bool int_value(const Json& v, const std::string& param, int64_t lo, int64_t hi, int64_t* out,
                 std::string_view allowed = {}) {
    // The message is built only on failure: this runs for every token id.
    auto bad = [&] {
      return fail(param, (allowed.empty() ? cat("must be an integer from ", lo, " to ", hi) : std::string(allowed)) + got(v));
    };
    if (!v.is_number_integer()) return bad();
    if (v.is_number_unsigned()) {
      const auto u = v.get<uint64_t>();
      if (hi < 0 || u > static_cast<uint64_t>(hi)) return bad();
      *out = static_cast<int64_t>(u);
    } else {
      *out = v.get<int64_t>();
    }
    if (*out < lo || *out > hi) return bad();
    return true;
  }

  // A number in [lo, hi], or (lo, hi] when lo_open; stored as float.
  bool number_value(const Json& v, const std::string& param, double lo, bool lo_open, double hi, float* out) {
    auto bad = [&] {
      return fail(param, (lo_open ? cat("must be a number greater than ", num(lo), " and at most ", num(hi))
                                  : cat("must be a number from ", num(lo), " to ", num(hi))) +
                             got(v));
    };
    if (!v.is_number()) return bad();
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < lo || x > hi || (lo_open && x <= lo)) return bad();
    *out = static_cast<float>(x);
    // A positive double too small for a float must not become the excluded bound.
    if (lo_open && *out <= static_cast<float>(lo)) return bad();
    return true;
  }

  // -- fields; absent or null leaves *out as it is --

  bool read_bool(std::string_view name, bool* out) {
    const Json* v = field(name);
    if (!v) return true;
    if (!v->is_boolean()) return fail(std::string(name), "must be true or false" + got(*v));
    *out = v->get<bool>();
    return true;
  }

  template <class Int>
  bool read_int(std::string_view name, int64_t lo, int64_t hi, Int* out, std::string_view allowed = {}) {
    const Json* v = field(name);
    if (!v) return true;
    int64_t x = 0;
    if (!int_value(*v, std::string(name), lo, hi, &x, allowed)) return false;
    *out = static_cast<Int>(x);
    return true;
  }

  bool read_number(std::string_view name, double lo, bool lo_open, double hi, float* out) {
    const Json* v = field(name);
    return !v || number_value(*v, std::string(name), lo, lo_open, hi, out);
  }

  bool read_string(std::string_view name, size_t max_bytes, std::string* out) {
    const Json* v = field(name);
    if (!v) return true;
    if (!v->is_string()) return fail(std::string(name), "must be a string" + got(*v));
    const auto& s = v->get_ref<const std::string&>();
    if (s.size() > max_bytes) return fail(std::string(name), cat("must be at most ", max_bytes, " bytes, got ", s.size()));
    *out = s;
    return true;
  }

  // -- the request --

  bool read(ApiRequest& r) {
    r.endpoint = endpoint_;
    r.return_token_ids = endpoint_ == ApiEndpoint::Generate;
    const bool chat = endpoint_ == ApiEndpoint::ChatCompletions;
    return read_model(r) && (chat ? read_messages(r) : read_prompt(r)) && read_max_tokens(r) &&
           read_sampling(r) && read_stops(r) && read_choices(r) && read_logprobs(r) && read_extensions(r) &&
           read_continuation(r) && read_unsupported(r) && read_extras(r);
  }

 private:
  // Optional everywhere, as vLLM and llama.cpp's server have it: absent or "" means the
  // served model (OpenAI requires it; its clients always send it).
  bool read_model(ApiRequest& r) { return read_string("model", limits_.max_model_bytes, &r.model); }

  // A list of token ids: non-empty, each in [0, 2^31).
  bool token_ids(const Json& list, const std::string& param, std::vector<int32_t>* out) {
    if (list.empty()) return fail(param, "must not be an empty list of token ids");
    out->reserve(list.size());
    for (size_t i = 0; i < list.size(); ++i) {
      const Json& t = list[i];
      if (t.is_number_unsigned() && t.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
        out->push_back(static_cast<int32_t>(t.get<uint64_t>()));
        continue;
      }
      int64_t unused = 0;  // only to produce the error
      return int_value(t, indexed(param, i), 0, std::numeric_limits<int32_t>::max(), &unused,
                       "must be a token id, an integer from 0 to 2147483647");
    }
    return true;
  }

  bool read_prompt(ApiRequest& r) {
    const bool one = endpoint_ == ApiEndpoint::Generate;
    const std::string_view forms = one ? "must be a string or an array of token ids (one prompt)"
                                       : "must be a string, an array of strings, an array of token ids or an "
                                         "array of arrays of token ids";
    const Json* p = field("prompt");
    if (!p) return fail("prompt", cat("is required: it ", forms));
    if (p->is_string()) {
      r.prompts.push_back(ApiPrompt{false, p->get<std::string>(), {}});
      return true;
    }
    if (!p->is_array()) return fail("prompt", cat(forms, got(*p)));
    if (p->empty()) return fail("prompt", cat("must not be an empty list: it ", forms));
    const Json& first = (*p)[0];
    if (first.is_number()) {
      ApiPrompt prompt{true, {}, {}};
      if (!token_ids(*p, "prompt", &prompt.tokens)) return false;
      r.prompts.push_back(std::move(prompt));
      return true;
    }
    if (one) return fail("prompt[0]", cat("must be a token id: /v1/generate takes one prompt, which ", forms));
    if (!first.is_string() && !first.is_array()) return fail("prompt[0]", cat("must be a string or an array of token ids", got(first)));
    if (p->size() > limits_.max_prompts)
      return fail("prompt", cat("must hold at most ", limits_.max_prompts, " prompts, got ", p->size()));
    r.prompts.reserve(p->size());
    for (size_t i = 0; i < p->size(); ++i) {
      const Json& e = (*p)[i];
      const std::string param = indexed("prompt", i);
      if (first.is_string()) {
        if (!e.is_string()) return fail(param, "must be a string, as every prompt of a list of strings" + got(e));
        r.prompts.push_back(ApiPrompt{false, e.get<std::string>(), {}});
      } else {
        if (!e.is_array())
          return fail(param, "must be an array of token ids, as every prompt of a list of token lists" + got(e));
        ApiPrompt prompt{true, {}, {}};
        if (!token_ids(e, param, &prompt.tokens)) return false;
        r.prompts.push_back(std::move(prompt));
      }
    }
    return true;
  }

  bool read_content(Json& content, const std::string& param) {
    if (content.is_null() || content.is_string()) return true;
    const std::string_view forms = "must be a string, null or an array of {\"type\": \"text\", \"text\": ...} parts";
    if (!content.is_array()) return fail(param, cat(forms, got(content)));
    std::string text;
    for (size_t j = 0; j < content.size(); ++j) {
      const Json& part = content[j];
      const std::string pp = indexed(param, j);
      if (!part.is_object()) return fail(pp, "must be an object {\"type\": \"text\", \"text\": ...}" + got(part));
      auto type = part.find("type");
      if (type == part.end() || !type->is_string())
        return fail(pp + ".type", "must be the string \"text\"" + (type == part.end() ? std::string(", got nothing") : got(*type)));
      if (*type != "text")
        return fail(pp + ".type", cat("\"", one_line(type->get_ref<const std::string&>()),
                                      "\" is not supported: only text parts are"));
      auto t = part.find("text");
      if (t == part.end() || !t->is_string())
        return fail(pp + ".text", "must be a string" + (t == part.end() ? std::string(", got nothing") : got(*t)));
      text += t->get_ref<const std::string&>();
    }
    content = std::move(text);
    return true;
  }

  bool read_messages(ApiRequest& r) {
    Json* m = field("messages");
    if (!m) return fail("messages", "is required: a non-empty array of {\"role\": ..., \"content\": ...} objects");
    if (!m->is_array()) return fail("messages", "must be an array of {\"role\": ..., \"content\": ...} objects" + got(*m));
    if (m->empty()) return fail("messages", "must not be empty");
    if (m->size() > limits_.max_messages)
      return fail("messages", cat("must hold at most ", limits_.max_messages, " messages, got ", m->size()));
    static constexpr std::string_view kRoles[] = {"system", "user", "assistant", "tool", "developer", "function"};
    for (size_t i = 0; i < m->size(); ++i) {
      Json& msg = (*m)[i];
      const std::string param = indexed("messages", i);
      if (!msg.is_object()) return fail(param, "must be an object {\"role\": ..., \"content\": ...}" + got(msg));
      auto role = msg.find("role");
      if (role == msg.end() || role->is_null())
        return fail(param + ".role", "is required: one of system, user, assistant, tool, developer, function");
      bool known = false;
      if (role->is_string())
        for (std::string_view k : kRoles) known = known || role->get_ref<const std::string&>() == k;
      if (!known) return fail(param + ".role", "must be one of system, user, assistant, tool, developer, function" + got(*role));
      if (auto content = msg.find("content"); content != msg.end())
        if (!read_content(*content, param + ".content")) return false;
    }
    r.messages = std::move(*m);
    return read_bool("add_generation_prompt", &r.add_generation_prompt);
  }

  bool read_max_tokens(ApiRequest& r) {
    if (!read_int("max_tokens", 1, limits_.max_tokens, &r.max_tokens)) return false;
    if (endpoint_ != ApiEndpoint::ChatCompletions) return true;
    int64_t alias = -1;
    if (!read_int("max_completion_tokens", 1, limits_.max_tokens, &alias)) return false;
    if (alias != -1 && r.max_tokens != -1 && alias != r.max_tokens)
      return fail("max_completion_tokens", cat("is ", alias, " but max_tokens is ", r.max_tokens,
                                               ": give one of them, or the same value"));
    if (alias != -1) r.max_tokens = alias;
    return true;
  }

  bool read_sampling(ApiRequest& r) {
    SamplingParams& s = r.sampling;
    if (!(read_number("temperature", 0, false, 2, &s.temperature) && read_number("top_p", 0, true, 1, &s.top_p) &&
          read_int("top_k", -1, std::numeric_limits<int32_t>::max(), &s.top_k,
                   "must be an integer: -1 or 0 (off), or at least 1") &&
          read_number("min_p", 0, false, 1, &s.min_p) &&
          read_number("presence_penalty", -2, false, 2, &s.presence_penalty) &&
          read_number("frequency_penalty", -2, false, 2, &s.frequency_penalty) &&
          read_number("repetition_penalty", 0, true, 2, &s.repeat_penalty)))
      return false;
    if (s.top_k < 0) s.top_k = 0;  // vLLM's -1 is our 0: off
    if (const Json* seed = field("seed")) {
      int64_t x = 0;
      if (!int_value(*seed, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), &x,
                     "must be an integer that fits in 64 signed bits"))
        return false;
      s.seed = static_cast<uint64_t>(x);
      r.seed_given = true;
    }
    return true;
  }

  bool read_stops(ApiRequest& r) {
    if (const Json* stop = field("stop")) {
      auto one = [&](const Json& v, const std::string& param) {
        if (!v.is_string()) return fail(param, "must be a string" + got(v));
        const auto& s = v.get_ref<const std::string&>();
        if (s.empty()) return fail(param, "must not be an empty string");
        if (s.size() > limits_.max_stop_bytes)
          return fail(param, cat("must be at most ", limits_.max_stop_bytes, " bytes, got ", s.size()));
        r.stop.push_back(s);
        return true;
      };
      if (stop->is_string()) {
        if (!one(*stop, "stop")) return false;
      } else if (stop->is_array()) {
        if (stop->size() > limits_.max_stop)
          return fail("stop", cat("must hold at most ", limits_.max_stop, " strings, got ", stop->size()));
        for (size_t i = 0; i < stop->size(); ++i)
          if (!one((*stop)[i], indexed("stop", i))) return false;
      } else {
        return fail("stop", "must be a string or an array of strings" + got(*stop));
      }
    }
    if (const Json* ids = field("stop_token_ids")) {
      if (!ids->is_array()) return fail("stop_token_ids", "must be an array of token ids" + got(*ids));
      if (ids->size() > limits_.max_stop_token_ids)
        return fail("stop_token_ids", cat("must hold at most ", limits_.max_stop_token_ids, " token ids, got ", ids->size()));
      for (size_t i = 0; i < ids->size(); ++i) {
        int64_t t = 0;
        if (!int_value((*ids)[i], indexed("stop_token_ids", i), 0, std::numeric_limits<int32_t>::max(), &t,
                       "must be a token id, an integer from 0 to 2147483647"))
          return false;
        r.stop_token_ids.push_back(static_cast<int32_t>(t));
      }
    }
    return true;
  }

  bool read_choices(ApiRequest& r) {
    if (!read_int("n", 1, limits_.max_n, &r.n) || !read_bool("stream", &r.stream)) return false;
    if (const Json* opts = field("stream_options")) {
      if (!opts->is_object()) return fail("stream_options", "must be an object {\"include_usage\": true|false}" + got(*opts));
      if (!r.stream) return fail("stream_options", "is only allowed when stream is true");
      if (auto u = opts->find("include_usage"); u != opts->end() && !u->is_null()) {
        if (!u->is_boolean()) return fail("stream_options.include_usage", "must be true or false" + got(*u));
        r.include_usage = u->get<bool>();
      }
    }
    return true;
  }

  bool read_logprobs(ApiRequest& r) {
    if (endpoint_ != ApiEndpoint::ChatCompletions)
      return read_int("logprobs", 0, limits_.max_logprobs, &r.logprobs) && read_bool("echo", &r.echo);
    bool logprobs = false;
    int32_t top = -1;
    if (!read_bool("logprobs", &logprobs) || !read_int("top_logprobs", 0, limits_.max_logprobs, &top)) return false;
    if (top >= 0 && !logprobs) return fail("top_logprobs", "needs \"logprobs\": true");
    r.logprobs = logprobs ? std::max(top, 0) : -1;
    return true;
  }

  bool read_extensions(ApiRequest& r) {
    if (!read_string("user", limits_.max_user_bytes, &r.user) || !read_bool("ignore_eos", &r.ignore_eos) ||
        !read_bool("return_token_ids", &r.return_token_ids))
      return false;
    if (!read_string("cache_salt", limits_.max_cache_salt_bytes, &r.cache_salt)) return false;
    if (field("cache_salt") && r.cache_salt.empty())
      return fail("cache_salt", "must not be empty (leave it out to share the cache with unsalted requests)");
    if (const Json* p = field("priority")) {
      r.priority_given = true;
      const std::string_view allowed = "must be \"high\", \"normal\", \"low\" or an integer that fits in 32 signed bits";
      if (p->is_string()) {
        std::optional<int32_t> named = priority_from_name(p->get_ref<const std::string&>());
        if (!named) return fail("priority", std::string(allowed) + got(*p));
        r.priority = *named;
      } else if (!read_int("priority", std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(),
                           &r.priority, allowed)) {
        return false;
      }
    }
    if (const Json* c = field("compute_type")) {
      const std::optional<ComputeType> t =
          c->is_string() ? parse_compute_type(c->get_ref<const std::string&>()) : std::nullopt;
      if (!t)
        return fail("compute_type",
                    "must be one of \"auto\", \"fp32\", \"fp16\", \"bf16\", \"fp8\", \"native\"" + got(*c));
      r.compute_type = *t;
    }
    return true;
  }

  bool read_continuation(ApiRequest& r) {
    const Json* v = field("continuation");
    if (!v) return true;
    constexpr std::string_view kShape = "must be an object {\"prompt_token_ids\": [...], \"token_ids\": [...], \"text_bytes\": n}";
    if (!v->is_object()) return fail("continuation", std::string(kShape) + got(*v));
    ApiContinuation c;
    auto member = [&](const char* name) -> const Json* {
      auto it = v->find(name);
      return it == v->end() || it->is_null() ? nullptr : &*it;
    };
    const Json* prompt = member("prompt_token_ids");
    if (!prompt) return fail("continuation.prompt_token_ids", "is required");
    if (!prompt->is_array()) return fail("continuation.prompt_token_ids", "must be an array of token ids" + got(*prompt));
    if (!token_ids(*prompt, "continuation.prompt_token_ids", &c.prompt_token_ids)) return false;
    if (const Json* ids = member("token_ids")) {
      if (!ids->is_array()) return fail("continuation.token_ids", "must be an array of token ids" + got(*ids));
      if (!ids->empty() && !token_ids(*ids, "continuation.token_ids", &c.token_ids)) return false;
    }
    if (const Json* t = member("text_bytes");
        t && !int_value(*t, "continuation.text_bytes", 0, std::numeric_limits<int32_t>::max(), &c.text_bytes))
      return false;
    if (r.n != 1) return fail("continuation", "needs n = 1");
    if (endpoint_ != ApiEndpoint::ChatCompletions && r.prompts.size() != 1) return fail("continuation", "needs exactly one prompt");
    if (!r.stream) return fail("continuation", "needs stream = true");
    if (!r.seed_given) return fail("continuation", "needs the seed the stream began with");
    if (r.echo) return fail("continuation", "cannot echo (the client has the prompt already)");
    r.continuation = std::move(c);
    return true;
  }

  // OpenAI's (and vLLM's) fields this server does not implement: asking for
  // what they do is a 400, never silently ignored; their "off" values pass.
  bool read_unsupported(ApiRequest& r) {
    if (const Json* v = field("logit_bias")) {
      if (!v->is_object()) return fail("logit_bias", "must be an object of token id -> bias" + got(*v));
      if (!v->empty()) return fail("logit_bias", "is not supported: send null or {}");
    }
    if (endpoint_ != ApiEndpoint::ChatCompletions) {
      if (const Json* v = field("suffix")) {
        if (!v->is_string()) return fail("suffix", "must be a string" + got(*v));
        if (!v->get_ref<const std::string&>().empty()) return fail("suffix", "is not supported: send null or \"\"");
      }
      int64_t best_of = r.n;
      if (!read_int("best_of", 1, std::numeric_limits<int32_t>::max(), &best_of)) return false;
      if (best_of != r.n)
        return fail("best_of", cat("is not supported except equal to n (", r.n,
                                   "): ranking several completions to return the best is not implemented"));
    }
    if (endpoint_ == ApiEndpoint::ChatCompletions) {
      if (auto e = read_tool_fields(field("tools"), field("tool_choice"), r.messages, &r.tools)) return error = e, false;
    } else if (const Json* t = field("tools"); t && !(t->is_array() && t->empty())) {
      return fail("tools", "is only for /v1/chat/completions");
    } else if (const Json* c = field("tool_choice"); c && !(c->is_string() && (*c == "none" || *c == "auto"))) {
      return fail("tool_choice", "is only for /v1/chat/completions");
    }
    // OpenAI's deprecated functions/function_call: tools and tool_choice replace them.
    if (const Json* v = field("functions"); v && !(v->is_array() && v->empty()))
      return fail("functions", "is not supported: use tools");
    if (const Json* v = field("function_call"); v && !(v->is_string() && (*v == "none" || *v == "auto")))
      return fail("function_call", "is not supported: use tool_choice");
    return true;
  }

  bool read_extras(ApiRequest& r) {
    if (std::optional<http::ApiError> e = read_request_extras(endpoint_, fields_, asked_, r, limits_)) error = std::move(e);
    return !error;
  }

  ApiEndpoint endpoint_;
  const ApiRequestLimits& limits_;
  RequestFields fields_;
  std::unordered_set<std::string_view> asked_;  // names looked up: any other field is refused
};

}  // namespace

std::string one_line(std::string_view s) {
  std::string out;
  size_t end = s.size();
  if (end > kMaxEchoBytes) {
    end = kMaxEchoBytes;
    while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
  }
  for (size_t i = 0; i < end; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    out += (c < 0x20 || c == 0x7F) ? '?' : static_cast<char>(c);
  }
  if (end < s.size()) out += "...";
  return out;
}

ApiParseResult parse_api_request(ApiEndpoint endpoint, std::string_view body, const ApiRequestLimits& limits) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos)
    return http::ApiError{"the request body is empty: send a JSON object", "", std::nullopt, std::nullopt};
  DomBuilder dom(limits.max_depth);
  if (!Json::sax_parse(body.begin(), body.end(), &dom)) return dom.error();
  if (!dom.root().is_object())
    return http::ApiError{cat("the request body must be a JSON object, got ", kind(dom.root())), "", std::nullopt,
                    std::nullopt};
  RequestReader reader(endpoint, dom.root(), limits);
  ApiRequest r;
  if (!reader.read(r)) return *reader.error;
  // Every range above is at least as strict as the sampler's; this only
  // guards against the two drifting apart.
  if (Status s = r.sampling.validate(); !s.ok()) return http::ApiError{s.message(), "", std::nullopt, std::nullopt};
  return r;
}

}  // namespace th::server
