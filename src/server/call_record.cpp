#include "server/call_record.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "audit/audit_log.h"
#include "pii/pii_redactor.h"

namespace th::server {

CallRecord refusal_record(std::string_view request_id, std::string_view method, std::string_view path,
                          std::string_view client, const ApiKey* key, std::string_view model, int status, std::string_view reason,
                          int64_t bytes_out) {
  CallRecord r;
  r.time = std::chrono::system_clock::now();
  r.request_id = request_id;
  r.method = method;
  r.path = path;
  r.client = client;
  r.key = key;
  r.tenant = key ? key->tenant : "";
  r.model = model;
  r.status = status;
  r.outcome = reason;
  r.bytes_out = bytes_out;
  return r;
}

CallRecord call_record(const Call& c, std::string_view model) {
  CallRecord r;
  r.time = std::chrono::system_clock::now();
  r.request_id = c.request_id;
  r.method = "POST";
  r.path = c.path;
  r.tenant = c.tenant;
  r.client = c.client;
  r.key = c.key;
  r.model = model;
  r.priority = c.req.priority;
  r.status = c.status ? c.status : 499;  // 499: the client went away first (nginx's code)
  r.outcome = c.choices.empty() ? "error" : c.choices.front().finish_reason;
  if (!c.choices.empty()) r.finish_reason = c.choices.front().finish_reason;
  double queue = -1, ttft = -1;
  for (const std::vector<int32_t>& p : c.prompt_ids) r.prompt_tokens += static_cast<int64_t>(p.size());
  for (const Choice& ch : c.choices) {
    r.completion_tokens += static_cast<int64_t>(ch.token_ids.size());
    r.cached_tokens = std::max(r.cached_tokens, ch.metrics.prefix_hit_tokens);
    if (ch.metrics.queue_seconds >= 0) queue = queue < 0 ? ch.metrics.queue_seconds : std::min(queue, ch.metrics.queue_seconds);
    if (ch.metrics.ttft_seconds >= 0) ttft = ttft < 0 ? ch.metrics.ttft_seconds : std::min(ttft, ch.metrics.ttft_seconds);
  }
  r.queue_ms = queue < 0 ? -1 : queue * 1e3;
  r.ttft_ms = ttft < 0 ? -1 : ttft * 1e3;
  r.e2e_ms = std::chrono::duration<double, std::milli>(ApiClock::now() - c.received).count();
  r.bytes_out = c.bytes_out;
  r.prompt_sha256 = audit::audit_texts_digest(c.prompt_texts);
  std::vector<std::string> outputs;
  for (const Choice& ch : c.choices) outputs.push_back(ch.text);
  r.output_sha256 = audit::audit_texts_digest(outputs);
  return r;
}

AccessRecord access_record(const CallRecord& r) {
  AccessRecord a;
  a.time = r.time;
  a.request_id = r.request_id;
  a.method = r.method;
  a.path = pii::redact_for_log(r.path);  // logs never hold personal data
  a.status = r.status;
  a.tenant = r.tenant;
  a.prompt_tokens = r.prompt_tokens;
  a.completion_tokens = r.completion_tokens;
  a.cached_tokens = r.cached_tokens;
  a.queue_ms = r.queue_ms;
  a.ttft_ms = r.ttft_ms;
  a.e2e_ms = r.e2e_ms;
  a.finish_reason = r.finish_reason;
  a.bytes_out = r.bytes_out;
  a.client = r.client;
  return a;
}

audit::AuditEntry audit_entry(const CallRecord& r) {
  audit::AuditEntry e;
  e.time = r.time;
  e.request_id = r.request_id;
  e.tenant = r.tenant;
  if (r.key) e.key_id = audit::audit_key_id(r.key->key);
  e.route = pii::redact_for_log(r.path);
  e.model = r.model;
  e.priority = r.priority;
  e.status = r.status;
  e.outcome = r.outcome;
  e.prompt_tokens = static_cast<uint64_t>(r.prompt_tokens);
  e.completion_tokens = static_cast<uint64_t>(r.completion_tokens);
  e.latency_us = r.e2e_ms < 0 ? 0 : static_cast<uint64_t>(r.e2e_ms * 1e3);
  e.prompt_sha256 = r.prompt_sha256;
  e.output_sha256 = r.output_sha256;
  return e;
}

void write_record(const CallRecord& r, AccessLog* access, audit::AuditLog* audit) {
  if (audit) {
    if (Result<uint64_t> a = audit->append(audit_entry(r)); !a.ok())
      std::fprintf(stderr, "tokenhive serve: audit log: %s\n", a.message().c_str());
  }
  if (access) access->write(access_record(r));
}

}  // namespace th::server
