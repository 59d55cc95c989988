// Structured output's cost per step: the token mask of a JSON-schema grammar at a few
// states, for a 32000-token vocabulary (Llama 2) and the largest in the shared test data
// (DeepSeek LLM's, 102400 tokens: no 150k Qwen2 vocabulary is there), one mask per sequence:
// batch 1 and batch 32. Compare with the decode step of the model served.
//   build/micro_bench --benchmark_filter=GrammarMask
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/gguf.h"
#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/token_trie.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace th;

struct Vocab {
  std::vector<std::string> pieces;
  std::unique_ptr<grammar::TokenTrie> trie;
};

const Vocab& vocab(int which) {
  static Vocab v[2];
  static const char* kPaths[2] = {"models/llama-2-tiny-random.gguf", "testdata/tokenizer/llamacpp/ggml-vocab-deepseek-llm.gguf"};
  if (!v[which].trie) {
    Result<GgufFile> f = GgufFile::open(std::string(TH_SHARED_DIR) + "/" + kPaths[which]);
    if (!f.ok()) return v[which];
    Result<Tokenizer> tok = Tokenizer::from_gguf(*f);
    if (!tok.ok()) return v[which];
    for (int32_t id = 0; id < tok->n_vocab(); ++id) v[which].pieces.push_back(tok->token_to_piece(id));
    v[which].trie = std::make_unique<grammar::TokenTrie>(v[which].pieces);
  }
  return v[which];
}

std::shared_ptr<const grammar::Grammar> schema_grammar() {
  static std::shared_ptr<const grammar::Grammar> g = [] {
    Result<std::string> text = grammar::json_schema_to_gbnf(nlohmann::ordered_json::parse(
        R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},
            "tags":{"type":"array","items":{"type":"string"}},"ok":{"type":"boolean"}},
            "required":["name","age","tags","ok"],"additionalProperties":false})"));
    return std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(*text).value());
  }();
  return g;
}

// The states: the start, inside a free string (nearly every token allowed: the worst
// case), after a key's colon, inside a number.
const char* kStates[] = {"", "{\"name\": \"Bob the b", "{\"name\": \"Bob\", \"age\": ", "{\"name\": \"Bob\", \"age\": 4"};

void BM_GrammarMask(benchmark::State& state) {
  const Vocab& v = vocab(static_cast<int>(state.range(0)));
  if (!v.trie) {
    state.SkipWithError("vocabulary not found under TH_SHARED_DIR");
    return;
  }
  const int batch = static_cast<int>(state.range(2));
  grammar::Matcher start(schema_grammar());
  if (!start.accept(kStates[state.range(1)])) {
    state.SkipWithError("state not accepted");
    return;
  }
  std::vector<grammar::Matcher> seqs(static_cast<size_t>(batch), start);
  std::vector<uint64_t> mask;
  for (auto _ : state) {
    for (grammar::Matcher& m : seqs) {
      m.allowed_tokens(*v.trie, mask);
      benchmark::DoNotOptimize(mask.data());
    }
  }
  state.counters["vocab"] = static_cast<double>(v.pieces.size());
  state.counters["trie_nodes"] = static_cast<double>(v.trie->n_nodes());
}
// Args: vocabulary (0: 32000, 1: 102400), state (kStates), batch.
BENCHMARK(BM_GrammarMask)
    ->ArgsProduct({{0, 1}, {0, 1, 2, 3}, {1, 32}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
