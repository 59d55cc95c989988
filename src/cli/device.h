// --device: which backend a verb computes on (generate, serve, bench model).
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "backend/backend.h"
#include "base/status.h"

namespace th::cli {

/// @brief Adds --device (cpu | cuda | auto) to app, into *device (default cpu).
void add_device_option(CLI::App& app, std::string* device);

/// @brief The backend `device` names: cpu with `cpu`'s options; cuda on the first GPU, or
/// an error that says why there is none; auto: cuda where a GPU answers, else cpu.
Result<std::unique_ptr<Backend>> make_device_backend(const std::string& device, const CpuBackendOptions& cpu);

}  // namespace th::cli
