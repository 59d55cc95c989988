#include "engine/generator.h"

#include <algorithm>
#include <chrono>

#include "kv/kv_cache.h"

namespace th {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

Generator::Generator(LlamaModel& model, Backend& backend, std::vector<int32_t> end_of_generation)
    : model_(&model), backend_(&backend), end_of_generation_(std::move(end_of_generation)) {
  std::sort(end_of_generation_.begin(), end_of_generation_.end());
}

Result<GenerateStats> Generator::run(const std::vector<int32_t>& prompt, const GenerateOptions& opt,
                                     const std::function<bool(int32_t)>& on_token) {
  const ModelConfig& c = model_->config();
  TH_RETURN_IF_ERROR(opt.sampling.validate());
  if (prompt.empty()) return Status::error("generate: empty prompt (start from BOS at least)");
  if (opt.n_batch < 1) return Status::errorf("generate: batch size ", opt.n_batch, " must be >= 1");
  const int64_t n_ctx = opt.n_ctx > 0 ? opt.n_ctx : c.n_ctx_train;
  const int64_t n_prompt = static_cast<int64_t>(prompt.size());
  if (n_prompt >= n_ctx)
    return Status::errorf("generate: prompt of ", n_prompt, " tokens does not fit the context of ", n_ctx);
  const int64_t budget = opt.max_tokens < 0 ? n_ctx - n_prompt : std::min(opt.max_tokens, n_ctx - n_prompt);

  // The cache holds exactly what this run can reach.
  constexpr int64_t kBlock = 16;
  const int64_t positions = n_prompt + budget;
  TH_ASSIGN_OR_RETURN(KvCache kv, KvCache::create(*backend_, c.n_layer, c.kv_dim(),
                                                  std::max<int64_t>(1, (positions + kBlock - 1) / kBlock), kBlock));
  std::vector<int32_t> table;
  if (!kv.reserve(table, positions)) return Status::error("generate: KV cache too small");

  GenerateStats st;
  st.n_prompt = n_prompt;
  Sampler sampler(opt.sampling);
  std::vector<int32_t> history = prompt;
  std::vector<float> logits;
  auto t0 = std::chrono::steady_clock::now();

  for (int64_t start = 0; start < n_prompt; start += opt.n_batch) {
    const int64_t end = std::min(n_prompt, start + opt.n_batch);
    ForwardBatch b;
    b.tables = {table};
    for (int64_t p = start; p < end; ++p)
      b.add(prompt[static_cast<size_t>(p)], 0, static_cast<int32_t>(p), p == n_prompt - 1);
    TH_RETURN_IF_ERROR(model_->forward(b, kv, &logits, opt.compute_type));
  }
  st.prompt_seconds = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();

  st.finish = FinishReason::Length;
  for (int64_t i = 0; i < budget; ++i) {
    const int64_t pos = n_prompt + i;
    const int32_t token = sampler.sample(logits, history, static_cast<uint64_t>(pos));
    if (!opt.ignore_eos && std::binary_search(end_of_generation_.begin(), end_of_generation_.end(), token)) {
      st.finish = FinishReason::Stop;
      break;
    }
    history.push_back(token);
    ++st.n_generated;
    if (!on_token(token)) {
      st.finish = FinishReason::Cancelled;
      break;
    }
    if (i + 1 == budget) break;  // the last token needs no forward pass
    ForwardBatch b;
    b.tables = {table};
    b.add(token, 0, static_cast<int32_t>(pos), true);
    TH_RETURN_IF_ERROR(model_->forward(b, kv, &logits, opt.compute_type));
  }
  st.generate_seconds = seconds_since(t0);
  kv.release(table);
  return st;
}

}  // namespace th
