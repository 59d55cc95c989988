// The serving engine: many requests, one model, one KV cache, one thread.
//
// Requests enter a thread-safe queue (`submit`, from any thread) and come
// back as a stream of token events. One engine thread owns every sequence;
// each `step` it takes new requests, drops cancelled and expired ones, asks
// the scheduler policy for a plan, preempts what the plan says, reserves the
// step's KV blocks as one transaction, runs ONE forward pass over the ragged
// batch of every prompt chunk and decode token, samples each sequence that
// reached its end with the request's own sampler, and emits the tokens.
//
// Tests drive `step()` themselves; a server calls `start()` and lets the
// engine thread step whenever there is work.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "base/status.h"
#include "engine/engine_stats.h"
#include "engine/request.h"
#include "engine/request_queue.h"
#include "engine/request_stream.h"
#include "engine/scheduler.h"
#include "engine/slo_policy.h"
#include "engine/step_cost_model.h"
#include "engine/sequence.h"
#include "kv/kv_cache_manager.h"
#include "model/llama_model.h"

namespace th {

struct EngineConfig {
  KvCacheConfig kv;              // primary_blocks must be set; host_blocks 0: no host tier
  int64_t token_budget = 512;    // tokens per forward pass (prompt chunks + decodes); >= max_seqs
  int64_t max_seqs = 64;         // sequences running at once
  int64_t max_model_len = 0;     // positions per sequence; 0: the model's context. Capped at the primary tier.
  std::shared_ptr<const Scheduler> scheduler;  // null: PriorityScheduler with its default ageing
  std::vector<int32_t> end_of_generation;      // stop tokens unless ignore_eos; the caller takes them from its vocab
  bool check_invariants = false;               // recount the KV cache's references after every step (tests)
  ComputeType default_compute_type = ComputeType::Native;  // what `auto` means; must be loaded in the model
  SloConfig slo;  // latency targets: each step sized by the learned step cost (slo_policy.h); none by default
  // Sequences of several compute types: false (the default), each step runs every type's
  // sequences, one forward pass per type; true, each step runs one type's, round robin
  // (BENCHMARKS.md, "Mixed compute types: grouped or alternating steps").
  bool alternate_compute_types = false;
};

class Engine {
 public:
  using Clock = std::chrono::steady_clock;

  /// @brief The model (and the backend it computes on) must outlive the engine.
  static Result<std::unique_ptr<Engine>> create(LlamaModel& model, Backend& backend, EngineConfig config);
  /// @brief Stops the thread; requests still live end with FinishReason::Cancelled.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// @brief Validates and queues a request (any thread). A request the engine can never serve
  /// (bad ids or params, a compute type the model did not load, a prompt that does not fit one sequence's
  /// KV) is refused here with the reason.
  /// `on_event`, when set, runs on the engine thread after each event is queued on the
  /// stream (see RequestChannel): a consumer serving many streams waits on it instead of
  /// blocking in next().
  Result<RequestStream> submit(GenerateRequest request, std::function<void()> on_event = {});

  /// @brief One iteration (not while the thread runs). An error means the engine failed
  /// internally; every live request has then been finished with FinishReason::Error.
  Status step();
  /// @brief Something queued or live: step() has work to do.
  bool has_work() const;

  /// @brief Runs step() on the engine thread whenever there is work.
  Status start();
  /// @brief Stops the engine thread (live requests stay, for step() or start()).
  void stop();

  /// @brief A snapshot taken after the last step (any thread).
  EngineStats stats() const;
  int64_t max_model_len() const { return max_model_len_; }
  int64_t hidden_size() const { return model_->config().n_embd; }  // an embedding's length
  const EngineConfig& config() const { return config_; }

 private:
  Engine(LlamaModel& model, EngineConfig config, std::unique_ptr<KvCacheManager> kv, int64_t max_model_len);
  Status step_impl();
  void take_submissions();
  void reap_cancelled_and_expired(Clock::time_point now);
  SchedulerState scheduler_state() const;
  void apply_preemption(const Decision::Preemption& p);
  Status run_batch(const Decision& d);
  void prefetch_swapped(int64_t keep_free);
  void sample_and_emit(Sequence& s, std::span<float> logits, Clock::time_point now);
  void pool_hidden(const std::vector<std::pair<uint64_t, int64_t>>& rows);
  void finish_embedding(Sequence& s, Clock::time_point now);
  void finish(Sequence& s, FinishReason why, TokenEvent last, std::string error = {});
  void fail_all(const Status& why);
  void publish_stats();
  void thread_main();
  double seconds_since_start(Clock::time_point t) const;
  // SLO scheduling (engine_slo.cpp).
  void size_step_for_slo(SchedulerState& st);
  // Alternating compute types (engine_compute_types.cpp).
  bool keep_one_compute_type(SchedulerState& st);
  void count_slo(const Sequence& s);
  void hold_for_batch_window();

  LlamaModel* model_;
  EngineConfig config_;
  std::shared_ptr<const Scheduler> scheduler_;
  std::unique_ptr<KvCacheManager> kv_;
  const int64_t max_model_len_;
  const Clock::time_point start_time_;

  // Any thread.
  RequestQueue queue_;
  std::shared_ptr<EngineSignal> signal_;
  std::atomic<uint64_t> next_id_{1};
  std::atomic<int64_t> rejected_{0}, submitted_{0};
  mutable std::mutex stats_mutex_;
  EngineStats stats_;

  // The engine thread only (or the caller of step()).
  std::map<uint64_t, std::unique_ptr<Sequence>> seqs_;  // live sequences by id (= arrival order)
  EngineStats counters_;
  std::vector<float> logits_;
  std::vector<float> hidden_;  // final hidden states of embedding requests' tokens
  std::atomic<bool> has_live_{false};
  StepCostModel cost_;          // learned on every step, used when config_.slo has a TPOT target
  StepFeatures last_features_;  // of the step run_batch just ran
  double arrival_gap_ = 0;      // mean seconds between submissions (moving average), for the batch window
  std::optional<Clock::time_point> last_arrival_;
  ComputeType last_step_type_ = ComputeType::Auto;  // alternating steps: the type the last step ran

  std::thread thread_;
  std::atomic<bool> running_{false}, stop_requested_{false};
};

}  // namespace th
