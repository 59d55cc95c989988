// The chat-template engine on small templates whose output is worked out by
// hand, its error paths (each a one-line message with a position), the limits
// that stop hostile templates, and chat_template_for's GGUF lookup/fallback.
// Byte-for-byte agreement with the reference renderer on real templates is
// tests/integration/chat_template_test.cpp.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <chrono>
#include <ctime>

#include "format/gguf.h"

namespace th {
namespace {

using ojson = nlohmann::ordered_json;  // keys in insertion order, as the templates see them

std::vector<ChatMessage> conversation() {
  return {{"system", " sys "}, {"user", "hi"}, {"assistant", "yo"}};
}

Result<std::string> render(const std::string& source, const ojson& extra = ojson::object(),
                           const ChatTemplateLimits* limits = nullptr) {
  TH_ASSIGN_OR_RETURN(ChatTemplate t, ChatTemplate::parse(source));
  if (limits) t.set_limits(*limits);
  return t.render(conversation(), true, "<s>", "</s>", extra);
}

struct Case {
  const char* what;
  const char* source;
  const char* want;
};

// Expected outputs derived by hand from Jinja2's rules and the reference
// renderer's conventions (true/false, lists and dicts printed as JSON).
const Case kCases[] = {
    {"text only", "Hello world!", "Hello world!"},
    {"variables", "{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt }}", "<s>|</s>|true"},
    {"undefined prints nothing and is falsy", "[{{ nope }}]{% if nope %}x{% else %}y{% endif %}", "[]y"},
    {"none prints nothing", "[{{ none }}]", "[]"},
    {"arithmetic", "{{ 1 + 2 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ 7 / 2 }}|{{ 2 ** 10 }}|{{ 1.5 + 1 }}|{{ 3.0 }}",
     "3|3|-4|1|3.5|1024|2.5|3.0"},
    {"concatenation", "{{ 'a' ~ 1 ~ 1.0 ~ true }}|{{ 'a' + 1 }}|{{ [1, 2] + [3] }}", "a11true|a1|[1, 2, 3]"},
    {"comparisons", "{{ 1 == 1.0 }}{{ 2 != 3 }}{{ 1 < 2 }}{{ 2 >= 3 }}{{ 'a' == 'a' }}", "truetruetruefalsetrue"},
    {"logic returns operands", "{{ 1 and 2 }}|{{ 0 or 'x' }}|{{ not 1 }}|{{ false or [] }}", "2|x|false|[]"},
    {"membership", "{{ 'ab' in 'cabd' }}{{ 1 in [1, 2] }}{{ 'k' in {'k': 1} }}{{ 3 not in [1] }}{{ 1 in nope }}",
     "truetruetruetruefalse"},
    {"if/elif/else", "{% if 1 == 2 %}a{% elif 2 == 2 %}b{% else %}c{% endif %}", "b"},
    {"ternary and select", "{{ 'y' if 1 else 'n' }}{{ 'y' if 0 else 'n' }}[{{ 'only' if false }}]", "yn[]"},
    {"for with loop fields", "{% for x in 'ab' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
     "102truefalse2;211falsetrue2;"},
    {"for/else", "{% for x in [] %}a{% else %}empty{% endfor %}", "empty"},
    {"for over a dict and items()", "{% for k in {'z': 1, 'y': 2} %}{{ k }}{% endfor %}{% for k, v in {'a': 1}.items() %}{{ k }}={{ v }}{% endfor %}",
     "zya=1"},
    {"for with a filter", "{% for x in range(10) if x is odd %}{{ x }}{% endfor %}", "13579"},
    {"break and continue", "{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}",
     "13"},
    {"range", "{{ range(3) }}{{ range(2, 11, 3) }}{{ range(5, 0, -2) }}", "[0, 1, 2][2, 5, 8][5, 3, 1]"},
    {"loop scope does not leak", "{% set x = 5 %}{% for i in [1] %}{% set x = 10 %}{{ x }}{% endfor %}{{ x }}", "105"},
    {"namespace", "{% set ns = namespace(a=1, b='x') %}{% for i in range(3) %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }}{{ ns.b }}",
     "4x"},
    {"tuple and block set", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t %}[{{ a }}]{% endset %}{{ t }}", "12[1]"},
    {"macros with defaults and keywords", "{% macro f(x, y='d') %}<{{ x }}|{{ y }}>{% endmacro %}{{ f(1) }}{{ f(1, 2) }}{{ f(x=5, y=6) }}",
     "<1|d><1|2><5|6>"},
    {"varargs and kwargs", "{% macro g() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ g(1, 2, a=3) }}", "[1, 2]{\"a\": 3}"},
    {"call block", "{% macro wrap(t) %}[{{ caller() }}:{{ t }}]{% endmacro %}{% call wrap('T') %}in{% endcall %}", "[in:T]"},
    {"filter block", "{% filter upper %}shout {{ 'this' }}{% endfilter %}", "SHOUT THIS"},
    {"string filters", "{{ '  a b  '|trim }}|{{ 'aBc'|upper }}{{ 'aBc'|lower }}|{{ 'hello world'|title }}|{{ 'hello World'|capitalize }}|{{ 'abc'|length }}",
     "a b|ABCabc|Hello World|Hello World|3"},
    {"list filters", "{{ [3, 1, 2]|sort }}{{ [1, 2, 3]|reverse }}{{ [1, 2]|first }}{{ [1, 2]|last }}{{ ['a', 'b']|join(', ') }}{{ [1, 1, 2]|unique }}",
     "[1, 2, 3][3, 2, 1]12a, b[1, 2]"},
    {"tojson", "{{ {'a': [1, 2.5, none, true, 'q\"'], 'b': {}}|tojson }}", "{\"a\": [1, 2.5, null, true, \"q\\\"\"], \"b\": {}}"},
    {"tojson indent", "{{ {'a': [1]}|tojson(indent=2) }}", "{\n  \"a\": [\n    1\n  ]\n}"},
    {"tojson ensure_ascii", "{{ '\\u00e9'|tojson(ensure_ascii=true) }}", "\"\\u00e9\""},
    {"default", "{{ nope|default('d') }}{{ ''|default('e') }}{{ ''|default('f', true) }}", "df"},
    {"int and float", "{{ '12'|int + 1 }}{{ 'x'|int }}{{ 'x'|int(-1) }}{{ '1.5'|float }}{{ 2.7|int }}", "130-11.52"},
    {"string methods", "{{ '  p  '.strip() }}|{{ 'a,b,,c'.split(',') }}|{{ 'abc'.startswith('ab') }}|{{ 'aaa'.replace('a', 'b', 2) }}",
     "p|[\"a\", \"b\", \"\", \"c\"]|true|bba"},
    {"split on whitespace", "{{ '  x y  z '.split() }}", "[\"x\", \"y\", \"z\"]"},
    {"slicing and indexing", "{{ 'hello'[1:3] }}{{ 'hello'[::-1] }}{{ 'hello'[-1] }}{{ [1, 2, 3, 4, 5][1::2] }}{{ [1, 2, 3][5] }}",
     "elolleho[2, 4]"},
    {"dict methods", "{% set d = {'a': 1, 'b': 2} %}{{ d.get('a') }}{{ d.get('z', 9) }}{{ d.keys() }}{{ d.items() }}{{ d.b }}",
     "19[\"a\", \"b\"][[\"a\", 1], [\"b\", 2]]2"},
    {"tests", "{{ nope is defined }}{{ nope is undefined }}{{ none is none }}{{ 'a' is string }}{{ 1 is number }}{{ {} is mapping }}{{ 2 is even }}{{ 'x' is not defined }}",
     "falsetruetruetruetruetruetruefalse"},
    {"tests with arguments", "{{ 6 is divisibleby 3 }}{{ 1 is equalto(1) }}{{ 2 is in [1, 2] }}", "truetruetrue"},
    {"selectattr/rejectattr/map", "{{ messages|selectattr('role', 'equalto', 'user')|list|length }}{{ messages|rejectattr('role', 'equalto', 'user')|map(attribute='content')|join(',') }}",
     "1 sys ,yo"},
    {"messages", "{{ messages[0].role }}|{{ messages[-1]['content'] }}|{{ messages|length }}|{{ messages[0].missing }}", "system|yo|3|"},
    {"whitespace control", "a  {%- if true -%}  b  {%- endif -%}  c{{- ' d ' -}}  e", "abc d e"},
    {"trim_blocks and lstrip_blocks", "x\n  {% if true %}\n  y\n  {% endif %}\nz\n", "x\n  y\nz"},
    {"comments", "a{# hidden #}b{#- trims -#}  c", "abc"},
    {"string escapes", "{{ 'a\\tb\\n' }}{{ \"it's\" }}{{ '\\x41\\u00e9' }}{{ 'ab' 'cd' }}", "a\tb\nit'sAéabcd"},
    {"printing values", "{{ [1, [2]] }}{{ {'k': 'v'} }}{{ true }}{{ 1.0 }}{{ 0.5 }}", "[1, [2]]{\"k\": \"v\"}true1.00.5"},
    {"raise_exception only when reached", "{{ 'fine' if true else raise_exception('no') }}{{ false and raise_exception('no') }}", "finefalse"},
    {"generation tags are dropped", "a{% generation %}b{% endgeneration %}c", "abc"},
};

TEST(ChatTemplateEngine, RendersAsWorkedOutByHand) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.what);
    Result<std::string> r = render(c.source);
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(*r, c.want);
  }
}

