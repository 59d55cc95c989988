// How far a compute type's next-token distributions are from another's (fp32's) on the
// same text, as llama.cpp's perplexity --kl-divergence reports it: per position, the KL
// divergence KL(P_ref || P_type) and whether both put the same token first. What
// `bench model --compute-type` prints and the compute-type tests bound.
#pragma once

#include <cstdint>
#include <span>

#include "backend/backend.h"
#include "base/status.h"
#include "model/llama_model.h"

namespace th {

struct ComputeAccuracy {
  int64_t positions = 0;      // next-token distributions compared
  double mean_kl = 0;         // nats, mean over positions
  double max_kl = 0;          // nats, the worst position
  double top1_agreement = 0;  // fraction of positions whose most likely tokens agree
  double ref_logit_rms = 0;   // rms of ref's logits about each position's mean (kl_bound's L)
};

/// @brief Runs `tokens` (>= 2: every position but the last predicts the next) through the
/// model in `ref` and in `type` (both loaded), one sequence prefilled whole, and compares
/// every position's softmax in double.
Result<ComputeAccuracy> compare_compute_types(LlamaModel& model, Backend& backend, std::span<const int32_t> tokens,
                                              ComputeType ref, ComputeType type);

/// @brief The bound the tests put on mean KL for a type relative to fp32: a weight rounded
/// to a format with p significand bits (8 bf16, 11 fp16, 4 e4m3) is off by at most u = 2^-p
/// relative, u / sqrt(3) rms (uniform rounding error), and so is a product's output (random
/// signs: errors add in quadrature as the terms do). The 2 n_layer + 1 matmul stages that
/// reach the logits (attention and FFN per layer, the output) add independent errors, none
/// damped on the way (the bound's assumption: norms and the softmax only shrink them), so
/// the logits, of rms size L about their mean, move by sigma = L u sqrt((2 n_layer + 1) / 3)
/// rms, and KL ~ sigma^2 / 2 for small moves: L^2 u^2 (2 n_layer + 1) / 6. On stories260K
/// the measured KL sits 30-70x below it (compute_type_test.cpp prints both). Fp32 and
/// native: 0.
double kl_bound(ComputeType type, int64_t n_layer, double logit_rms);

/// @brief The least top-1 agreement the tests accept: with the logits' error sigma (as
/// above), the top two tokens can swap where their gap is under about 2 sigma, and gaps
/// spread over the logits' scale L put at most about 2 sigma / L of the positions there:
/// agreement >= 1 - 2 sigma / L = 1 - 2 u sqrt((2 n_layer + 1) / 3).
double top1_bound(ComputeType type, int64_t n_layer);

}  // namespace th
