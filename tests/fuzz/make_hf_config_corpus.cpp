// Writes seed inputs for hf_config_fuzz into the directory given as argv[1]: a config.json of
// every model_type the tables map (hf_config.h), each with the keys its reader takes (Llama 3's
// rope_scaling, Mistral's sliding_window, the experts, Gemma's soft-caps and layer_types,
// Phi-3's LongRoPE lists), so that the fuzzer starts from real layouts rather than from noise.
// hf_config_fuzz also reads each input's halves as tokenizer.json + tokenizer_config.json: one
// seed is such a pair.
#include <string>

#include "corpus_writer.h"

namespace {

// The keys every config has (a tiny shape: 64 wide, 2 layers, 4 heads of 16, 2 KV heads).
std::string config(const std::string& model_type, const std::string& extra) {
  return R"({"model_type": ")" + model_type +
         R"(", "num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
 "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 300, "max_position_embeddings": 1024,
 "rope_theta": 10000.0, "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "bos_token_id": 1,
 "eos_token_id": [2, 3])" + (extra.empty() ? "" : ", " + extra) + "}";
}

const std::string kPhi3Factors = "[1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7]";

}  // namespace

int main(int argc, char** argv) {
  auto dir = th::fuzz::corpus_dir(argc, argv);
  if (!dir) return 2;
  const std::string seeds[] = {
      config("llama", R"("hidden_act": "silu")"),
      config("llama", R"("rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                           "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})"),
      config("llama", R"("rope_scaling": {"type": "linear", "factor": 2.0})"),
      config("mistral", R"("sliding_window": 4096)"),
      config("mixtral", R"("sliding_window": null, "num_local_experts": 8, "num_experts_per_tok": 2)"),
      config("qwen2", R"("sliding_window": 32768, "use_sliding_window": false)"),
      config("qwen3", R"("head_dim": 32, "rope_scaling": {"rope_type": "yarn", "factor": 4.0})"),
      config("qwen3_moe", R"("head_dim": 32, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64,
                             "norm_topk_prob": true, "decoder_sparse_step": 1, "mlp_only_layers": [])"),
      config("gemma2", R"("head_dim": 32, "hidden_activation": "gelu_pytorch_tanh", "sliding_window": 4096,
                          "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0, "query_pre_attn_scalar": 32)"),
      config("gemma3_text", R"("head_dim": 32, "hidden_activation": "gelu_pytorch_tanh", "sliding_window": 512,
                               "layer_types": ["sliding_attention", "full_attention"], "rope_local_base_freq": 10000.0,
                               "rope_scaling": {"rope_type": "linear", "factor": 8.0}, "query_pre_attn_scalar": 32,
                               "attn_logit_softcapping": null, "final_logit_softcapping": null)"),
      config("gemma3_text", R"("sliding_window": 512, "sliding_window_pattern": 6)"),
      config("phi3", R"("original_max_position_embeddings": 256, "partial_rotary_factor": 1.0, "sliding_window": 2047,
                        "rope_scaling": {"type": "longrope", "long_factor": )" + kPhi3Factors +
                         R"(, "short_factor": )" + kPhi3Factors + "}"),
      config("phi3", R"("rope_scaling": {"type": "su", "long_factor": [2.0], "short_factor": [1.0]})"),
      // tokenizer.json then tokenizer_config.json, of equal length so the fuzzer's halves split them.
      R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}, "added_tokens": []})"
      R"({"bos_token": "a", "eos_token": "b", "chat_template": "{{ messages[0].content }}", "pad": "xxxx"})",
  };
  size_t i = 0;
  for (const std::string& s : seeds)
    if (!th::fuzz::write_seed(*dir, i++, s)) return 1;
  return 0;
}
