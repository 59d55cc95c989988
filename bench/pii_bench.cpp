// PII redaction throughput: masking a whole text (prose with a little PII, and dense PII),
// and streaming it in 4-byte pieces (a token's worth) through StreamingRedactor.
#include <benchmark/benchmark.h>

#include <string>

#include "pii/pii_redactor.h"

namespace {

using namespace th;

std::string make_text(bool dense) {
  const std::string prose =
      "The quick brown fox jumps over the lazy dog, version 1.2.3 released on 2024-01-15 at 12:30:45 for $12.99. "
      "敏捷的棕色狐狸跳过了懒狗。 ";
  const std::string pii =
      "Mail ann@example.com or call +44 20 7946 0958 / 13812345678; card 4111 1111 1111 1111, IBAN "
      "DE89 3704 0044 0532 0130 00, ID 11010519491231002X, host 10.0.0.1 and 2001:db8::1. ";
  std::string text;
  while (text.size() < (1u << 20)) text += dense ? pii : prose;
  return text;
}

void BM_PiiRedact(benchmark::State& state) {
  const std::string text = make_text(state.range(0) != 0);
  for (auto _ : state) {
    pii::Redactor r;
    benchmark::DoNotOptimize(r.redact(text));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_PiiRedact)->Arg(0)->Arg(1);

void BM_PiiStreamingRedact(benchmark::State& state) {
  const std::string text = make_text(state.range(0) != 0);
  for (auto _ : state) {
    pii::Redactor r;
    pii::StreamingRedactor s(r);
    size_t n = 0;
    for (size_t i = 0; i < text.size(); i += 4) n += s.push(std::string_view(text).substr(i, 4)).size();
    n += s.flush().size();
    benchmark::DoNotOptimize(n);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_PiiStreamingRedact)->Arg(0)->Arg(1);

}  // namespace
