// Why a request's generation ended.
#pragma once

#include <cstdint>
#include <string_view>

namespace th {

enum class FinishReason : uint8_t {
  Stop,       // an end-of-generation or stop token was sampled
  Length,     // max_tokens, or the context is full
  Cancelled,  // the caller cancelled, dropped its stream, or the engine stopped
  Deadline,   // the request's deadline passed first
  Error,      // the engine failed the request (the event says why)
};

constexpr std::string_view finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Deadline: return "deadline";
    case FinishReason::Error: return "error";
  }
  return "?";
}

}  // namespace th
