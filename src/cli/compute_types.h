// The compute types a verb's flags ask for (serve --compute-types, generate and bench model
// --compute-type), loaded into the model with each copy's memory printed.
#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/compute_type.h"
#include "model/llama_model.h"

namespace th::cli {

/// @brief What --help says each type costs.
inline constexpr std::string_view kComputeTypeCosts =
    "each listed type keeps its own copy of the weight matrices, converted once at load: fp32 4 bytes a weight, "
    "fp16 and bf16 2, fp8 1.03 (E4M3, 33 bytes per 32); native (the file's own) and a type every matrix already "
    "is cost nothing";

/// @brief Converts the model's weights into each of `types` (native needs nothing), printing
/// "<verb>: compute type T: N MiB ..." to stderr, and calls on_loaded(type, bytes) for native
/// and each type loaded. A type that cannot be loaded is printed and skipped when
/// `keep_going` (the model remembers why, for the requests that ask for it), else returned.
Status load_compute_types(LlamaModel& model, const std::vector<ComputeType>& types, std::string_view verb,
                          bool keep_going, const std::function<void(ComputeType, size_t)>& on_loaded = {});

}  // namespace th::cli