TEST(ChatTemplateEngine, ExtraContextKeepsKeyOrder) {
  const ojson extra = ojson::parse(R"({"tools": [{"name": "f", "z": 1, "a": 2.0}], "date_string": "1 Jan 2025"})");
  Result<std::string> r = render("{{ tools|tojson }}|{{ date_string }}", extra);
  ASSERT_TRUE(r.ok()) << r.message();
  // 2.0 is the integer 2, as JSON.parse gives it.
  EXPECT_EQ(*r, "[{\"name\": \"f\", \"z\": 1, \"a\": 2}]|1 Jan 2025");
}

TEST(ChatTemplateEngine, RenderJsonPassesToolCalls) {
  Result<ChatTemplate> t = ChatTemplate::parse(
      "{% for m in messages %}{{ m.role }}:{% if m.tool_calls %}{{ m.tool_calls[0].function.name }}"
      "{{ m.tool_calls[0].function.arguments|tojson }}{% else %}{{ m.content }}{% endif %};{% endfor %}");
  ASSERT_TRUE(t.ok()) << t.message();
  const ojson messages = ojson::parse(R"([{"role": "user", "content": "go"},
      {"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]}])");
  Result<std::string> r = t->render_json(messages, false, "", "");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(*r, "user:go;assistant:f{\"x\": 1};");
}

TEST(ChatTemplateEngine, ChatMlFallback) {
  Result<ChatTemplate> t = ChatTemplate::parse(ChatTemplate::chatml_source());
  ASSERT_TRUE(t.ok()) << t.message();
  Result<std::string> r = t->render({{"system", "S"}, {"user", "U"}}, true, "<s>", "</s>");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(*r, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
  r = t->render({{"user", "U"}}, false, "", "");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(*r, "<|im_start|>user\nU<|im_end|>\n");
}

// strftime_now against the C library's strftime (C locale: English month
// names) at the same minute; a render that straddles a minute is retried.
TEST(ChatTemplateEngine, StrftimeNowFormatsTheLocalTime) {
  const char* kFormat = "%Y-%m-%d %H:%M %b %B %% %q";
  auto now = [] {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    localtime_r(&t, &tm);
    char b[96];
    std::strftime(b, sizeof b, "%Y-%m-%d %H:%M %b %B %%", &tm);
    return std::string(b) + " %q";  // an unknown directive is kept as written
  };
  for (int attempt = 0; attempt < 3; ++attempt) {
    const std::string before = now();
    Result<std::string> got = render(std::string("{{ strftime_now('") + kFormat + "') }}");
    ASSERT_TRUE(got.ok()) << got.message();
    if (now() != before) continue;
    EXPECT_EQ(*got, before);
    return;
  }
  FAIL() << "the minute changed during each of 3 renders";
}

// --- errors --------------------------------------------------------------------

void expect_error(const std::string& source, const std::string& fragment, const ChatTemplateLimits* limits = nullptr) {
  SCOPED_TRACE(source.substr(0, 80));
  Result<std::string> r = render(source, ojson::object(), limits);
  ASSERT_FALSE(r.ok()) << "rendered: " << r.value().substr(0, 200);
  EXPECT_NE(r.message().find(fragment), std::string::npos) << r.message();
  EXPECT_EQ(r.message().find('\n'), std::string::npos) << "one line: " << r.message();
  EXPECT_EQ(r.message().rfind("chat template: ", 0), 0u) << r.message();
}

TEST(ChatTemplateErrors, SyntaxErrorsNameTheLineAndColumn) {
  expect_error("{% if x %}never closed", "line 1, column 1: unexpected end of template: '{% if %}' is not closed");
  expect_error("ok\n{% for m in messages %}\n{{ m }}", "line 2, column 1: unexpected end of template: '{% for %}' is not closed");
  expect_error("{{ x", "unexpected end of template");
  expect_error("a\n  {{ 'abc }}", "line 2, column 6: unterminated string literal");
  expect_error("{# open comment", "line 1, column 1: unterminated comment");
  expect_error("{{ 1 + }}", "line 1, column 8: expected an expression, got '}}'");
  expect_error("{% endif %}", "unknown statement '{% endif %}'");
  expect_error("{% frobnicate %}", "unknown statement '{% frobnicate %}'");
  expect_error("{{ 'a\\q' }}", "unknown escape '\\q'");
  expect_error("{{ a ! b }}", "unexpected character '!'");
  expect_error("{% macro f(a=1, b) %}{% endmacro %}", "a parameter without a default follows one with a default");
}

TEST(ChatTemplateErrors, RuntimeErrorsNameTheLineAndColumn) {
  expect_error("line one\n{{ x | nosuchfilter }}", "line 2, column 6: unknown filter 'nosuchfilter'");
  expect_error("{{ 1 | upper }}", "the filter 'upper' cannot be applied to an integer");
  expect_error("{{ x is nosuchtest }}", "unknown test 'nosuchtest'");
  expect_error("{{ nosuchfunction() }}", "'nosuchfunction' is undefined, not a function");
  expect_error("{{ 'a' * 2 }}", "unsupported operand types for '*': string and integer");
  expect_error("{{ missing + 1 }}", "'missing' is undefined");
  expect_error("{% for x in 5 %}{% endfor %}", "cannot loop over an integer");
  expect_error("{% break %}", "'{% break %}' outside a loop");
  expect_error("{% set x.y = 1 %}", "cannot set an attribute of an undefined value");
  expect_error("{% macro f() %}{% endmacro %}{{ f(1) }}", "macro 'f' takes at most 0 argument(s)");
}

TEST(ChatTemplateErrors, RaiseExceptionIsAnErrorWithItsMessage) {
  expect_error("{% if messages|length > 2 %}{{ raise_exception('Roles must alternate') }}{% endif %}",
               "line 1, column 32: the template raised an error: Roles must alternate");
  // Whatever the message holds, the error stays one line of valid UTF-8.
  expect_error("{{ raise_exception('two\\nlines\\x01 \xff') }}", "the template raised an error: two\\nlines\\x01 \\xff");
  expect_error("{{ 'x\n }}", "unterminated string literal");
}

// --- limits: hostile templates stop, quickly, with a clear error ----------------

TEST(ChatTemplateLimits, RecursionBomb) {
  expect_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "nests too deeply");
  expect_error("{% macro f() %}{% call f() %}{% endcall %}{% endmacro %}{{ f() }}", "nests too deeply");
}

TEST(ChatTemplateLimits, HugeLoop) {
  const auto t0 = std::chrono::steady_clock::now();
  expect_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "too much");
  expect_error("{% for i in range(1000000000) %}x{% endfor %}", "too");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
}

