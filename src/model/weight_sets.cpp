// LlamaModel's compute types: one copy of the matrices per type, converted once at load
// (model/weight_copy.h), picked per forward pass.
#include <algorithm>
#include <string>
#include <thread>

#include "model/llama_model.h"
#include "tensor/fp8.h"

namespace th {

int LlamaModel::weight_set(ComputeType t) const {
  if (t == ComputeType::Native) return 0;
  for (const auto& [type, set] : type_sets_)
    if (type == t) return set;
  return -1;
}

std::vector<ComputeType> LlamaModel::compute_types() const {
  std::vector<ComputeType> v = {ComputeType::Native};
  for (const auto& [type, set] : type_sets_) v.push_back(type);
  return v;
}

size_t LlamaModel::weight_bytes(ComputeType t) const {
  const int set = weight_set(t);
  if (set > 0) return copies_[static_cast<size_t>(set - 1)].bytes;
  if (set < 0) return 0;
  // Under tensor parallelism only rank 0 multiplies by the output matrix (tensor_parallel.cpp).
  const bool follower = comm_ && comm_->rank() != 0;
  size_t bytes = follower ? 0 : row_bytes(output_.type, output_.cols) * static_cast<size_t>(output_.rows);
  for (const Layer& L : layers_) {
    for (const WeightView* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down})
      bytes += row_bytes(w->type, w->cols) * static_cast<size_t>(w->rows);
    for (const WeightView* w : {&L.gate_exps, &L.up_exps, &L.down_exps})
      if (w->data) bytes += row_bytes(w->type, w->cols) * static_cast<size_t>(w->rows * cfg_.n_expert);
  }
  return bytes;
}

std::string LlamaModel::weight_note(ComputeType t) const {
  const int set = weight_set(t);
  return set > 0 ? copies_[static_cast<size_t>(set - 1)].note : "";
}

std::string LlamaModel::unavailable_reason(ComputeType t) const {
  for (const auto& [type, why] : unavailable_)
    if (type == t) return why;
  return "";
}

Status LlamaModel::add_compute_type(ComputeType t, int threads) {
  if (has_compute_type(t)) return ok_status();
  const std::optional<DType> to = compute_type_weight_dtype(t);
  if (!to) return Status::errorf("compute type ", compute_type_name(t), " is not a weight format");
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  constexpr WeightView Layer::*kMatrices[] = {&Layer::wq,     &Layer::wk,   &Layer::wv,    &Layer::wo,
                                              &Layer::w_gate, &Layer::w_up, &Layer::w_down};
  constexpr WeightView Layer::*kExperts[] = {&Layer::gate_exps, &Layer::up_exps, &Layer::down_exps};
  bool all_native = output_.type == *to;
  for (const Layer& L : layers_) {
    for (WeightView Layer::*m : kMatrices) all_native = all_native && (L.*m).type == *to;
    for (WeightView Layer::*m : kExperts) all_native = all_native && (!(L.*m).data || (L.*m).type == *to);
  }
  if (all_native) {  // the file's own weights are already this type: no copy
    type_sets_.emplace_back(t, 0);
    return ok_status();
  }
  WeightSet set;
  set.type = t;
  set.layers = layers_;
  int fallbacks = 0;
  auto convert = [&](WeightView& w, const std::string& name) -> Status {
    // A matrix whose rows are not whole fp8 blocks (stories260K's ffn_down: 172 columns) goes
    // to bf16 instead, the next format up, as llama-quantize falls back for k-quants.
    const bool fallback = *to == DType::FP8_E4M3 && w.cols % kFp8BlockElements != 0;
    const DType target = fallback ? DType::BF16 : *to;
    if (w.type == target) return ok_status();  // this matrix already is: shared with the file
    fallbacks += fallback;
    WeightStorage s;
    Result<WeightView> v = convert_weight(w, target, name, threads, &s);
    if (!v.ok()) {
      Status why = Status::errorf("this model cannot compute in ", compute_type_name(t), " (", dtype_name(*to),
                                  " weights): ", v.status().message());
      unavailable_.emplace_back(t, why.message());
      return why;
    }
    w = *v;
    set.bytes += s.bytes;
    set.storage.push_back(std::move(s));
    return ok_status();
  };
  set.output = output_;
  if (!comm_ || comm_->rank() == 0) TH_RETURN_IF_ERROR(convert(set.output, "output.weight"));  // followers never read it
  static constexpr const char* kNames[] = {"attn_q", "attn_k", "attn_v", "attn_output",
                                           "ffn_gate", "ffn_up", "ffn_down"};
  static constexpr const char* kExpertNames[] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
  for (size_t l = 0; l < set.layers.size(); ++l) {
    for (size_t i = 0; i < std::size(kMatrices); ++i)
      TH_RETURN_IF_ERROR(convert(set.layers[l].*kMatrices[i], "blk." + std::to_string(l) + "." + kNames[i] + ".weight"));
    // An expert tensor is its experts' matrices back to back (LlamaModel::expert): it
    // converts as one matrix of n_expert times the rows, and stays a view of expert 0.
    for (size_t i = 0; i < std::size(kExperts); ++i) {
      WeightView& w = set.layers[l].*kExperts[i];
      if (!w.data) continue;
      WeightView all = w;
      all.rows *= cfg_.n_expert;
      TH_RETURN_IF_ERROR(convert(all, "blk." + std::to_string(l) + "." + kExpertNames[i] + ".weight"));
      w = WeightView{all.type, w.rows, all.cols, all.data};
    }
  }
  if (fallbacks > 0)
    set.note = std::to_string(fallbacks) + " matrices in bf16: rows not a multiple of fp8's block of 32";
  copies_.push_back(std::move(set));
  type_sets_.emplace_back(t, static_cast<int>(copies_.size()));
  return ok_status();
}

}  // namespace th
