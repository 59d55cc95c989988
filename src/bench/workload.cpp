#include "bench/workload.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

#include "base/priority.h"

namespace th::bench {

namespace {

// Common short English words: each is a single token, with its leading space, in the
// Llama 2 (SentencePiece), Llama 3 / GPT-4 (cl100k-like BPE), Mistral and Qwen vocabularies.
constexpr const char* kWords[] = {
    "the",   "of",    "and",   "to",    "in",    "is",    "was",   "for",   "on",    "that",  "with",  "as",
    "it",    "by",    "at",    "from",  "his",   "her",   "they",  "be",    "this",  "are",   "have",  "one",
    "not",   "but",   "had",   "all",   "were",  "when",  "we",    "there", "can",   "an",    "your",  "which",
    "their", "said",  "if",    "do",    "will",  "each",  "about", "how",   "up",    "out",   "them",  "then",
    "she",   "many",  "some",  "so",    "these", "would", "other", "into",  "has",   "more",  "two",   "like",
    "him",   "time",  "see",   "no",    "could", "make",  "than",  "first", "been",  "who",   "its",   "now",
    "people", "my",   "made",  "over",  "did",   "down",  "only",  "way",   "find",  "use",   "may",   "water",
    "long",  "little", "very", "after", "just",  "where", "most",  "know",  "get",   "through", "back", "much",
    "before", "go",   "good",  "new",   "our",   "used",  "me",    "man",   "too",   "any",   "day",   "same",
    "right", "look",  "think", "also",  "around", "another", "came", "come", "work", "three", "word",  "must",
    "because", "does", "part", "even",  "place", "well",  "such",  "here",  "take",  "why",   "help",  "put",
    "years", "away",  "again", "off",   "went",  "old",   "number", "great", "tell", "men",   "say",   "small",
    "every", "found", "still", "between", "name", "should", "home", "big",  "give",  "air",   "line",  "set",
    "own",   "under", "read",  "last",  "never", "us",    "left",  "end",   "along", "while", "might", "next",
    "sound", "below", "saw",   "something", "thought", "both", "few", "those", "always", "show", "large", "often",
    "together", "house", "world", "going", "want", "school", "important", "until", "form", "food", "keep", "children",
    "land",  "side",  "without", "once", "life",  "enough", "took", "four",  "head",  "above", "kind",  "began",
    "almost", "live", "page",  "got",   "need",  "far",   "hand",  "high",  "year",  "mother", "light", "country",
    "father", "let",  "night", "being", "second", "soon", "story", "since", "white", "days",  "ever",  "paper",
    "hard",  "near",  "better", "best", "across", "during", "today", "sure", "knew",  "try",   "told",  "young",
};
constexpr int64_t kNumWords = sizeof(kWords) / sizeof(kWords[0]);

// Draw streams, so that one request's lengths never depend on another's words.
constexpr uint64_t kStreamRequest = 1, kStreamPrefix = 2, kStreamPriority = 3;

std::string pick_priority(const PriorityMix& mix, uint64_t seed, int64_t index) {
  if (!mix.given) return "normal";
  BenchRng rng = BenchRng::for_item(seed, kStreamPriority, static_cast<uint64_t>(index));
  const double u = rng.uniform();
  double acc = 0;
  for (int c = 0; c < 3; ++c) {
    acc += mix.weight[c];
    if (u < acc && mix.weight[c] > 0) return kPriorityNames[c];
  }
  for (int c = 2; c >= 0; --c)  // rounding left u above the sum: the last class that has weight
    if (mix.weight[c] > 0) return kPriorityNames[c];
  return "normal";
}

class RandomWorkload : public Workload {
 public:
  explicit RandomWorkload(const WorkloadOptions& o)
      : o_(o), in_(length_range(o.input_len, o.range_ratio, 1)), out_(length_range(o.output_len, o.range_ratio, 1)) {}

  BenchRequest request(int64_t index) const override {
    BenchRng rng = BenchRng::for_item(o_.seed, kStreamRequest, static_cast<uint64_t>(index));
    BenchRequest r;
    r.index = index;
    r.input_tokens_hint = rng.uniform_int(in_.first, in_.second);
    r.max_tokens = rng.uniform_int(out_.first, out_.second);
    r.prompt = random_words(rng, r.input_tokens_hint);
    r.priority = pick_priority(o_.priorities, o_.seed, index);
    r.ignore_eos = o_.ignore_eos;
    return r;
  }
  std::string describe() const override {
    return cat("random: input ", in_.first, "..", in_.second, " tokens, output ", out_.first, "..", out_.second,
               " tokens, seed ", o_.seed);
  }

