// Paths the tests need: the shared models and vectors, the source tree, the binary.
#pragma once

#include <cstdlib>
#include <string>

namespace th::test {

/// A file under ../shared (overridable with $TOKENHIVE_SHARED).
inline std::string shared_path(const std::string& rel) {
  const char* env = std::getenv("TOKENHIVE_SHARED");
  return std::string(env && *env ? env : TH_SHARED_DIR) + "/" + rel;
}

inline std::string source_path(const std::string& rel) { return std::string(TH_SOURCE_DIR) + "/" + rel; }

/// The built `tokenhive` binary.
inline std::string binary_path() { return TH_BINARY; }

}  // namespace th::test
