#include "engine/warmup.h"

#include <algorithm>
#include <random>
#include <vector>

namespace th {

Result<WarmupReport> warm_up(Engine& engine, const WarmupOptions& o) {
  WarmupReport r;
  if (o.requests <= 0) return r;
  if (o.n_vocab <= 0) return Status::error("warm-up: the vocabulary is empty");
  const auto start = Engine::Clock::now();
  std::mt19937 rng(20261201);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(o.n_vocab - 1));
  const int64_t room = engine.max_model_len() - o.gen_tokens;  // a prompt must leave room to generate
  const int64_t long_len = std::min(o.long_prompt, room);
  const int64_t short_len = std::min<int64_t>(16, room);
  if (short_len < 1) return Status::error("warm-up: a sequence holds too few positions to generate");
  std::vector<RequestStream> streams;
  for (int i = 0; i < o.requests; ++i) {
    GenerateRequest g;
    // One long prompt (a prefill chunk's buffers), the rest short (the batch's).
    g.prompt.resize(static_cast<size_t>(i == 0 ? long_len : short_len));
    for (int32_t& t : g.prompt) t = id(rng);
    g.max_tokens = o.gen_tokens;
    g.ignore_eos = true;
    g.sampling.temperature = 0;
    g.tenant = "\x01warm-up";  // not a valid key file tenant: nothing of a client's shares it
    r.prompt_tokens += static_cast<int64_t>(g.prompt.size());
    Result<RequestStream> s = engine.submit(std::move(g));
    if (!s.ok()) return Status::error(cat("warm-up: ", s.message()));
    streams.push_back(std::move(*s));
  }
  for (RequestStream& s : streams) {
    while (std::optional<TokenEvent> e = s.next()) {
      if (e->token >= 0) ++r.generated_tokens;
      if (e->finish && *e->finish == FinishReason::Error) return Status::error(cat("warm-up: ", e->error));
    }
  }
  r.requests = o.requests;
  r.seconds = std::chrono::duration<double>(Engine::Clock::now() - start).count();
  return r;
}

}  // namespace th
