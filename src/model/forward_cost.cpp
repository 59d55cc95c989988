#include "model/forward_cost.h"

#include <algorithm>

#include "format/gguf.h"

namespace th {

bool runs_on_int8(DType t) { return t != DType::F32 && t != DType::F16 && t != DType::BF16; }

ForwardCost forward_cost(std::span<const MatrixRead> reads) {
  ForwardCost c;
  for (const MatrixRead& m : reads) {
    const uint64_t row = row_bytes(m.type, m.cols);
    if (m.lookup) {
      c.lookup_bytes_per_token += row;
      continue;
    }
    c.matrix_bytes += row * static_cast<uint64_t>(m.rows);
    const uint64_t macs = static_cast<uint64_t>(m.rows) * static_cast<uint64_t>(m.cols);
    (runs_on_int8(m.type) ? c.int8_macs_per_token : c.float_macs_per_token) += macs;
  }
  return c;
}

std::vector<MatrixRead> llama_matrix_reads(const ModelConfig& c, const std::function<DType(const std::string&)>& type_of,
                                           bool tied_output) {
  std::vector<MatrixRead> r;
  auto add = [&](const std::string& name, int64_t rows, int64_t cols, bool lookup) {
    r.push_back({name, type_of(name), rows, cols, lookup});
  };
  add("token_embd.weight", c.n_vocab, c.n_embd, true);
  const bool fused = c.spec && c.spec->fused_qkv;  // phi3: attn_qkv and a gate-and-up ffn_up
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    if (fused) {
      add(p + "attn_qkv.weight", c.q_dim() + 2 * c.kv_dim(), c.n_embd, false);
    } else {
      add(p + "attn_q.weight", c.q_dim(), c.n_embd, false);
      add(p + "attn_k.weight", c.kv_dim(), c.n_embd, false);
      add(p + "attn_v.weight", c.kv_dim(), c.n_embd, false);
    }
    add(p + "attn_output.weight", c.n_embd, c.q_dim(), false);
    if (c.n_expert > 0) {
      // A token reads the router and its n_expert_used experts' matrices (batch-1 decode).
      add(p + "ffn_gate_inp.weight", c.n_expert, c.n_embd, false);
      add(p + "ffn_gate_exps.weight", c.n_ff_exp * c.n_expert_used, c.n_embd, false);
      add(p + "ffn_up_exps.weight", c.n_ff_exp * c.n_expert_used, c.n_embd, false);
      add(p + "ffn_down_exps.weight", c.n_embd * c.n_expert_used, c.n_ff_exp, false);
    } else if (fused) {
      add(p + "ffn_up.weight", 2 * c.n_ff, c.n_embd, false);
      add(p + "ffn_down.weight", c.n_embd, c.n_ff, false);
    } else {
      add(p + "ffn_gate.weight", c.n_ff, c.n_embd, false);
      add(p + "ffn_up.weight", c.n_ff, c.n_embd, false);
      add(p + "ffn_down.weight", c.n_embd, c.n_ff, false);
    }
  }
  add(tied_output ? "token_embd.weight" : "output.weight", c.n_vocab, c.n_embd, false);
  return r;
}

Result<std::vector<MatrixRead>> llama_matrix_reads(const GgufFile& f, const ModelConfig& c) {
  std::string missing;
  auto type_of = [&](const std::string& name) {
    const GgufTensor* t = f.tensor(name);
    if (!t) {
      if (missing.empty()) missing = name;
      return DType::F32;
    }
    return t->type;
  };
  const bool tied = f.tensor("output.weight") == nullptr || (c.spec && c.spec->output_is_embd);
  std::vector<MatrixRead> r = llama_matrix_reads(c, type_of, tied);
  if (!missing.empty()) return Status::errorf(f.name(), ": missing tensor '", missing, "'");
  return r;
}

double compute_ceiling_tokens_per_s(const ForwardCost& c, const MachinePeaks& p) {
  double seconds = 0;
  if (c.int8_macs_per_token) {
    if (!(p.int8_gops > 0)) return 0;
    seconds += 2.0 * static_cast<double>(c.int8_macs_per_token) / (p.int8_gops * 1e9);
  }
  if (c.float_macs_per_token) {
    if (!(p.fp32_gflops > 0)) return 0;
    seconds += 2.0 * static_cast<double>(c.float_macs_per_token) / (p.fp32_gflops * 1e9);
  }
  return seconds > 0 ? 1.0 / seconds : 0;
}

double bandwidth_ceiling_tokens_per_s(const ForwardCost& c, const MachinePeaks& p, int64_t batch) {
  const double bytes = static_cast<double>(c.matrix_bytes) + static_cast<double>(batch) * static_cast<double>(c.lookup_bytes_per_token);
  if (!(p.bandwidth_gb_per_s > 0) || batch < 1 || bytes <= 0) return 0;
  return static_cast<double>(batch) * p.bandwidth_gb_per_s * 1e9 / bytes;
}

double decode_ceiling_tokens_per_s(const ForwardCost& c, const MachinePeaks& p, int64_t batch) {
  const double bw = bandwidth_ceiling_tokens_per_s(c, p, batch);
  const double compute = compute_ceiling_tokens_per_s(c, p);
  if (bw <= 0) return 0;
  return compute > 0 ? std::min(bw, compute) : bw;
}

}  // namespace th
