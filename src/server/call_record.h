// One record per request, built once when it ends (answered, refused, or its
// client gone), from which both logs take their line: the access log (times,
// tokens, bytes, client) and the audit log (key id, digests of the prompt and
// of the output, never the text). A request refused before it became a Call
// (not ready, no key, a bad body) gets one too, from what is known of it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "audit/audit_record.h"
#include "server/access_log.h"
#include "server/api_call.h"

namespace th::audit {
class AuditLog;
}

namespace th::server {

struct CallRecord {
  std::chrono::system_clock::time_point time;  // when it ended
  std::string request_id, method, path, tenant, client;
  const ApiKey* key = nullptr;
  std::string model;
  int32_t priority = 0;
  int status = 0;
  std::string outcome;        // the audit log's: a finish reason, or why it was refused
  std::string finish_reason;  // the access log's: empty (null) for a refusal
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  double queue_ms = -1, ttft_ms = -1, e2e_ms = -1;  // negative: null
  int64_t bytes_out = 0;
  audit::Hash prompt_sha256{}, output_sha256{};  // zeros for a refusal
};

/// @brief The record of a request refused before it became a call.
CallRecord refusal_record(std::string_view request_id, std::string_view method, std::string_view path,
                          std::string_view client, const ApiKey* key, std::string_view model, int status, std::string_view reason,
                          int64_t bytes_out);
/// @brief The record of a call that is over; status 0 (nothing sent) is logged as 499.
CallRecord call_record(const Call& c, std::string_view model);

/// @brief The access log's line of `r` (the path with personal data redacted).
AccessRecord access_record(const CallRecord& r);
/// @brief The audit log's entry of `r`.
audit::AuditEntry audit_entry(const CallRecord& r);
/// @brief Writes `r` to each log given (either may be null). A failed audit append does
/// not fail the request: it is reported on stderr (the log refuses further appends, and
/// `audit verify` shows where it stopped).
void write_record(const CallRecord& r, AccessLog* access, audit::AuditLog* audit);

}  // namespace th::server
