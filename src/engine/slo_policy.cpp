#include "engine/slo_policy.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "base/priority.h"

namespace th {

namespace {

Result<double> parse_ms(const std::string& text, const std::string& what) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (...) {
    used = 0;
  }
  if (text.empty() || used != text.size() || !(v > 0) || !std::isfinite(v) || v > 3.6e6)
    return Status::errorf(what, ": '", text, "' is not a number of milliseconds in (0, 3600000]");
  return v / 1000.0;
}

}  // namespace

Result<SloClassTargets> parse_slo_targets(const std::string& text, const std::string& flag) {
  SloClassTargets t;
  if (text.empty()) return t;
  if (text.find('=') == std::string::npos) {
    TH_ASSIGN_OR_RETURN(double s, parse_ms(text, flag));
    t.all = s;
    return t;
  }
  for (size_t at = 0; at <= text.size();) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    at = comma + 1;
    const size_t eq = item.find('=');
    if (eq == std::string::npos)
      return Status::errorf(flag, ": '", item, "' is not CLASS=MS (e.g. high=40,normal=80,low=200)");
    const std::string name = item.substr(0, eq);
    std::optional<int32_t> p = priority_from_name(name);
    if (!p) {
      size_t used = 0;
      try {
        const long v = std::stol(name, &used);
        if (used == name.size() && v >= INT32_MIN && v <= INT32_MAX) p = static_cast<int32_t>(v);
      } catch (...) {
      }
    }
    if (!p) return Status::errorf(flag, ": '", name, "' is not a priority (high, normal, low or a number)");
    if (t.by_priority.count(*p)) return Status::errorf(flag, ": class '", name, "' given twice");
    TH_ASSIGN_OR_RETURN(double s, parse_ms(item.substr(eq + 1), flag + " " + name));
    t.by_priority[*p] = s;
  }
  return t;
}

SloStepLimits size_step(const StepCostModel& cost, const SloStepInput& in) {
  SloStepLimits out{in.token_budget, in.max_seqs, 0, false};
  if (!in.tpot || !cost.ready()) return out;
  const auto& c = cost.coefficients();  // c0, per decode, per prompt token, per KV position
  const double target = *in.tpot * kSloMargin;
  // Sequences: as many as a decode-only step within the target carries, each reading the KV
  // the running decodes read on average (or, with none yet, the queued prompts' positions).
  const double kv_per_decode = in.decodes > 0 ? static_cast<double>(in.decode_kv) / static_cast<double>(in.decodes)
                                              : static_cast<double>(in.prompt_context);
  const double per_seq = c[1] + c[3] * kv_per_decode;
  if (per_seq > 0) {
    const double fits = std::floor((target - c[0]) / per_seq);
    const int64_t m = fits > static_cast<double>(in.max_seqs) ? in.max_seqs : static_cast<int64_t>(std::max(0.0, fits));
    out.max_seqs = std::clamp<int64_t>(std::max(m, in.running), 1, in.max_seqs);
  }
  if (in.decodes == 0) {
    out.sized = true;  // nobody's TPOT at stake: the prompts get the whole static budget
    out.predicted_seconds = cost.predict({0, in.token_budget, in.token_budget * in.prompt_context});
    return out;
  }
  // Prompt tokens: the time the decodes leave.
  const double decode_time = cost.predict({in.decodes, 0, in.decode_kv});
  const double per_prompt = c[2] + c[3] * static_cast<double>(in.prompt_context);
  int64_t prompt = in.token_budget;
  if (per_prompt > 0) {
    const double fits = std::floor((target - decode_time) / per_prompt);
    prompt = fits > static_cast<double>(in.token_budget) ? in.token_budget : static_cast<int64_t>(std::max(0.0, fits));
  }
  prompt = std::max(prompt, kSloMinChunk);
  out.token_budget = std::clamp<int64_t>(in.decodes + prompt, 1, std::max(in.token_budget, in.decodes + kSloMinChunk));
  out.predicted_seconds = cost.predict({in.decodes, out.token_budget - in.decodes,
                                        in.decode_kv + (out.token_budget - in.decodes) * in.prompt_context});
  out.sized = true;
  return out;
}

}  // namespace th
