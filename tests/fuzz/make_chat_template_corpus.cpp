// Writes seed inputs for chat_template_fuzz into the directory given as
// argv[1]: the real templates of tests/data/chat_templates/, the ChatML
// fallback, and small templates that reach each statement, filter and test,
// so that the fuzzer starts from the language rather than from noise.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tokenizer/chat_template.h"

namespace fs = std::filesystem;

namespace {

const char* kSnippets[] = {
    "{% for m in messages %}{{ loop.index }}{{ m.role|upper }}{% if not loop.last %},{% endif %}{% endfor %}",
    "{% set ns = namespace(a=1) %}{% set ns.a = ns.a + 1 %}{{ ns.a }}",
    "{% macro f(x, y='d') %}{{ x ~ y }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ f(1) }}{{ f(1, 2, 3, k=4) }}",
    "{% macro w() %}[{{ caller(1) }}]{% endmacro %}{% call(v) w() %}{{ v }}{% endcall %}",
    "{% filter upper %}x{% endfilter %}{% set b %}blk{% endset %}{{ b }}",
    "{{ tools|tojson(indent=2) }}{{ tools|tojson(ensure_ascii=true, sort_keys=true, separators=(',', ':')) }}",
    "{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|join(', ') }}",
    "{{ messages|rejectattr('content')|list|length }}{{ [3, 1, 2]|sort(reverse=true)|unique|first }}",
    "{{ 'a b'.split() }}{{ ' x '.strip() }}{{ 'ab'.startswith('a') }}{{ 'aa'.replace('a', 'b', 1) }}{{ 'x'[::-1] }}",
    "{{ {'a': 1}.items() }}{{ {'a': 1}.get('b', 2) }}{{ {'b': 1, 'a': 2}|dictsort }}",
    "{{ 1 is odd }}{{ x is defined }}{{ none is none }}{{ 6 is divisibleby 3 }}{{ [] is iterable }}",
    "{{ 7 // 2 }}{{ 2 ** 3 }}{{ 7 % 3 }}{{ 1.5|int }}{{ '3'|int + 1 }}{{ x|default('d') }}",
    "{% for x in range(3) if x %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% else %}e{% endfor %}",
    "{{ raise_exception('bad') if messages|length > 100 else 'ok' }}",
    "a\n  {%- if true -%}\n  b\n  {% endif %}\n{# c #}{{- ' d ' -}}\n",
    "{{ messages[0]['content'][1:3] }}{{ messages[-1].role }}{{ (messages|last).content|trim|length }}",
    "{% for k, v in tools[0].function.parameters.properties|items %}{{ k }}: {{ v.type }}{% endfor %}",
    "{{ strftime_now('%Y') if false }}{{ dict(a=1)|tojson }}{{ 'x'|indent(2, true) }}{{ 'a'|title|capitalize }}",
};

bool save(const fs::path& dir, const std::string& name, const std::string& text) {
  std::ofstream f(dir / name, std::ios::binary);
  f << text;
  if (!f) {
    std::fprintf(stderr, "make_chat_template_corpus: cannot write %s\n", (dir / name).c_str());
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_chat_template_corpus DIR\n");
    return 2;
  }
  const fs::path dir = argv[1];
  fs::create_directories(dir);
  bool ok = save(dir, "seed-chatml", th::ChatTemplate::chatml_source());
  int i = 0;
  for (const char* s : kSnippets) ok &= save(dir, "seed-snippet-" + std::to_string(i++), s);
  const fs::path templates = fs::path(TH_SOURCE_DIR) / "tests/data/chat_templates";
  for (const auto& e : fs::directory_iterator(templates)) {
    if (e.path().extension() != ".jinja") continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    ok &= save(dir, "seed-" + e.path().stem().string(), ss.str());
  }
  return ok ? 0 : 1;
}
