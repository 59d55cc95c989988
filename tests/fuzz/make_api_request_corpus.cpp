// Writes seed inputs for api_request_fuzz into the directory given as argv[1]:
// each is the endpoint byte (0 completions, 1 chat, 2 generate; 0x80 added:
// small limits) and a request body covering some fields, valid or one rule
// broken.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "corpus_writer.h"

int main(int argc, char** argv) {
  const std::optional<std::filesystem::path> corpus = th::fuzz::corpus_dir(argc, argv);
  if (!corpus) return 2;
  const std::filesystem::path& dir = *corpus;
  const std::vector<std::pair<char, std::string>> seeds = {
      {0, R"({"model":"m","prompt":"Once upon a time","max_tokens":16,"temperature":0.7,"top_p":0.9})"},
      {0, R"({"model":"m","prompt":["a","b"],"n":2,"best_of":2,"logprobs":3,"echo":true,"stop":["\n","END"]})"},
      {0, R"({"model":"m","prompt":[1,2,3],"seed":-5,"stop_token_ids":[2,7],"ignore_eos":true,"priority":"high"})"},
      {0, R"({"model":"m","prompt":[[1,2],[3]],"top_k":-1,"min_p":0.05,"repetition_penalty":1.1,"compute_type":"fp32"})"},
      {0, R"({"model":"m","prompt":"x","presence_penalty":-2,"frequency_penalty":2,"user":"u","suffix":"","logit_bias":{}})"},
      {0, R"({"model":"m","prompt":"x","stream":true,"stream_options":{"include_usage":true},"max_tokens":1e400})"},
      {1, R"({"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]})"},
      {1, R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],"max_completion_tokens":8})"},
      {1, R"({"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"1","content":"42"}],"add_generation_prompt":false})"},
      {1, R"({"model":"m","messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":5,"stream":true,"stream_options":{"include_usage":false}})"},
      {1, R"({"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:,"}}]}]})"},
      {1, R"({"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"auto"})"},
      {1, R"({"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"},"max_tokens":3,"max_completion_tokens":4})"},
      {1, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"caf\xc3\xa9 \\ud83d\\ude00 \xff\"}]}"},
      {2, R"({"prompt":"Hello","max_tokens":4,"return_token_ids":false})"},
      {2, R"({"prompt":[1,15043,29892],"temperature":0,"seed":42,"priority":-3,"compute_type":"auto"})"},
      {2, R"({"model":"tiny","prompt":["a"],"n":1})"},
      {2, R"({"prompt":"x","extra":[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]],"a":1,"a":2})"},
      {static_cast<char>(0x80), R"({"model":"m","prompt":["a","b","c"],"stop":["abcde"],"user":"123456789"})"},
      {static_cast<char>(0x81), R"({"model":"m","messages":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"user","content":"c"}],"n":3})"},
      {static_cast<char>(0x82), R"({"prompt":[1,2],"stop_token_ids":[1,2,3],"max_tokens":101,"logprobs":3})"},
  };
  for (size_t i = 0; i < seeds.size(); ++i)
    if (!th::fuzz::write_seed(dir, i, std::string(1, seeds[i].first) + seeds[i].second)) return 1;
  return 0;
}
