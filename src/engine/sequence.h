// One request inside the engine: its tokens, its sampler, where it is in its
// life, and its timings. Owned and touched by the engine thread alone.
//
//   Waiting --admit--> Prefilling --last prompt token--> Decoding --stop--> Finished
//      ^                   |                                |
//      |                   +------------ preempt -----------+
//      |                        | recompute     | swap
//   Preempted <-----------------+               v
//      (KV dropped,                           Swapped (KV in the host tier)
//       recomputed from its tokens)             --swap in--> Prefilling or Decoding
//
// Cancellation and deadlines finish a sequence from any state.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "engine/request.h"
#include "engine/request_stream.h"
#include "engine/sampler.h"
#include "kv/block_hash.h"

namespace th {

enum class SeqState : uint8_t { Waiting, Prefilling, Decoding, Preempted, Swapped, Finished };

constexpr std::string_view seq_state_name(SeqState s) {
  switch (s) {
    case SeqState::Waiting: return "waiting";
    case SeqState::Prefilling: return "prefilling";
    case SeqState::Decoding: return "decoding";
    case SeqState::Preempted: return "preempted";
    case SeqState::Swapped: return "swapped";
    case SeqState::Finished: return "finished";
  }
  return "?";
}

struct Sequence {
  using Clock = std::chrono::steady_clock;

  Sequence(uint64_t id_, GenerateRequest req, std::shared_ptr<RequestChannel> ch, Clock::time_point submitted_,
           int64_t max_generated_, int64_t block_size)
      : id(id_), request(std::move(req)), channel(std::move(ch)), sampler(request.sampling),
        tokens(request.prompt), n_prompt(static_cast<int64_t>(tokens.size())), max_generated(max_generated_),
        root(prefix_root(request.tenant, request.cache_salt)), submitted(submitted_) {
    // Without hashes a sequence neither finds nor publishes cached blocks.
    if (request.pooling != Pooling::Mean) extend_block_hashes(hashes, root, tokens, block_size);
  }

  int64_t n_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int64_t n_generated() const { return n_tokens() - n_prompt; }
  void append(int32_t token, int64_t block_size) {
    tokens.push_back(token);
    extend_block_hashes(hashes, root, tokens, block_size);
  }

  const uint64_t id;
  GenerateRequest request;  // its prompt is copied into `tokens`
  std::shared_ptr<RequestChannel> channel;
  Sampler sampler;
  std::vector<int32_t> tokens;   // prompt, then generated
  const int64_t n_prompt;
  const int64_t max_generated;   // max_tokens, capped by the context
  const BlockHash root;          // the tenant's prefix-cache chain root
  std::vector<BlockHash> hashes; // of every full block of `tokens`
  SeqState state = SeqState::Waiting;
  bool awaiting_advance = false;  // preempted and no token generated since (SeqSummary::awaiting_advance)
  // Embedding requests: the pooled hidden state so far, and the positions it holds (a
  // recomputed position is not counted twice).
  std::vector<double> pooled;
  int64_t pooled_upto = 0;

  // Timing (for RequestMetrics).
  Clock::time_point submitted;
  std::optional<Clock::time_point> first_scheduled, last_token;
  RequestMetrics metrics;
};

}  // namespace th
