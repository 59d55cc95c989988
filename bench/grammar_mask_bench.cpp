// Structured output's cost per step: the token mask of a JSON-schema grammar at a few
// states (each the first mask there: the walk), and over a whole generation (walks, then
// masks kept for sets met again), for a 32000-token vocabulary (Llama 2), DeepSeek LLM's
// 102400 and a 152657-token stand-in for Qwen2's (see vocab()), one mask per sequence:
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

std::vector<std::string> pieces_of(const char* path) {
  std::vector<std::string> pieces;
  Result<GgufFile> f = GgufFile::open(std::string(TH_SHARED_DIR) + "/" + path);
  if (!f.ok()) return pieces;
  Result<Tokenizer> tok = Tokenizer::from_gguf(*f);
  if (!tok.ok()) return pieces;
  for (int32_t id = 0; id < tok->n_vocab(); ++id) pieces.push_back(tok->token_to_piece(id));
  return pieces;
}

// 0: Llama 2's 32,000; 1: DeepSeek LLM's 102,400; 2: a 152,657-token stand-in for Qwen2's
// 151,646 (whose GGUF is not in shared/): DeepSeek's pieces then GPT-2's 50,257, both
// byte-level BPE, so the trie has Qwen's breadth of real pieces.
const Vocab& vocab(int which) {
  static Vocab v[3];
  static const char* kPaths[2] = {"models/llama-2-tiny-random.gguf", "testdata/tokenizer/llamacpp/ggml-vocab-deepseek-llm.gguf"};
  if (!v[which].trie) {
    v[which].pieces = pieces_of(kPaths[which == 0 ? 0 : 1]);
    if (which == 2) {
      std::vector<std::string> more = pieces_of("testdata/tokenizer/llamacpp/ggml-vocab-gpt-2.gguf");
      if (more.empty()) v[which].pieces.clear();
      v[which].pieces.insert(v[which].pieces.end(), more.begin(), more.end());
    }
    if (v[which].pieces.empty()) return v[which];
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
  std::vector<grammar::Matcher> seqs;
  std::vector<uint64_t> mask;
  for (auto _ : state) {
    state.PauseTiming();  // fresh copies: a mask the matcher kept from the last round would answer
    seqs.assign(static_cast<size_t>(batch), start);
    state.ResumeTiming();
    for (grammar::Matcher& m : seqs) {
      m.allowed_tokens(*v.trie, mask);
      benchmark::DoNotOptimize(mask.data());
    }
  }
  state.counters["vocab"] = static_cast<double>(v.pieces.size());
  state.counters["trie_nodes"] = static_cast<double>(v.trie->n_nodes());
}
// Args: vocabulary (0: 32000, 1: 102400, 2: 152657), state (kStates), batch.
BENCHMARK(BM_GrammarMask)
    ->ArgsProduct({{0, 1, 2}, {0, 1, 2, 3}, {1, 32}})
    ->Unit(benchmark::kMicrosecond);

// A whole generation of one document of the schema, as the engine runs it: every step
// masks then accepts the token, each sequence with its own matcher from the start (so the
// walks of sets met for the first time, and the masks kept for sets met again, both count).
// The tokens: at each step the longest allowed token that goes on with the document.
const char kDocument[] =
    R"({"name": "Bob the builder, who fixes everything in the town", "age": 42, )"
    R"("tags": ["red", "green", "a long tag with several words"], "ok": true})";

std::vector<std::string> document_tokens(const Vocab& v) {
  const std::string doc = kDocument;
  grammar::Matcher m(schema_grammar());
  std::vector<std::string> out;
  std::vector<uint64_t> mask;
  size_t done = 0;
  while (done < doc.size()) {
    m.allowed_tokens(*v.trie, mask);
    size_t best = 0, best_len = 0;
    for (size_t id = 0; id < v.pieces.size(); ++id)
      if (((mask[id >> 6] >> (id & 63)) & 1) && v.pieces[id].size() > best_len && doc.compare(done, v.pieces[id].size(), v.pieces[id]) == 0)
        best = id, best_len = v.pieces[id].size();
    if (best_len == 0 || !m.accept(v.pieces[best])) return {};
    out.push_back(v.pieces[best]);
    done += best_len;
  }
  return out;
}

void BM_GrammarMaskGeneration(benchmark::State& state) {
  const Vocab& v = vocab(static_cast<int>(state.range(0)));
  const std::vector<std::string> tokens = v.trie ? document_tokens(v) : std::vector<std::string>{};
  if (tokens.empty()) {
    state.SkipWithError("vocabulary not found, or the document does not tokenize under the grammar");
    return;
  }
  const size_t batch = static_cast<size_t>(state.range(1));
  std::vector<uint64_t> mask;
  for (auto _ : state) {
    std::vector<grammar::Matcher> seqs(batch, grammar::Matcher(schema_grammar()));
    for (const std::string& t : tokens)
      for (grammar::Matcher& m : seqs) {
        m.allowed_tokens(*v.trie, mask);
        benchmark::DoNotOptimize(mask.data());
        m.accept(t);
      }
  }
  state.counters["steps"] = static_cast<double>(tokens.size());
  // Seconds per decode step of the whole batch (each sequence masks once a step).
  state.counters["per_step"] = benchmark::Counter(static_cast<double>(tokens.size()),
                                                  benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
// Args: vocabulary (0: 32000, 1: 102400, 2: 152657), batch.
BENCHMARK(BM_GrammarMaskGeneration)->ArgsProduct({{0, 1, 2}, {1, 32}})->Unit(benchmark::kMillisecond);

}  // namespace
