// libFuzzer target: arbitrary bytes as a chat template, parsed, and when it
// parses, rendered against a small fixed conversation (with tools and a tool
// call, so that templates reach those paths). Besides memory errors, hangs and
// leaks (namespaces can form reference cycles), it checks that every refusal
// is one line naming the chat template, and that the limits hold.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tokenizer/chat_template.h"
#include "tokenizer/unicode.h"

namespace {

using json = nlohmann::ordered_json;

void check(bool ok, const char* what, const std::string& detail) {
  if (ok) return;
  std::fprintf(stderr, "chat_template_fuzz: %s: %s\n", what, detail.c_str());
  std::abort();
}

void check_error(const th::Status& s) {
  const std::string& m = s.message();
  check(m.find('\n') == std::string::npos, "multi-line error", m);
  check(m.rfind("chat template: ", 0) == 0, "error not naming the chat template", m);
  check(th::unicode::is_valid_utf8(m), "error message not valid UTF-8", m);
}

const json& messages() {
  static const json m = json::parse(R"([
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Hello ☃ {{ x }}"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "abcdefghi", "type": "function",
      "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
    {"role": "tool", "tool_call_id": "abcdefghi", "content": "3 degrees"},
    {"role": "assistant", "content": "  It is 3 degrees.  "},
    {"role": "user", "content": ""}])");
  return m;
}

const json& extra() {
  static const json e = json::parse(R"({"tools": [{"type": "function", "function": {"name": "get_weather",
    "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
    "date_string": "26 Jul 2024"})");
  return e;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  th::Result<th::ChatTemplate> t = th::ChatTemplate::parse(source);
  if (!t.ok()) {
    check_error(t.status());
    return 0;
  }
  // Tight limits: the fuzzer must finish every input in milliseconds.
  th::ChatTemplateLimits limits;
  limits.max_steps = 200'000;
  limits.max_output_bytes = 1 << 20;
  limits.max_alloc_bytes = 32 << 20;
  t->set_limits(limits);
  for (bool add_generation_prompt : {true, false}) {
    th::Result<std::string> r = t->render_json(messages(), add_generation_prompt, "<s>", "</s>", extra());
    if (!r.ok()) {
      check_error(r.status());
    } else {
      check(r->size() <= limits.max_output_bytes, "output over the limit", std::to_string(r->size()));
    }
  }
  return 0;
}
