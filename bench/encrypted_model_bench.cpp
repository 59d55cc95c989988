// Decryption speed of encrypted model files (model/encrypted_model.h): AES-256-GCM
// verify + decrypt of every chunk, then the plaintext's SHA-256, per thread count.
//   build/micro_bench --benchmark_filter=DecryptModel
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "model/encrypted_model.h"

namespace {

void BM_DecryptModel(benchmark::State& state) {
  const size_t size = size_t{256} << 20;
  std::vector<uint8_t> plain(size);
  std::mt19937 rng(1);
  for (size_t i = 0; i < size; i += 4) plain[i] = static_cast<uint8_t>(rng());
  th::Kek kek;
  kek.bytes.fill(7);
  th::Result<std::vector<uint8_t>> env = th::encrypt_model(plain.data(), plain.size(), kek);
  if (!env.ok()) {
    state.SkipWithError(env.message().c_str());
    return;
  }
  const int threads = static_cast<int>(state.range(0));
  for (auto _ : state) {
    th::Result<th::MappedFile> out = th::decrypt_model(env->data(), env->size(), kek, "bench", threads);
    if (!out.ok()) state.SkipWithError(out.message().c_str());
    benchmark::DoNotOptimize(out);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(size));
}
BENCHMARK(BM_DecryptModel)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);

// The two halves apart: AES-256-GCM alone (one thread) and SHA-256 alone.
void BM_EncryptModel(benchmark::State& state) {
  const size_t size = size_t{64} << 20;
  std::vector<uint8_t> plain(size, 1);
  th::Kek kek;
  for (auto _ : state) benchmark::DoNotOptimize(th::encrypt_model(plain.data(), plain.size(), kek));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(size));
}
BENCHMARK(BM_EncryptModel)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