 private:
  WorkloadOptions o_;
  std::pair<int64_t, int64_t> in_, out_;
};

class SharedPrefixWorkload : public Workload {
 public:
  explicit SharedPrefixWorkload(const WorkloadOptions& o)
      : o_(o), in_(length_range(o.input_len, o.range_ratio, 1)), out_(length_range(o.output_len, o.range_ratio, 1)) {
    for (int64_t p = 0; p < o.num_prefixes; ++p) {
      BenchRng rng = BenchRng::for_item(o.seed, kStreamPrefix, static_cast<uint64_t>(p));
      prefixes_.push_back(random_words(rng, o.prefix_len));
    }
  }

  BenchRequest request(int64_t index) const override {
    BenchRng rng = BenchRng::for_item(o_.seed, kStreamRequest, static_cast<uint64_t>(index));
    BenchRequest r;
    r.index = index;
    const int64_t suffix = rng.uniform_int(in_.first, in_.second);
    r.max_tokens = rng.uniform_int(out_.first, out_.second);
    // Round robin: every prefix is used equally often and comes back every num_prefixes requests.
    r.prompt = prefixes_[static_cast<size_t>(index % o_.num_prefixes)] + " " + random_words(rng, suffix);
    r.input_tokens_hint = o_.prefix_len + suffix;
    r.priority = pick_priority(o_.priorities, o_.seed, index);
    r.ignore_eos = o_.ignore_eos;
    return r;
  }
  std::string describe() const override {
    return cat("shared-prefix: ", o_.num_prefixes, " prefixes of ", o_.prefix_len, " tokens, suffix ", in_.first,
               "..", in_.second, " tokens, output ", out_.first, "..", out_.second, " tokens, seed ", o_.seed);
  }

 private:
  WorkloadOptions o_;
  std::pair<int64_t, int64_t> in_, out_;
  std::vector<std::string> prefixes_;
};

struct JsonlItem {
  std::string prompt;
  int64_t max_tokens = 0;
  std::string priority;  // empty: drawn from the mix
};

class JsonlWorkload : public Workload {
 public:
  JsonlWorkload(const WorkloadOptions& o, std::vector<JsonlItem> items) : o_(o), items_(std::move(items)) {}

  BenchRequest request(int64_t index) const override {
    const JsonlItem& it = items_[static_cast<size_t>(index % static_cast<int64_t>(items_.size()))];
    BenchRequest r;
    r.index = index;
    r.prompt = it.prompt;
    // Words and punctuation: about one token per 4 bytes of English, the usual rule of thumb.
    r.input_tokens_hint = std::max<int64_t>(1, static_cast<int64_t>(it.prompt.size() + 3) / 4);
    r.max_tokens = it.max_tokens;
    r.priority = it.priority.empty() ? pick_priority(o_.priorities, o_.seed, index) : it.priority;
    r.ignore_eos = o_.ignore_eos;
    return r;
  }
  std::string describe() const override {
    return cat("jsonl: ", o_.dataset_path, " (", items_.size(), " prompts, in file order, cycled)");
  }

