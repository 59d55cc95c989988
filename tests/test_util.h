// Paths the tests need: the shared models and vectors, the source tree, the binary.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

namespace th::test {

/// A file under ../shared (overridable with $TOKENHIVE_SHARED).
inline std::string shared_path(const std::string& rel) {
  const char* env = std::getenv("TOKENHIVE_SHARED");
  return std::string(env && *env ? env : TH_SHARED_DIR) + "/" + rel;
}

inline std::string source_path(const std::string& rel) { return std::string(TH_SOURCE_DIR) + "/" + rel; }

/// A scratch file path unique to this process (test binaries and ctest jobs run side by side).
inline std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/th_" + std::to_string(::getpid()) + "_" + name;
}

/// The shared stories260K model, the tests' default model.
inline std::string stories() { return shared_path("models/stories260K.gguf"); }

/// The built `tokenhive` binary.
inline std::string binary_path() { return TH_BINARY; }

}  // namespace th::test
