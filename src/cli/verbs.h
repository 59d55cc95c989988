// One function per verb; each takes argv starting at the verb's name and
// returns the process exit code.
#pragma once

#include <string>
#include <string_view>

namespace th::cli {

/// Prints "tokenhive <verb>: <message>" on stderr and returns 1, a failed verb's exit code.
int fail(std::string_view verb, const std::string& message);

int run_generate(int argc, char** argv);
int run_mkmodel(int argc, char** argv);
int run_bench(int argc, char** argv);
int run_serve(int argc, char** argv);
int run_router(int argc, char** argv);
int run_model(int argc, char** argv);
int run_audit(int argc, char** argv);

}  // namespace th::cli
