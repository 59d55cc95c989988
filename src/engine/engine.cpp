#include "engine/engine.h"

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <limits>

#include "engine/logprobs.h"

namespace th {

namespace {

constexpr int32_t kMaxLogprobs = 20;  // OpenAI's cap on top_logprobs

Status validate_request(const GenerateRequest& r, const LlamaModel& model, int64_t max_model_len,
                        int64_t pool_positions) {
  const int64_t n_vocab = model.config().n_vocab, model_ctx = model.config().n_ctx_train;
  if (r.prompt.empty()) return Status::error("request: empty prompt (start from BOS at least)");
  for (int32_t id : r.prompt)
    if (id < 0 || id >= n_vocab) return Status::errorf("request: prompt token ", id, " is outside the vocabulary of ", n_vocab);
  for (int32_t id : r.stop_token_ids)
    if (id < 0 || id >= n_vocab) return Status::errorf("request: stop token ", id, " is outside the vocabulary of ", n_vocab);
  if (Status s = r.sampling.validate(); !s.ok()) return Status::errorf("request: ", s.message());
  if (r.max_tokens == 0 || r.max_tokens < -1)
    return Status::errorf("request: max_tokens must be >= 1 (or -1: until the context is full), got ", r.max_tokens);
  if (r.min_tokens < 0 || (r.max_tokens > 0 && r.min_tokens > r.max_tokens))
    return Status::errorf("request: min_tokens must be in [0, max_tokens], got ", r.min_tokens);
  if (r.logprobs < -1 || r.logprobs > kMaxLogprobs)
    return Status::errorf("request: logprobs must be in [-1, ", kMaxLogprobs, "], got ", r.logprobs);
  if (!model.has_compute_type(r.compute_type)) {
    const std::string why = model.unavailable_reason(r.compute_type);
    return Status::errorf("request: compute type ", compute_type_name(r.compute_type),
                          " is not loaded on this server (loaded: ", compute_type_list_text(model.compute_types()),
                          why.empty() ? "; serve --compute-types loads more)" : "): " + why);
  }
  const int64_t n = static_cast<int64_t>(r.prompt.size());
  if (n >= max_model_len)
    return Status::errorf("request: a prompt of ", n, " tokens leaves no room to generate: a sequence holds at most ",
                          max_model_len, " positions (model context ", model_ctx, ", primary KV pool ", pool_positions, ")");
  return ok_status();
}

double seconds(Engine::Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

Result<std::unique_ptr<Engine>> Engine::create(LlamaModel& model, Backend& backend, EngineConfig config) {
  const ModelConfig& c = model.config();
  if (config.max_seqs < 1 || config.token_budget < config.max_seqs)
    return Status::errorf("engine: need 1 <= max_seqs <= token_budget, got max_seqs ", config.max_seqs,
                          ", token_budget ", config.token_budget);
  if (config.kv.primary_blocks < 1) return Status::error("engine: the primary KV tier needs at least one block");
  if (config.default_compute_type == ComputeType::Auto || !model.has_compute_type(config.default_compute_type))
    return Status::errorf("engine: the default compute type ", compute_type_name(config.default_compute_type),
                          " is not loaded (loaded: ", compute_type_list_text(model.compute_types()), ")");
  for (int32_t id : config.end_of_generation)
    if (id < 0 || id >= c.n_vocab) return Status::errorf("engine: end-of-generation token ", id, " is outside the vocabulary");
  // Every layer with a sliding window: blocks behind it are released as a sequence grows, so
  // a sequence holds at most window / block_size + 2 blocks and is not capped by the pool.
  bool all_local = c.n_layer > 0;
  for (int64_t l = 0; l < c.n_layer; ++l) all_local = all_local && c.is_swa(l);
  config.kv.window = all_local ? c.sliding_window : 0;
  TH_ASSIGN_OR_RETURN(std::unique_ptr<KvCacheManager> kv, KvCacheManager::create(backend, c.n_layer, c.kv_dim(), config.kv));
  int64_t len = config.max_model_len > 0 ? config.max_model_len : c.n_ctx_train;
  if (!all_local) len = std::min(len, config.kv.primary_blocks * config.kv.block_size);
  if (!config.scheduler) config.scheduler = std::make_shared<PriorityScheduler>();
  return std::unique_ptr<Engine>(new Engine(model, std::move(config), std::move(kv), len));
}

Engine::Engine(LlamaModel& model, EngineConfig config, std::unique_ptr<KvCacheManager> kv, int64_t max_model_len)
    : model_(&model), config_(std::move(config)), scheduler_(config_.scheduler),
      kv_(std::move(kv)), max_model_len_(max_model_len), start_time_(Clock::now()),
      signal_(std::make_shared<EngineSignal>()) {
  publish_stats();
}

Engine::~Engine() {
  stop();
  take_submissions();
  while (!seqs_.empty()) finish(*seqs_.begin()->second, FinishReason::Cancelled, TokenEvent{}, "engine destroyed");
}

Result<RequestStream> Engine::submit(GenerateRequest request, std::function<void()> on_event) {
  // A request's compute type is fixed here, once: preemption, swap and recompute keep it.
  if (request.compute_type == ComputeType::Auto) request.compute_type = config_.default_compute_type;
  if (Status s = validate_request(request, *model_, max_model_len_, config_.kv.primary_blocks * config_.kv.block_size);
      !s.ok()) {
    rejected_.fetch_add(1);
    return s;
  }
  const uint64_t id = next_id_.fetch_add(1);
  auto ch = std::make_shared<RequestChannel>(signal_, std::move(on_event));
  queue_.push({id, std::move(request), ch, Clock::now()});
  submitted_.fetch_add(1);
  signal_->notify();
  return RequestStream(id, std::move(ch));
}

bool Engine::has_work() const { return queue_.size() > 0 || has_live_.load(); }

double Engine::seconds_since_start(Clock::time_point t) const { return seconds(t - start_time_); }

void Engine::take_submissions() {
  std::vector<SubmittedRequest> taken;
  {
    // Out of the queue and into stats_'s waiting count in one step under stats_mutex_, under
    // which stats() adds the queue's size: a request taken here is never missed by /metrics
    // between now and the step's publish_stats() (a test saw 6 queued requests read as 1).
    std::lock_guard<std::mutex> l(stats_mutex_);
    taken = queue_.take_all();
    stats_.waiting += static_cast<int64_t>(taken.size());
  }
  for (SubmittedRequest& r : taken) {
    const int64_t n_prompt = static_cast<int64_t>(r.request.prompt.size());
    int64_t max_gen = max_model_len_ - n_prompt;
    if (r.request.max_tokens > 0) max_gen = std::min(max_gen, r.request.max_tokens);
    auto s = std::make_unique<Sequence>(r.id, std::move(r.request), std::move(r.channel), r.submitted, max_gen,
                                        kv_->block_size());
    s->metrics.n_prompt = n_prompt;
    if (last_arrival_) {  // the batch window's rate estimate: a moving average over ~10 arrivals
      const double gap = std::max(0.0, seconds(r.submitted - *last_arrival_));
      arrival_gap_ = arrival_gap_ > 0 ? 0.9 * arrival_gap_ + 0.1 * gap : gap;
    }
    last_arrival_ = std::max(last_arrival_.value_or(r.submitted), r.submitted);
    kv_->add(static_cast<SeqId>(r.id));
    seqs_.emplace(r.id, std::move(s));
  }
}

void Engine::reap_cancelled_and_expired(Clock::time_point now) {
  std::vector<uint64_t> cancelled, expired;
  for (const auto& [id, s] : seqs_) {
    if (s->channel->cancelled()) cancelled.push_back(id);
    else if (s->request.deadline && now >= *s->request.deadline) expired.push_back(id);
  }
  for (uint64_t id : cancelled) finish(*seqs_.at(id), FinishReason::Cancelled, TokenEvent{});
  for (uint64_t id : expired) finish(*seqs_.at(id), FinishReason::Deadline, TokenEvent{});
}

SchedulerState Engine::scheduler_state() const {
  SchedulerState st;
  st.block_size = kv_->block_size();
  st.token_budget = config_.token_budget;
  st.max_seqs = config_.max_seqs;
  st.available_blocks = kv_->available_blocks();
  st.host_free_blocks = kv_->host_free_blocks();
  st.seqs.reserve(seqs_.size());
  // Running sequences and their positions with K/V: whose prompt blocks are being computed.
  std::vector<std::pair<const Sequence*, int64_t>> running;
  for (const auto& [id, sp] : seqs_)
    if (sp->state == SeqState::Prefilling || sp->state == SeqState::Decoding)
      running.emplace_back(sp.get(), kv_->computed(static_cast<int64_t>(id)));
  auto being_computed = [&](const BlockHash& h, size_t block) {
    for (const auto& [r, computed] : running)
      if (r->hashes.size() > block && r->hashes[block] == h && computed < static_cast<int64_t>(block + 1) * st.block_size)
        return true;
    return false;
  };
  for (const auto& [id, sp] : seqs_) {
    const Sequence& s = *sp;
    SeqSummary x;
    x.id = static_cast<int64_t>(id);
    x.priority = s.request.priority;
    x.arrival = seconds_since_start(s.submitted);
    x.arrival_no = id;
    x.n_tokens = s.n_tokens();
    x.awaiting_advance = s.awaiting_advance;
    switch (s.state) {
      case SeqState::Prefilling:
      case SeqState::Decoding:
        x.phase = SeqPhase::Running;
        x.n_computed = kv_->computed(x.id);
        x.blocks_held = static_cast<int64_t>(kv_->table(x.id).size());
        x.blocks_released = kv_->released_by_preempting(x.id);
        break;
      case SeqState::Swapped:
        x.phase = SeqPhase::Swapped;
        x.n_computed = kv_->computed(x.id);
        x.blocks_held = static_cast<int64_t>(kv_->table(x.id).size());
        break;
      default: {
        x.phase = SeqPhase::Waiting;
        const PrefixMatch m = kv_->match_prefix(s.hashes, s.n_tokens());
        x.n_computed = m.tokens;
        x.blocks_held = m.blocks;
        x.hit_cost = m.cost_blocks;
        if (const auto next = static_cast<size_t>(m.blocks); next < s.hashes.size()) {
          x.next_block = s.hashes[next].lo | 1;  // never 0 (none)
          x.next_block_pending = being_computed(s.hashes[next], next);
        }
      }
    }
    st.seqs.push_back(x);
  }
  return st;
}

void Engine::apply_preemption(const Decision::Preemption& p) {
  Sequence& s = *seqs_.at(static_cast<uint64_t>(p.id));
  ++s.metrics.n_preemptions;
  s.awaiting_advance = true;
  if (p.mode == PreemptMode::Swap && kv_->swap_out(p.id).ok()) {
    s.state = SeqState::Swapped;
    ++counters_.preempted_swap;
    return;
  }
  kv_->drop(p.id);
  s.state = SeqState::Preempted;
  ++counters_.preempted_recompute;
}

Status Engine::run_batch(const Decision& d) {
  std::vector<KvStepEntry> entries;
  entries.reserve(d.run.size());
  for (const Decision::Work& w : d.run) {
    const Sequence& s = *seqs_.at(static_cast<uint64_t>(w.id));
    const bool queued = s.state == SeqState::Waiting || s.state == SeqState::Preempted;
    const int64_t base = queued ? kv_->match_prefix(s.hashes, s.n_tokens()).tokens : kv_->computed(w.id);
    const int64_t target = base + w.n_tokens;
    if (w.n_tokens < 1 || target > s.n_tokens())
      return Status::errorf("engine: the scheduler asked for ", w.n_tokens, " tokens of sequence ", w.id, " at ", base,
                            " of its ", s.n_tokens());
    entries.push_back({w.id, target, s.n_tokens(), s.hashes});
  }
  if (Status p = kv_->prepare(entries); !p.ok())
    return Status::errorf("engine: the KV cache refused the scheduler's plan: ", p.message());
  prefetch_swapped(static_cast<int64_t>(entries.size()));

  // One forward pass per compute type in the step, each over its own sequences only (a
  // matmul reads one weight copy), so a sequence's results never depend on the other types
  // in the batch. The KV transaction spans them all.
  const Clock::time_point now = Clock::now();
  std::vector<ComputeType> types;
  for (const KvStepEntry& e : entries) {
    const ComputeType t = seqs_.at(static_cast<uint64_t>(e.seq))->request.compute_type;
    if (std::find(types.begin(), types.end(), t) == types.end()) types.push_back(t);
  }
  std::vector<uint64_t> sampled;   // sequences whose last token's logits come back, in order
  std::vector<uint64_t> embedded;  // embedding sequences whose prompt this step completes
  std::vector<std::pair<uint64_t, int64_t>> hidden_rows;  // (sequence, position) of each hidden state asked for
  std::vector<float> sampled_logits, part_hidden;
  hidden_.clear();
  last_features_ = {};
  int64_t computed = 0;
  for (ComputeType type : types) {
    ForwardBatch fb;
    std::vector<uint8_t> want_hidden;
    const size_t hidden_before = hidden_rows.size();
    for (const KvStepEntry& e : entries) {
      Sequence& s = *seqs_.at(static_cast<uint64_t>(e.seq));
      if (s.request.compute_type != type) continue;
      const int64_t from = kv_->computed(e.seq), to = e.target;
      if (!s.first_scheduled) {
        s.first_scheduled = now;
        s.metrics.queue_seconds = seconds(now - s.submitted);
        s.metrics.prefix_hit_tokens = from;
      }
      if (s.state != SeqState::Decoding) s.state = SeqState::Prefilling;
      (s.state == SeqState::Decoding ? last_features_.decode_tokens : last_features_.prefill_tokens) += to - from;
      last_features_.kv_read += (to - from) * (from + to + 1) / 2;  // position p attends to p + 1 positions
      const auto i = static_cast<int32_t>(fb.tables.size());
      fb.tables.push_back(kv_->table(e.seq));
      const Pooling pool = s.request.pooling;
      for (int64_t p = from; p < to; ++p) {
        const bool last = p + 1 == s.n_tokens();
        fb.add(s.tokens[static_cast<size_t>(p)], i, static_cast<int32_t>(p), last && pool == Pooling::None);
        const bool hidden = pool == Pooling::Mean || (pool == Pooling::Last && last);
        want_hidden.push_back(hidden ? 1 : 0);
        if (hidden) hidden_rows.emplace_back(s.id, p);
      }
      if (to == s.n_tokens()) (pool == Pooling::None ? sampled : embedded).push_back(s.id);
    }
    const bool any_hidden = hidden_rows.size() > hidden_before;
    if (any_hidden) fb.want_hidden = std::move(want_hidden);
    if (Status f = model_->forward(fb, kv_->primary(), &logits_, type, any_hidden ? &part_hidden : nullptr); !f.ok()) {
      kv_->rollback();
      return Status::errorf("engine: forward pass failed: ", f.message());
    }
    if (types.size() == 1) {
      sampled_logits.swap(logits_);
    } else {
      sampled_logits.insert(sampled_logits.end(), logits_.begin(), logits_.end());
    }
    if (any_hidden) hidden_.insert(hidden_.end(), part_hidden.begin(), part_hidden.end());
    computed += static_cast<int64_t>(fb.size());
  }
  kv_->commit();
  counters_.tokens_computed += computed;

  const Clock::time_point done = Clock::now();
  const size_t n_vocab = static_cast<size_t>(model_->config().n_vocab);
  for (size_t k = 0; k < sampled.size(); ++k)
    sample_and_emit(*seqs_.at(sampled[k]), std::span<float>(sampled_logits.data() + k * n_vocab, n_vocab), done);
  if (types.size() == 1) logits_.swap(sampled_logits);  // keep the buffer's capacity for the next step
  pool_hidden(hidden_rows);
  for (uint64_t id : embedded) finish_embedding(*seqs_.at(id), done);
  return ok_status();
}

// Swapped-out sequences, most important first (priority, then arrival: the scheduler's order
// without ageing), are copied back on the KV copy thread while this step's forward pass runs;
// one block per sequence in the step stays free for it to grow into next step.
void Engine::prefetch_swapped(int64_t keep_free) {
  if (!kv_->has_host_tier()) return;
  std::vector<const Sequence*> swapped;
  for (const auto& [id, s] : seqs_)
    if (s->state == SeqState::Swapped) swapped.push_back(s.get());
  if (swapped.empty()) return;
  std::stable_sort(swapped.begin(), swapped.end(),
                   [](const Sequence* a, const Sequence* b) { return a->request.priority < b->request.priority; });
  std::vector<SeqId> ids;
  for (const Sequence* s : swapped) ids.push_back(static_cast<SeqId>(s->id));
  kv_->prefetch(ids, keep_free);
}

// Embedding sequences: each hidden state of the step into its sequence's pool, in position
// order (so a batch sums exactly as the sequence alone would), each position once.
void Engine::pool_hidden(const std::vector<std::pair<uint64_t, int64_t>>& rows) {
  const size_t n_embd = static_cast<size_t>(model_->config().n_embd);
  for (size_t k = 0; k < rows.size(); ++k) {
    Sequence& s = *seqs_.at(rows[k].first);
    const int64_t pos = rows[k].second;
    if (pos < s.pooled_upto) continue;
    if (s.pooled.empty()) s.pooled.assign(n_embd, 0.0);
    const float* h = hidden_.data() + k * n_embd;
    if (s.request.pooling == Pooling::Last)
      for (size_t j = 0; j < n_embd; ++j) s.pooled[j] = h[j];
    else
      for (size_t j = 0; j < n_embd; ++j) s.pooled[j] += h[j];
    s.pooled_upto = pos + 1;
  }
}

void Engine::finish_embedding(Sequence& s, Clock::time_point now) {
  TokenEvent e;
  e.position = s.n_tokens();
  const double scale = s.request.pooling == Pooling::Mean ? 1.0 / static_cast<double>(s.n_tokens()) : 1.0;
  e.embedding.reserve(s.pooled.size());
  for (double x : s.pooled) e.embedding.push_back(static_cast<float>(x * scale));
  s.metrics.ttft_seconds = seconds(now - s.submitted);
  finish(s, FinishReason::Stop, std::move(e));
}

void Engine::sample_and_emit(Sequence& s, std::span<float> logits, Clock::time_point now) {
  const int64_t pos = s.n_tokens();
  TokenEvent e;
  e.position = pos;
  // The sampler applies penalties in place: logprobs come from the raw row, kept first.
  std::vector<float> raw;
  double lse = 0;
  if (s.request.logprobs >= 0) {
    raw.assign(logits.begin(), logits.end());
    lse = log_sum_exp(raw);
    if (s.request.logprobs > 0) e.top_logprobs = top_logprobs(raw, s.request.logprobs, lse);
  }
  // min_tokens (vLLM's): the tokens that would end it are masked until then (logprobs stay the raw ones).
  if (s.n_generated() < s.request.min_tokens) {
    for (const std::vector<int32_t>* ids : {&config_.end_of_generation, &s.request.stop_token_ids})
      if (ids != &config_.end_of_generation || !s.request.ignore_eos)
        for (int32_t id : *ids) logits[static_cast<size_t>(id)] = -std::numeric_limits<float>::infinity();
  }
  TokenConstraint* constraint = s.request.constraint.get();
  if (constraint && !constraint->mask(logits)) {
    TokenEvent end;
    end.position = pos;
    finish(s, FinishReason::Error, std::move(end), "structured output: the grammar allows no next token");
    return;
  }
  const int32_t token = s.sampler.sample(logits, s.tokens, static_cast<uint64_t>(pos));
  if (!raw.empty()) e.logprob = static_cast<float>(raw[static_cast<size_t>(token)] - lse);
  s.state = SeqState::Decoding;
  s.awaiting_advance = false;
  if (s.last_token) s.metrics.inter_token_seconds.push_back(seconds(now - *s.last_token));
  else s.metrics.ttft_seconds = seconds(now - s.submitted);
  s.last_token = now;

  auto in = [token](const std::vector<int32_t>& v) { return std::find(v.begin(), v.end(), token) != v.end(); };
  if ((!s.request.ignore_eos && in(config_.end_of_generation)) || in(s.request.stop_token_ids)) {
    TokenEvent stop;
    stop.position = pos;
    finish(s, FinishReason::Stop, std::move(stop));
    return;
  }
  if (constraint && !constraint->accept(token)) {
    TokenEvent end;
    end.position = pos;
    finish(s, FinishReason::Error, std::move(end), "structured output: the sampled token is outside the grammar");
    return;
  }
  s.append(token, kv_->block_size());
  ++counters_.tokens_generated;
  e.token = token;
  if (s.n_generated() >= s.max_generated) finish(s, FinishReason::Length, std::move(e));
  else s.channel->push(std::move(e));
}

void Engine::finish(Sequence& s, FinishReason why, TokenEvent last, std::string error) {
  const uint64_t id = s.id;
  kv_->remove(static_cast<SeqId>(id));
  s.state = SeqState::Finished;
  last.finish = why;
  last.error = std::move(error);
  s.metrics.n_generated = s.n_generated();
  s.metrics.e2e_seconds = seconds(Clock::now() - s.submitted);
  s.channel->finish(std::move(last), s.metrics);
  if (why == FinishReason::Stop || why == FinishReason::Length) count_slo(s);
  ++counters_.finished;
  if (why == FinishReason::Cancelled) ++counters_.cancelled;
  seqs_.erase(id);
}

void Engine::fail_all(const Status& why) {
  while (!seqs_.empty()) finish(*seqs_.begin()->second, FinishReason::Error, TokenEvent{}, why.message());
}

Status Engine::step() {
  if (running_.load()) return Status::error("engine: step() while the engine thread runs");
  return step_impl();
}

Status Engine::step_impl() {
  take_submissions();
  reap_cancelled_and_expired(Clock::now());
  Status status;
  if (!seqs_.empty()) {
    const Clock::time_point began = Clock::now();
    SchedulerState st = scheduler_state();
    std::optional<SchedulerState> all;  // alternating steps: every type's, when one type's plan is empty
    if (config_.alternate_compute_types) {
      SchedulerState whole = st;
      if (keep_one_compute_type(st)) all = std::move(whole);
    }
    size_step_for_slo(st);
    Decision d = scheduler_->schedule(st);
    if (all && d.run.empty() && d.preempt.empty()) {
      size_step_for_slo(*all);
      d = scheduler_->schedule(*all);
    }
    for (const Decision::Preemption& p : d.preempt) apply_preemption(p);
    if (!d.run.empty()) {
      status = run_batch(d);
      // The step's cost, scheduling to emitted tokens: what a running stream waits per token.
      const double took = seconds(Clock::now() - began);
      if (status.ok()) cost_.observe(last_features_, took);
      counters_.slo.last_step_seconds = took;
    }
    else if (d.preempt.empty())
      status = Status::errorf("engine: no sequence can make progress (", seqs_.size(), " live, ",
                              kv_->available_blocks(), " blocks available)");
    ++counters_.steps;
    if (status.ok() && config_.check_invariants) status = kv_->check_invariants();
    if (!status.ok()) fail_all(status);
  }
  has_live_.store(!seqs_.empty());
  publish_stats();
  return status;
}

void Engine::publish_stats() {
  EngineStats st = counters_;
  st.slo.cost = cost_.coefficients();
  st.slo.cost_samples = cost_.samples();
  for (const auto& [id, s] : seqs_) {
    switch (s->state) {
      case SeqState::Prefilling:
      case SeqState::Decoding: ++st.running; break;
      case SeqState::Swapped: ++st.swapped; break;
      default: ++st.waiting;
    }
  }
  st.kv = kv_->stats();
  st.submitted = submitted_.load();
  st.rejected = rejected_.load();
  std::lock_guard<std::mutex> l(stats_mutex_);
  stats_ = st;
}

EngineStats Engine::stats() const {
  EngineStats st;
  {
    std::lock_guard<std::mutex> l(stats_mutex_);  // with the queue's size: take_submissions()
    st = stats_;
    st.waiting += static_cast<int64_t>(queue_.size());
  }
  st.submitted = submitted_.load();
  st.rejected = rejected_.load();
  return st;
}

Status Engine::start() {
  if (running_.exchange(true)) return Status::error("engine: already started");
  stop_requested_.store(false);
  thread_ = std::thread(&Engine::thread_main, this);
  return ok_status();
}

void Engine::stop() {
  if (!running_.load()) return;
  stop_requested_.store(true);
  signal_->notify();
  thread_.join();
  running_.store(false);
}

void Engine::thread_main() {
  pthread_setname_np(pthread_self(), "th-engine");
  while (!stop_requested_.load()) {
    signal_->wait([&] { return stop_requested_.load() || queue_.size() > 0 || !seqs_.empty(); });
    if (stop_requested_.load()) break;
    hold_for_batch_window();
    // Nothing may escape the engine thread: an exception fails the live requests instead.
    try {
      if (Status s = step_impl(); !s.ok()) std::fprintf(stderr, "tokenhive engine: %s\n", s.message().c_str());
    } catch (const std::exception& ex) {
      fail_all(Status::errorf("engine: ", ex.what()));
    } catch (...) {
      fail_all(Status::error("engine: unknown exception"));
    }
  }
}

}  // namespace th