 private:
  WorkloadOptions o_;
  std::vector<JsonlItem> items_;
};

Result<std::vector<JsonlItem>> read_jsonl(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::errorf(path, ": cannot open");
  std::vector<JsonlItem> items;
  std::string line;
  for (int64_t no = 1; std::getline(in, line); ++no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    auto bad = [&](const std::string& what) { return Status::errorf(path, ":", no, ": ", what); };
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return bad("not valid JSON");
    if (!j.is_object()) return bad("must be a JSON object {\"prompt\": \"...\", \"max_tokens\": N}");
    JsonlItem it;
    auto p = j.find("prompt");
    if (p == j.end() || !p->is_string()) return bad("\"prompt\" must be a string");
    it.prompt = p->get<std::string>();
    auto m = j.find("max_tokens");
    if (m == j.end() || !m->is_number_integer() || m->get<int64_t>() < 1)
      return bad("\"max_tokens\" must be an integer >= 1");
    it.max_tokens = m->get<int64_t>();
    if (auto q = j.find("priority"); q != j.end() && !q->is_null()) {
      if (!q->is_string() || !priority_from_name(q->get_ref<const std::string&>()))
        return bad("\"priority\" must be \"high\", \"normal\" or \"low\"");
      it.priority = q->get<std::string>();
    }
    items.push_back(std::move(it));
  }
  if (in.bad()) return Status::errorf(path, ": read error");
  if (items.empty()) return Status::errorf(path, ": no prompts (one JSON object per line)");
  return items;
}

}  // namespace

std::string random_words(BenchRng& rng, int64_t n) {
  std::string s;
  s.reserve(static_cast<size_t>(n) * 6);
  for (int64_t i = 0; i < n; ++i) {
    if (i) s += ' ';
    s += kWords[rng.uniform_int(0, kNumWords - 1)];
  }
  return s;
}

std::pair<int64_t, int64_t> length_range(int64_t len, double ratio, int64_t min) {
  const int64_t lo = static_cast<int64_t>(std::floor(static_cast<double>(len) * (1.0 - ratio)));
  const int64_t hi = static_cast<int64_t>(std::ceil(static_cast<double>(len) * (1.0 + ratio)));
  return {std::max(lo, min), std::max(hi, min)};
}

Result<PriorityMix> parse_priority_mix(const std::string& text) {
  PriorityMix mix;
  mix.weight[1] = 0;
  mix.given = true;
  bool seen[3] = {false, false, false};
  std::stringstream ss(text);
  std::string part;
  auto bad = [&](const std::string& what) {
    return Status::errorf("--priority-mix: ", what, " (expected e.g. high=0.1,normal=0.8,low=0.1)");
  };
  while (std::getline(ss, part, ',')) {
    const size_t eq = part.find('=');
    if (eq == std::string::npos) return bad(cat("'", part, "' has no '='"));
    const std::string name = part.substr(0, eq), value = part.substr(eq + 1);
    const int c = priority_from_name(name).value_or(-2) + 1;  // the class index: high 0, normal 1, low 2
    if (c < 0) return bad(cat("unknown class '", name, "' (high, normal, low)"));
    if (seen[c]) return bad(cat("'", name, "' given twice"));
    seen[c] = true;
    size_t used = 0;
    double w = -1;
    try {
      w = std::stod(value, &used);
    } catch (...) {
      used = 0;
    }
    if (used != value.size() || value.empty() || !std::isfinite(w) || w < 0)
      return bad(cat("'", value, "' is not a weight >= 0"));
    mix.weight[c] = w;
  }
  const double sum = mix.weight[0] + mix.weight[1] + mix.weight[2];
  if (!(sum > 0)) return bad("the weights sum to 0");
  for (double& w : mix.weight) w /= sum;
  return mix;
}

Result<std::unique_ptr<Workload>> make_workload(const WorkloadOptions& o) {
  if (!(o.range_ratio >= 0 && o.range_ratio < 1)) return Status::error("--random-range-ratio must be in [0, 1)");
  if (o.kind == "random" || o.kind == "shared-prefix") {
    if (o.input_len < 1) return Status::error("--random-input-len must be >= 1");
    if (o.output_len < 1) return Status::error("--random-output-len must be >= 1");
    if (o.kind == "random") return std::unique_ptr<Workload>(std::make_unique<RandomWorkload>(o));
    if (o.prefix_len < 1) return Status::error("--prefix-len must be >= 1");
    if (o.num_prefixes < 1) return Status::error("--num-prefixes must be >= 1");
    return std::unique_ptr<Workload>(std::make_unique<SharedPrefixWorkload>(o));
  }
  if (o.kind == "jsonl") {
    if (o.dataset_path.empty()) return Status::error("--dataset-name jsonl needs --dataset-path FILE");
    TH_ASSIGN_OR_RETURN(std::vector<JsonlItem> items, read_jsonl(o.dataset_path));
    return std::unique_ptr<Workload>(std::make_unique<JsonlWorkload>(o, std::move(items)));
  }
  return Status::errorf("unknown workload '", o.kind, "' (random, shared-prefix, jsonl)");
}

}  // namespace th::bench