TEST(ChatTemplateLimits, OutputAndMemoryBombs) {
  expect_error("{% set s = namespace(v='ab') %}{% for i in range(100) %}{% set s.v = s.v ~ s.v %}{% endfor %}",
               "a string grew too long");
  ChatTemplateLimits small;
  small.max_output_bytes = 1000;
  expect_error("{% for i in range(1000) %}xx{% endfor %}", "the output grew too long", &small);
  small = ChatTemplateLimits();
  small.max_alloc_bytes = 1 << 20;
  expect_error("{% for i in range(100000) %}{% set x = [1, 2, 3, 4, 5, 6, 7, 8] %}{% endfor %}", "too much memory", &small);
}

TEST(ChatTemplateLimits, NestingBombs) {
  expect_error("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}", "expression nested too deeply");
  std::string chain = "{{ 1";
  for (int i = 0; i < 100000; ++i) chain += " + 1";
  expect_error(chain + " }}", "expression nested too deeply");
  std::string blocks;
  for (int i = 0; i < 10000; ++i) blocks += "{% if true %}";
  expect_error(blocks, "blocks nested too deeply");
  expect_error("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}",
               "nested too deeply");
  expect_error("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns|tojson }}", "nested too deeply (or it contains itself)");
}

TEST(ChatTemplateLimits, TooLargeTemplate) {
  Result<ChatTemplate> t = ChatTemplate::parse(std::string(2 << 20, 'x'));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.message().find("too large"), std::string::npos) << t.message();
}

