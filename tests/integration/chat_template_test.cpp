// Our chat-template renderer against the reference renderer,
// @huggingface/jinja (what transformers.js and the Hugging Face Hub render
// with), run as a child process: tests/oracle/render_chat_template.mjs under
// node. Every real template in tests/data/chat_templates/ is rendered with a
// set of conversations by both, and the bytes must be identical, or both
// must refuse (a template's raise_exception, such as Llama 2's and Mistral's
// "roles must alternate"). Node and the npm package are installed by
// scripts/setup.sh; without them these tests fail, they do not skip.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "run_process.h"
#include "test_util.h"
#include "tokenizer/chat_template.h"

namespace th {
namespace {

using ojson = nlohmann::ordered_json;  // keys in insertion order, as the templates see them

std::string read_template(const std::string& file) {
  std::string s = test::slurp(test::source_path("tests/data/chat_templates/" + file));
  if (!s.empty() && s.back() == '\n') s.pop_back();  // the file's own newline (README.md)
  return s;
}

struct Rendered {
  bool ok = false;
  std::string text;  // the output, or the error message
};

// Renders all `cases` (objects as render_chat_template.mjs reads them) with
// the reference, in one node process.
std::vector<Rendered> reference(const ojson& cases) {
  const std::string pkg = test::source_path("node_modules/@huggingface/jinja/package.json");
  if (!std::filesystem::exists(pkg)) {
    ADD_FAILURE() << "the reference renderer is not installed (" << pkg << "): run scripts/setup.sh";
    return {};
  }
  const std::string in = ::testing::TempDir() + "/chat_cases_" + std::to_string(::getpid()) + ".json";
  {
    std::ofstream f(in, std::ios::binary);
    f << cases.dump();
  }
  test::ProcessResult r =
      test::run_process({"/usr/bin/env", "node", test::source_path("tests/oracle/render_chat_template.mjs")}, 120, in);
  std::filesystem::remove(in);
  if (r.exit_code == 127) {
    ADD_FAILURE() << "node is not installed: run scripts/setup.sh (" << r.err << ")";
    return {};
  }
  if (r.exit_code != 0) {
    ADD_FAILURE() << "the reference renderer failed (exit " << r.exit_code << "): " << r.err;
    return {};
  }
  std::vector<Rendered> out;
  for (const ojson& x : ojson::parse(r.out)) {
    Rendered d;
    d.ok = x.at("ok").get<bool>();
    d.text = d.ok ? x.at("output").get<std::string>() : x.at("error").get<std::string>();
    out.push_back(std::move(d));
  }
  if (out.size() != cases.size()) ADD_FAILURE() << "the reference returned " << out.size() << " results for " << cases.size();
  return out;
}

Rendered ours(const ojson& c) {
  Rendered d;
  Result<ChatTemplate> t = ChatTemplate::parse(c.at("template").get<std::string>());
  if (!t.ok()) {
    d.text = t.message();
    return d;
  }
  Result<std::string> r = t->render_json(c.at("messages"), c.at("add_generation_prompt").get<bool>(),
                                         c.at("bos_token").get<std::string>(), c.at("eos_token").get<std::string>(),
                                         c.contains("extra") ? c.at("extra") : ojson::object());
  d.ok = r.ok();
  d.text = r.ok() ? r.value() : r.message();
  return d;
}

struct Tally {
  int identical = 0, both_refuse = 0;
};

// Compares ours with the reference on every case; `names[i]` labels case i.
Tally compare_all(const ojson& cases, const std::vector<std::string>& names) {
  Tally t;
  const std::vector<Rendered> want = reference(cases);
  if (want.size() != cases.size()) return t;
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(names[i]);
    const Rendered got = ours(cases[i]);
    if (want[i].ok) {
      EXPECT_TRUE(got.ok) << "the reference renders, we refuse: " << got.text;
      if (got.ok) {
        EXPECT_EQ(got.text, want[i].text);
        t.identical += got.text == want[i].text;
      }
    } else {
      EXPECT_FALSE(got.ok) << "the reference refuses (" << want[i].text << "), we render: " << got.text;
      if (!got.ok) {
        ++t.both_refuse;
        // A template's own raise_exception: the same message.
        const std::string kRaised = "the template raised an error: ";
        const size_t at = got.text.find(kRaised);
        if (at != std::string::npos) {
          EXPECT_EQ(got.text.substr(at + kRaised.size()), want[i].text);
        }
      }
    }
  }
  return t;
}

ojson msg(const char* role, const char* content) { return ojson{{"role", role}, {"content", content}}; }

// The conversations every template is rendered with.
std::vector<std::pair<std::string, ojson>> conversations() {
  std::vector<std::pair<std::string, ojson>> c;
  c.emplace_back("system_user", ojson::array({msg("system", "You are a helpful assistant."), msg("user", "Hello!")}));
  c.emplace_back("multi_turn", ojson::array({msg("system", "Be brief."), msg("user", "Hi"),
                                            msg("assistant", " Hello! How can I help? "), msg("user", "What is 2+2?"),
                                            msg("assistant", "4"), msg("user", "Thanks")}));
  c.emplace_back("no_system", ojson::array({msg("user", "Hi"), msg("assistant", "Hello."), msg("user", "Bye")}));
  c.emplace_back("user_only", ojson::array({msg("user", "Just one message")}));
  c.emplace_back("unicode", ojson::array({msg("system", "Réponds en français 🇫🇷"),
                                         msg("user", "こんにちは 世界 — ½ ☃ 𝄞 \u00a0nbsp\u00a0"),
                                         msg("assistant", "مرحبا بالعالم 👋🏽"), msg("user", "e\u0301 combining")}));
  c.emplace_back("empty_content", ojson::array({msg("system", ""), msg("user", ""), msg("assistant", ""), msg("user", "")}));
  c.emplace_back("whitespace", ojson::array({msg("user", "  padded  "), msg("assistant", "\n\nline\n"), msg("user", "\ttab\t")}));
  c.emplace_back("ends_with_assistant", ojson::array({msg("user", "Q"), msg("assistant", "A")}));
  c.emplace_back("bad_alternation", ojson::array({msg("user", "one"), msg("user", "two")}));
  c.emplace_back("system_only", ojson::array({msg("system", "only system")}));
  c.emplace_back("template_like_text",
                 ojson::array({msg("user", "{{ not a tag }} {% if %} <|im_end|> </s> [INST] \\n \"q\" 'q'")}));
  ojson long_conv = ojson::array();
  for (int i = 0; i < 40; ++i) long_conv.push_back(msg(i % 2 ? "assistant" : "user", ("turn " + std::to_string(i)).c_str()));
  c.emplace_back("forty_turns", long_conv);
  c.emplace_back("no_messages", ojson::array());
  return c;
}

struct TemplateUnderTest {
  const char* file;
  const char* bos;
  const char* eos;
};

const TemplateUnderTest kTemplates[] = {
    {"llama2-chat.jinja", "<s>", "</s>"},
    {"llama3-instruct.jinja", "<|begin_of_text|>", "<|eot_id|>"},
    {"llama3-instruct-original.jinja", "<|begin_of_text|>", "<|eot_id|>"},
    {"llama3.1-instruct.jinja", "<|begin_of_text|>", "<|eot_id|>"},
    {"qwen2-instruct.jinja", "", "<|im_end|>"},
    {"qwen2.5-instruct.jinja", "", "<|im_end|>"},
    {"qwen3.jinja", "", "<|im_end|>"},
    {"mistral-instruct-v0.2.jinja", "<s>", "</s>"},
    {"mistral-instruct-v0.2-original.jinja", "<s>", "</s>"},
    {"mistral-instruct-v0.3.jinja", "<s>", "</s>"},
    {"zephyr-7b-beta.jinja", "<s>", "</s>"},
    {"phi3-mini-4k-instruct.jinja", "<s>", "<|endoftext|>"},
    {"(chatml fallback)", "", ""},
};

class ChatTemplateVsReference : public ::testing::TestWithParam<TemplateUnderTest> {};

TEST_P(ChatTemplateVsReference, RendersIdentically) {
  const TemplateUnderTest& t = GetParam();
  const std::string source = std::string(t.file) == "(chatml fallback)" ? ChatTemplate::chatml_source() : read_template(t.file);
  ojson cases = ojson::array();
  std::vector<std::string> names;
  for (const auto& [name, messages] : conversations()) {
    for (bool agp : {true, false}) {
      cases.push_back(ojson{{"template", source}, {"messages", messages}, {"add_generation_prompt", agp},
                           {"bos_token", t.bos}, {"eos_token", t.eos}});
      names.push_back(name + (agp ? " +generation prompt" : ""));
    }
  }
  const Tally tally = compare_all(cases, names);
  std::cout << "[ reference ] " << t.file << ": " << tally.identical << " identical renders, " << tally.both_refuse
            << " refused by both, of " << cases.size() << "\n";
}

INSTANTIATE_TEST_SUITE_P(RealTemplates, ChatTemplateVsReference, ::testing::ValuesIn(kTemplates),
                         [](const ::testing::TestParamInfo<TemplateUnderTest>& info) {
                           std::string n = info.param.file;
                           if (n == "(chatml fallback)") return std::string("chatml_fallback");
                           n = n.substr(0, n.find(".jinja"));
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

TEST(ChatTemplateVsReference, AlternationErrorsAreRaised) {
  // The conversations that must be refused, refused by both with the template's message.
  for (const char* file : {"llama2-chat.jinja", "mistral-instruct-v0.2.jinja", "mistral-instruct-v0.3.jinja",
                           "mistral-instruct-v0.2-original.jinja"}) {
    SCOPED_TRACE(file);
    Result<ChatTemplate> t = ChatTemplate::parse(read_template(file));
    ASSERT_TRUE(t.ok()) << t.message();
    Result<std::string> r = t->render({{"user", "one"}, {"user", "two"}}, true, "<s>", "</s>");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.message().find("onversation roles must alternate user/assistant/user/assistant/..."), std::string::npos)
        << r.message();
  }
}

// Tool calling, with the templates that support it.
TEST(ChatTemplateVsReference, ToolCalls) {
  const ojson tools = ojson::parse(R"([{"type": "function", "function": {
      "name": "get_weather", "description": "Get the weather in a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city"},
                     "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}])");
  const ojson llama_turns = ojson::parse(R"([
      {"role": "system", "content": "You can call tools."},
      {"role": "user", "content": "Weather in Oslo?"},
      {"role": "assistant", "content": null, "tool_calls": [{"type": "function",
          "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
      {"role": "tool", "content": "{\"temp\": 3}"},
      {"role": "assistant", "content": "It is 3 degrees."},
      {"role": "user", "content": "Thanks"}])");
  const ojson mistral_turns = ojson::parse(R"([
      {"role": "user", "content": "Weather in Oslo?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "abcdefghi", "type": "function",
          "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
      {"role": "tool", "tool_call_id": "abcdefghi", "content": "{\"temp\": 3}"},
      {"role": "assistant", "content": "It is 3 degrees."},
      {"role": "user", "content": "Thanks"}])");
  ojson bad_id = mistral_turns;
  bad_id[1]["tool_calls"][0]["id"] = "short";
  ojson cases = ojson::array();
  std::vector<std::string> names;
  auto add = [&](const std::string& name, const char* file, const ojson& messages, const ojson& extra) {
    for (bool agp : {true, false}) {
      cases.push_back(ojson{{"template", read_template(file)}, {"messages", messages}, {"add_generation_prompt", agp},
                           {"bos_token", "<s>"}, {"eos_token", "</s>"}, {"extra", extra}});
      names.push_back(name + (agp ? " +generation prompt" : ""));
    }
  };
  add("llama3.1 tools in user message", "llama3.1-instruct.jinja", llama_turns, ojson{{"tools", tools}});
  add("llama3.1 tools in system message", "llama3.1-instruct.jinja", llama_turns,
      ojson{{"tools", tools}, {"tools_in_user_message", false}, {"date_string", "01 Jan 2025"}});
  add("llama3.1 tool turns without tools", "llama3.1-instruct.jinja", llama_turns, ojson::object());
  add("mistral v0.3 tools", "mistral-instruct-v0.3.jinja", mistral_turns, ojson{{"tools", tools}});
  add("mistral v0.3 tool call id of the wrong length", "mistral-instruct-v0.3.jinja", bad_id, ojson{{"tools", tools}});
  // Hermes-style (Qwen 2.5, Qwen 3): calls back as <tool_call> blocks, results as <tool_response>,
  // parallel calls, and Qwen 3's enable_thinking as a chat_template_kwargs variable.
  const ojson qwen_turns = ojson::parse(R"([
      {"role": "system", "content": "You can call tools."},
      {"role": "user", "content": "Weather in Oslo and Rome?"},
      {"role": "assistant", "content": "", "tool_calls": [
          {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}},
          {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Rome"}}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 3}"},
      {"role": "tool", "tool_call_id": "call_2", "content": "{\"temp\": 18}"},
      {"role": "assistant", "content": "Oslo 3, Rome 18."},
      {"role": "user", "content": "Thanks"}])");
  ojson no_system = qwen_turns;
  no_system.erase(0);
  for (const char* file : {"qwen2.5-instruct.jinja", "qwen3.jinja"}) {
    const std::string f = file;
    add(f + " tools", file, qwen_turns, ojson{{"tools", tools}});
    add(f + " tools, no system message", file, no_system, ojson{{"tools", tools}});
    add(f + " tool turns without tools", file, qwen_turns, ojson::object());
  }
  add("qwen3 enable_thinking false", "qwen3.jinja", qwen_turns, ojson{{"tools", tools}, {"enable_thinking", false}});
  add("qwen3 enable_thinking true", "qwen3.jinja", qwen_turns, ojson{{"enable_thinking", true}});
  const Tally tally = compare_all(cases, names);
  std::cout << "[ reference ] tool calls: " << tally.identical << " identical renders, " << tally.both_refuse
            << " refused by both, of " << cases.size() << "\n";
}

// Engine features one by one, on small templates, against the reference.
TEST(ChatTemplateVsReference, EngineFeatures) {
  const char* kSnippets[] = {
      "{{ 1 + 2 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ -7 % 3 }}|{{ 7 / 2 }}|{{ 2 ** 10 }}|{{ 1.5 + 1 }}|{{ 3.0 }}|{{ 0.1 + 0.2 }}",
      "{{ 'a' ~ 1 ~ 1.0 ~ true ~ [1, 'x'] }}|{{ 'a' + 1 }}|{{ [1, 2] + [3] }}",
      "{{ 1 == 1.0 }}{{ '1' == 1 }}{{ true == 1 }}{{ none == x }}{{ '' == false }}{{ [] == [] }}{{ 'a' != 'b' }}",
      "{{ 'ab' in 'cabd' }}{{ 1 in [1, 2] }}{{ '1' in [1] }}{{ 'k' in {'k': 1} }}{{ 3 not in [1] }}{{ x in y }}",
      "{% for x in [1, 2, 3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.previtem }}{{ loop.nextitem }}|{% endfor %}",
      "{% for x in [] %}a{% else %}empty{% endfor %}{% for k, v in {'a': 1, 'b': [2]}.items() %}{{ k }}={{ v }};{% endfor %}{% for k in {'z': 1, 'y': 2} %}{{ k }}{% endfor %}",
      "{% for x in range(10) if x is odd %}{{ x }}{% endfor %}|{% for i in range(2, 11, 3) %}{{ i }},{% endfor %}|{% for i in range(5, 0, -2) %}{{ i }}{% endfor %}",
      "{% for x in [1, 2, 3, 4] %}a{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}",
      "{% set ns = namespace(a=1, b='x') %}{% for i in range(3) %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }}{{ ns.b }}{{ ns }}",
      "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set (c, d) = [3, 4] %}{{ c + d }}{% set t %}block {{ a }}{% endset %}[{{ t }}]",
      "{% macro f(x, y='dflt', z=none) %}<{{ x }}|{{ y }}|{{ z }}>{% endmacro %}{{ f(1) }}{{ f(1, 2) }}{{ f(1, z=3) }}{{ f(x=5) }}",
      "{% macro g() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ g(1, 2, a=3) }}",
      "{% macro wrap(t) %}[{{ caller() }}:{{ t }}]{% endmacro %}{% call wrap('T') %}inside{% endcall %}",
      "{% macro row(n) %}({{ caller(n * 2) }}){% endmacro %}{% call(v) row(4) %}v={{ v }}{% endcall %}",
      "{% filter upper %}shout {{ 'this' }}{% endfilter %}",
      "{{ '  a b  '|trim }}|{{ 'aBc'|upper }}{{ 'aBc'|lower }}|{{ 'hello world-foo_bar'|title }}|{{ 'hello World'|capitalize }}|{{ 'abc'|length }}|{{ 'x'|string }}",
      "{{ [3, 1, 2]|sort }}{{ ['b', 'A', 'c']|sort }}{{ [1, 2, 3]|reverse }}{{ [1, 2, 3]|first }}{{ [1, 2, 3]|last }}{{ [1, 2]|length }}{{ ['a', 'b']|join }}{{ ['a', 'b']|join(', ') }}{{ [1, 1, 2]|unique }}",
      "{{ {'a': 1, 'b': {'c': [1, 2.5, none, true, 'x\\n\"\\t']}}|tojson }}|{{ {'a': [1, 2], 'b': {}}|tojson(indent=2) }}|{{ 'é'|tojson }}|{{ 'é😀'|tojson(ensure_ascii=true) }}|{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}|{{ [1, {'a': 2}]|tojson(separators=(',', ':')) }}",
      "{{ x|default('d') }}{{ ''|default('e') }}{{ ''|default('f', true) }}{{ 0|default('g', boolean=true) }}",
      "{{ '12'|int + 1 }}{{ 'x'|int }}{{ 'x'|int(-1) }}{{ '1.5'|float }}{{ 2.7|int }}{{ -2.5|int }}{{ true|int }}{{ 3|float }}{{ 1.5|string }}{{ 3|abs }}{{ -3.5|abs }}",
      "{{ '  x y  z '.split() }}{{ 'a,b,,c'.split(',') }}{{ 'a,b,c'.split(',', 1) }}{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}{{ 'aaa'.replace('a', 'b', 2) }}{{ 'abc'.replace('', '-') }}",
      "{{ '  pad  '.strip() }}|{{ '  pad  '.lstrip() }}|{{ '  pad  '.rstrip() }}|{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}{{ 'ab cd'.title() }}{{ 'abc'.capitalize() }}",
      "{{ 'hello'[1:3] }}{{ 'hello'[::-1] }}{{ 'hello'[-1] }}{{ [1, 2, 3, 4, 5][1::2] }}{{ [1, 2, 3][-2:] }}{{ [1, 2, 3][:-1] }}{{ 'héllo'[1] }}{{ [1, 2, 3][5] }}",
      "{% set d = {'a': 1, 'b': 2} %}{{ d.get('a') }}{{ d.get('z') }}{{ d.get('z', 9) }}{{ d.keys() }}{{ d.values() }}{{ d.items() }}{{ d|length }}{{ d['b'] }}{{ d.b }}",
      "{{ x is defined }}{{ x is undefined }}{{ none is none }}{{ 'a' is string }}{{ 1 is number }}{{ 1.5 is integer }}{{ [1] is iterable }}{{ 'a' is iterable }}{{ {} is mapping }}{{ 2 is even }}{{ 3 is odd }}{{ 'ab' is lower }}{{ true is boolean }}{{ x is not defined }}",
      "{{ messages|selectattr('role', 'equalto', 'user')|list|length }}{{ messages|rejectattr('role', 'equalto', 'user')|map(attribute='content')|join(',') }}{{ messages|map(attribute='missing', default='D')|list }}{{ messages|selectattr('content')|list|length }}",
      "{{ 'yes' if 1 else 'no' }}{{ 'yes' if 0 else 'no' }}{{ 'only' if false }}|{{ 1 and 2 }}{{ 0 or 'x' }}{{ not 1 }}{{ [] or {} }}",
      "{# comment #}a{#- trimmed -#}  b  {%- if true -%}  c  {%- endif -%}  d{{- ' e ' -}}  f",
      "line1\n  {% if true %}\n  indented\n  {% endif %}\nline2\n{# c #}\nend\n",
      "{% for m in messages %}\n  {{ m.role }}: {{ m.content }}\n{% endfor %}",
      "{{ 'a\\tb\\u00e9\\x41' }}{{ \"it's\" }}{{ 'say \"hi\"' }}{{ 'ab' 'cd' }}",
      "{{ [1, [2, [3]]] }}{{ {'k': 'v', 'n': none} }}{{ none }}{{ x }}{{ true }}{{ [none, x] }}{{ 1.0 }}{{ -0.0 }}{{ 100000000000000000000000 }}{{ 0.000001 }}",
      "{{ messages[0].role }}{{ messages[-1]['content'] }}{{ messages|length }}{{ messages[0].missing }}{{ messages[0].missing.deeper }}",
      "{% set x = 5 %}{% for i in [1] %}{% set x = 10 %}{{ x }}{% endfor %}{{ x }}",
      "{{ raise_exception('boom') if false else 'fine' }}{{ false and raise_exception('no') }}",
      "{{ (messages|selectattr('role', 'equalto', 'system')|list|last).content|trim if (messages|selectattr('role', 'equalto', 'system')|list) else '' }}",
      "{% for k, v in {'b': 2, 'a': 1}|dictsort %}{{ k }}{{ v }}{% endfor %}{{ {'B': 1, 'a': 2}|items }}{{ {'b': 1, 'a': 2}|dictsort(reverse=true) }}",
      "{{ 'x' if messages else 'y' }}{{ messages[1:]|length }}{{ (messages|last).role }}{{ messages|first|tojson }}",
      "{{ '{{' }}{{ '{%' }}{{ {'a': {'b': 'c'}}['a']['b'] }}{{ {'x': 1}}}",
      "{{ 'Hello'|indent }}|{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(1, blank=true) }}",
      "{{ 'abc'|replace('b', 'X') }}{{ 'aXbXc'|replace('X', '', count=1) }}{{ ['a', 'b']|map(attribute='x')|list if false else 'skip' }}",
      "{%- set x = namespace(found=false) -%}{%- for m in messages -%}{%- if m.role == 'user' -%}{%- set x.found = true -%}{%- endif -%}{%- endfor -%}{{ x.found }}",
      "{{ messages[0]['content'] | trim }}{{ messages | length > 2 }}{{ messages[-1].role == 'assistant' and not add_generation_prompt }}",
      "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% else %}{% set loop_messages = messages %}{% endif %}{% for message in loop_messages %}{{ loop.index0 }}{{ message.role[0] }}{% endfor %}",
      "a\n{%- generation -%}\n  b  \n{% endgeneration %}\nc",
      "{{ 2 ** 3 ** 2 }}|{{ -2 ** 2 }}|{{ 2 ** -1 }}|{{ 10 // 3 * 3 + 10 % 3 }}|{{ (1 + 2) * 3 }}|{{ 'x' ~ 2 * 3 }}",
      "{% set ns = namespace(items=[]) %}{% for m in messages %}{% set ns.items = ns.items + [m.role] %}{% endfor %}{{ ns.items|join('/') }}",
      "{{ messages|map(attribute='role')|map('upper')|join(',') if false else messages|map(attribute='role')|join(',') }}",
      "{% if not messages %}none{% elif messages|length == 1 %}one{% else %}many{% endif %}",
  };
  ojson cases = ojson::array();
  std::vector<std::string> names;
  const ojson messages = ojson::array({msg("system", " sys "), msg("user", "hi"), msg("assistant", "yo")});
  for (const char* s : kSnippets) {
    cases.push_back(ojson{{"template", s}, {"messages", messages}, {"add_generation_prompt", true},
                         {"bos_token", "<s>"}, {"eos_token", "</s>"}});
    names.push_back(s);
  }
  const Tally tally = compare_all(cases, names);
  std::cout << "[ reference ] engine features: " << tally.identical << " identical renders, " << tally.both_refuse
            << " refused by both, of " << cases.size() << "\n";
}

// Random templates built from the language's pieces (expressions, filters,
// tests, blocks), rendered by both: wherever the reference renders, we must
// render the same bytes, and where it refuses, so must we unless the template
// uses something only Jinja2 allows (docs/CONVENTIONS.md).
class TemplateGenerator {
 public:
  explicit TemplateGenerator(uint32_t seed) : state_(seed) {}

  std::string make() { return "{% set ns = namespace(v=0) %}" + statement(0); }

 private:
  uint32_t next(uint32_t n) {
    state_ = state_ * 1103515245u + 12345u;
    return (state_ >> 8) % n;
  }
  template <size_t N>
  const char* pick(const char* const (&a)[N]) {
    return a[next(N)];
  }

  std::string expr(int d) {
    static const char* const kAtoms[] = {
        "1", "2", "0", "-1", "1.5", "0.0", "'a'", "''", "' x '", "'A b'", "true", "false", "none",
        "messages", "messages[0]", "messages[-1].content", "m", "m.role", "m.content", "loop.index",
        "[1, 2]", "[]", "{'k': 1}", "{}", "ns.v", "'3'", "'\xC3\xA9\xE2\x98\x83'", "range(3)", "bos_token",
        "add_generation_prompt"};
    static const char* const kOps[] = {"+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">",
                                       "<=", ">=", "and", "or", "in", "not in"};
    static const char* const kFilters[] = {
        "trim", "upper", "lower", "length", "tojson", "string", "first", "last", "list", "int", "float",
        "title", "capitalize", "default('d')", "join(',')", "reverse", "sort", "unique", "items", "abs",
        "indent(2)", "replace('a', 'b')", "selectattr('role', 'equalto', 'user')", "map(attribute='role')",
        "tojson(indent=2)", "length > 1"};
    static const char* const kTests[] = {"defined", "undefined", "none", "string", "number", "integer", "mapping",
                                         "iterable", "odd", "even", "boolean", "true", "lower"};
    static const char* const kSeqs[] = {"'abc'", "messages", "[1, 2, 3]", "'hello'"};
    static const char* const kIndex[] = {"0", "-1", "1:", ":2", "::-1", "5"};
    static const char* const kStrs[] = {"' ab '", "'a,b'", "m.content", "'x'"};
    static const char* const kMethods[] = {"strip()", "upper()", "split(',')", "startswith('a')",
                                           "replace('a', 'z')", "title()", "lstrip()"};
    if (d > 2) return pick(kAtoms);
    switch (next(8)) {
      case 0: return expr(d + 1) + " " + pick(kOps) + " " + expr(d + 1);
      case 1: return expr(d + 1) + "|" + pick(kFilters);
      case 2: return expr(d + 1) + " is " + (next(2) ? "not " : "") + pick(kTests);
      case 3: return "(" + expr(d + 1) + " if " + expr(d + 1) + " else " + expr(d + 1) + ")";
      case 4: return "not " + expr(d + 1);
      case 5: return std::string(pick(kSeqs)) + "[" + pick(kIndex) + "]";
      case 6: return std::string(pick(kStrs)) + "." + pick(kMethods);
      default: return pick(kAtoms);
    }
  }

  std::string statement(int d) {
    if (d > 2) return "{{ " + expr(0) + " }}";
    switch (next(7)) {
      case 0:
        return "{% if " + expr(0) + " %}" + statement(d + 1) + "{% elif " + expr(0) + " %}" + statement(d + 1) +
               "{% else %}" + statement(d + 1) + "{% endif %}";
      case 1: return "{% for m in messages %}" + statement(d + 1) + "{% if loop.last %}.{% endif %}{% endfor %}";
      case 2: return "{% set ns.v = " + expr(0) + " %}{{ ns.v }}";
      case 3:
        return "{%- for i in range(" + std::to_string(next(4)) + ") -%}\n  " + statement(d + 1) +
               "\n{%- else -%}E{%- endfor %}";
      case 4: return "text " + std::to_string(next(9)) + " ";
      default: return "{{ " + expr(0) + " }}";
    }
  }

  uint32_t state_;
};

TEST(ChatTemplateVsReference, RandomTemplates) {
  TemplateGenerator gen(20261130);
  const ojson messages = ojson::array({msg("system", " s "), msg("user", "u,a"), msg("assistant", "")});
  ojson cases = ojson::array();
  std::vector<std::string> sources;
  for (int i = 0; i < 600; ++i) {
    sources.push_back(gen.make());
    cases.push_back(ojson{{"template", sources.back()}, {"messages", messages}, {"add_generation_prompt", true},
                         {"bos_token", "<s>"}, {"eos_token", "</s>"}});
  }
  const std::vector<Rendered> want = reference(cases);
  ASSERT_EQ(want.size(), cases.size());
  int identical = 0, refused = 0, only_ours = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(sources[i]);
    const Rendered got = ours(cases[i]);
    if (want[i].ok) {
      ASSERT_TRUE(got.ok) << "the reference renders, we refuse: " << got.text;
      EXPECT_EQ(got.text, want[i].text);
      identical += got.text == want[i].text;
    } else if (!got.ok) {
      ++refused;
    } else {
      ++only_ours;  // e.g. undefined ~ 'x', which Jinja2 renders and the reference refuses
    }
  }
  // Enough of them render for the comparison to mean something.
  EXPECT_GT(identical, 100);
  std::cout << "[ reference ] random templates: " << identical << " identical renders, " << refused
            << " refused by both, " << only_ours << " rendered by us only (Jinja2 extensions), of "
            << cases.size() << "\n";
}

}  // namespace
}  // namespace th
