// Where the model comes from: the -m flag, else $TOKENHIVE_MODEL, else models/default.gguf.
#pragma once

#include <string>

#include "base/status.h"

namespace th {

/// @brief The model path to use; an error names every place that was tried.
Result<std::string> resolve_model_path(const std::string& flag);

/// @brief The shared test-vector folder: $TOKENHIVE_SHARED, else ../shared beside the
/// current directory, else beside the executable's source checkout; "" when none exists.
std::string find_shared_dir();

}  // namespace th
