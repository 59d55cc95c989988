// Writes seed inputs for grammar_fuzz into the directory given as argv[1]: the mode byte
// (0 GBNF, 1 JSON schema, 2 regex; 0x80 added: strict / inside a JSON string), the text,
// 0xFF and bytes to run through the grammar.
#include <string>
#include <utility>
#include <vector>

#include "corpus_writer.h"

int main(int argc, char** argv) {
  const std::optional<std::filesystem::path> corpus = th::fuzz::corpus_dir(argc, argv);
  if (!corpus) return 2;
  const std::vector<std::pair<char, std::string>> seeds = {
      {0, "root ::= (expr \"=\" ws term \"\\n\")+\nexpr ::= term ([-+*/] term)*\nterm ::= [a-z]+ ws | [0-9]+ ws | \"(\" ws expr \")\" ws\nws ::= [ \\t]*\xFF" "(a+12)=3\n"},
      {0, "root ::= \"\\u00e9\" [^a-z\\]]{1,3} . (\"x\" | \"yz\")? # c\n\xFF\xC3\xA9" "12\xE4\xB8\xADx"},
      {0, "root ::= a\na ::= \"x\" a | \"\"\n\xFFxxxx"},
      {'\x81', R"({"type":"object","properties":{"a":{"type":"string","maxLength":3},"b":{"enum":[1,"x",null]}},"required":["a"]})" "\xFF{\"a\":\"ab\",\"b\":1}"},
      {1, R"({"$defs":{"n":{"anyOf":[{"type":"array","items":{"$ref":"#/$defs/n"},"maxItems":2},{"type":"integer"}]}},"$ref":"#/$defs/n"})" "\xFF[[1],2]"},
      {1, R"({"type":"string","pattern":"^[A-Z]\\d{2}\"$"})" "\xFF\"A12\\\"\""},
      {2, "(ab|c)+[^\\d\\s]{1,3}\\.x?\xFF" "abcc!!.x"},
      {'\x82', ".\"[\\\\x]*\xFF" "a\\\"x"},
  };
  for (size_t i = 0; i < seeds.size(); ++i)
    th::fuzz::write_seed(*corpus, i, std::string(1, seeds[i].first) + seeds[i].second);
  return 0;
}
