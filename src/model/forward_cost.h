// What one token's forward pass costs: the weight bytes it must read and the
// multiply-accumulates of its matrix products; and the speed limits a machine's
// bandwidth and peak arithmetic put on decode and prefill. `tokenhive bench
// model` reports each measured speed as a percentage of these ceilings.
//
// Batch-1 decode reads every projection matrix whole and one embedding row, so
// its ceiling is bandwidth / bytes. Prefill reuses each weight across many
// tokens, so its ceiling is the arithmetic: 2 ops per weight element per token
// on the integer unit for block-quantized weights, on the f32 FMA unit for
// f32/f16/bf16 weights. Attention's own arithmetic (which grows with the
// context) is left out, so the ceilings are upper bounds.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/model_config.h"
#include "tensor/dtype.h"

namespace th {

class GgufFile;

/// @brief One weight matrix a forward pass reads, rows x cols of `type`.
struct MatrixRead {
  std::string name;
  DType type = DType::F32;
  int64_t rows = 0, cols = 0;
  bool lookup = false;  // an embedding table: one row per token, no arithmetic
};

struct ForwardCost {
  uint64_t matrix_bytes = 0;             // projection matrices, read once per forward pass whatever the batch
  uint64_t lookup_bytes_per_token = 0;   // embedding rows, one per token
  uint64_t int8_macs_per_token = 0;      // MACs against block-quantized weights (integer dot products)
  uint64_t float_macs_per_token = 0;     // MACs against f32/f16/bf16 weights (f32 FMA)

  /// Bytes of weights a batch-1 decode step reads.
  uint64_t weight_bytes_per_token() const { return matrix_bytes + lookup_bytes_per_token; }
  uint64_t macs_per_token() const { return int8_macs_per_token + float_macs_per_token; }
};

/// @brief Whether matrix products with weights of type t run on the integer unit
/// (block-quantized types: activations are quantized to 8 bits) or the float unit.
bool runs_on_int8(DType t);

/// @brief Sums the reads: whole matrices into matrix_bytes and MACs, lookups one row each.
ForwardCost forward_cost(std::span<const MatrixRead> reads);

/// @brief The matrices LlamaModel's forward pass reads, for a config and the type of each
/// named tensor: token_embd (a lookup), per layer attn_q/k/v (phi3: attn_qkv)/output and
/// ffn_gate/up/down (phi3: ffn_up holds both; a mixture of experts: the router and the
/// n_expert_used experts a token reads), and output (token_embd itself, read whole, when tied).
std::vector<MatrixRead> llama_matrix_reads(const ModelConfig& c, const std::function<DType(const std::string&)>& type_of,
                                           bool tied_output);
/// @brief The same, with the types from the file (which LlamaModel::load has already checked).
Result<std::vector<MatrixRead>> llama_matrix_reads(const GgufFile& f, const ModelConfig& c);

/// @brief The machine's limits in the units the probes report.
struct MachinePeaks {
  double bandwidth_gb_per_s = 0;  // 1e9 bytes/s
  double int8_gops = 0;           // 1e9 ops/s, 2 per 8-bit multiply-accumulate
  double fp32_gflops = 0;         // 1e9 FLOP/s, 2 per FMA lane
};

/// @brief Tokens/s if the matrix products ran at the peaks: 1 / (2 int8 MACs / int8 peak
/// + 2 float MACs / f32 peak). 0 when a peak the model needs is unknown (<= 0).
double compute_ceiling_tokens_per_s(const ForwardCost& c, const MachinePeaks& p);
/// @brief Tokens/s if a step of `batch` tokens (one per sequence) only read weights at the
/// bandwidth: batch / ((matrix bytes + batch * lookup row bytes) / bandwidth). 0 when unknown.
double bandwidth_ceiling_tokens_per_s(const ForwardCost& c, const MachinePeaks& p, int64_t batch);
/// @brief Decode of `batch` sequences at once: the lower of the two ceilings above
/// (the bandwidth one alone when the compute peaks are unknown).
double decode_ceiling_tokens_per_s(const ForwardCost& c, const MachinePeaks& p, int64_t batch);

}  // namespace th
