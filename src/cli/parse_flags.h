// Flag parsing shared by the verbs: CLI11, with errors printed as one line
// "tokenhive VERB: problem (see --help)" and exit code 2.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <optional>

namespace th::cli {

/// @brief Parses argv; returns the exit code when the verb should stop now (--help, bad flags).
inline std::optional<int> parse_flags(CLI::App& app, const char* verb, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "tokenhive %s: %s (see --help)\n", verb, e.what());
    return 2;
  }
  return std::nullopt;
}

}  // namespace th::cli
