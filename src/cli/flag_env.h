// Every flag of a verb also from the environment, as containers and systemd units set
// them: --kv-cache-mib from TOKENHIVE_KV_CACHE_MIB. A flag on the command line wins; --help
// lists each variable (CLI11 prints "(Env:NAME)").
#pragma once

#include <CLI/CLI.hpp>

#include <cctype>
#include <string>

namespace th::cli {

/// @brief TOKENHIVE_ and the flag's long name upper-cased, dashes as underscores.
inline std::string flag_env_name(const std::string& long_name) {
  std::string env = "TOKENHIVE_";
  for (char c : long_name) env += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return env;
}

/// @brief Gives every option of `app` with a long name (not --help) its environment
/// variable. Call after the options are added, before parsing.
inline void env_for_every_flag(CLI::App& app) {
  for (CLI::Option* o : app.get_options()) {
    if (o == app.get_help_ptr() || o == app.get_help_all_ptr() || o->get_lnames().empty()) continue;
    o->envname(flag_env_name(o->get_lnames().front()));
  }
}

}  // namespace th::cli