// --- GGUF --------------------------------------------------------------------------

Result<ChatTemplate> from_gguf(const std::function<void(GgufWriter&)>& fill) {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  fill(w);
  const std::vector<uint8_t> bytes = w.to_bytes();
  TH_ASSIGN_OR_RETURN(GgufFile f, GgufFile::parse(bytes.data(), bytes.size(), "model.gguf"));
  return chat_template_for(f);
}

TEST(ChatTemplateGguf, UsesTheFilesTemplate) {
  Result<ChatTemplate> t = from_gguf([](GgufWriter& w) {
    w.add_string("tokenizer.chat_template", "{% for m in messages %}[{{ m.role }}]{% endfor %}");
  });
  ASSERT_TRUE(t.ok()) << t.message();
  Result<std::string> r = t->render({{"user", "x"}}, false, "", "");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(*r, "[user]");
}

TEST(ChatTemplateGguf, FallsBackToChatMl) {
  for (bool empty : {false, true}) {
    Result<ChatTemplate> t = from_gguf([&](GgufWriter& w) {
      if (empty) w.add_string("tokenizer.chat_template", "");
    });
    ASSERT_TRUE(t.ok()) << t.message();
    EXPECT_EQ(t->source(), ChatTemplate::chatml_source());
  }
}

TEST(ChatTemplateGguf, BadTemplateNamesTheFile) {
  Result<ChatTemplate> t = from_gguf([](GgufWriter& w) { w.add_string("tokenizer.chat_template", "{% if %}"); });
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.message().rfind("model.gguf: chat template: line 1", 0), 0u) << t.message();
  t = from_gguf([](GgufWriter& w) { w.add_u32("tokenizer.chat_template", 7); });
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.message().find("tokenizer.chat_template"), std::string::npos) << t.message();
}

}  // namespace
}  // namespace th
