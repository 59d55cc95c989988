// tokenhive: one binary, many verbs (like git).
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "cli/verbs.h"

namespace th::cli {

int fail(std::string_view verb, const std::string& message) {
  std::fprintf(stderr, "tokenhive %.*s: %s\n", static_cast<int>(verb.size()), verb.data(), message.c_str());
  return 1;
}

}  // namespace th::cli

namespace {

struct Verb {
  std::string_view name;
  std::string_view help;
  int (*run)(int argc, char** argv);
};

constexpr Verb kVerbs[] = {
    {"generate", "generate text from a model", th::cli::run_generate},
    {"mkmodel", "write a synthetic Llama GGUF model of a real shape", th::cli::run_mkmodel},
    {"serve", "serve a model over HTTP (OpenAI-compatible API, metrics)", th::cli::run_serve},
    {"router", "route the API to many cells (load, prefix affinity, failover, migration)", th::cli::run_router},
    {"model", "encrypted model files (keygen, encrypt, rekey)", th::cli::run_model},
    {"bench", "measure speed against the machine's limits (bench model, bench engine)", th::cli::run_bench},
    {"audit", "the tamper-evident audit log: keygen, verify", th::cli::run_audit},
};

void usage(FILE* out) {
  std::fprintf(out, "usage: tokenhive <verb> [options]\n       tokenhive --version\n\nverbs:\n");
  for (const Verb& v : kVerbs)
    std::fprintf(out, "  %-10.*s %.*s\n", static_cast<int>(v.name.size()), v.name.data(),
                 static_cast<int>(v.help.size()), v.help.data());
  std::fprintf(out, "\n'tokenhive <verb> --help' for a verb's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  std::string_view verb = argv[1];
  if (verb == "--version" || verb == "-V") {
    std::printf("tokenhive %s\n", TH_VERSION);
    return 0;
  }
  if (verb == "--help" || verb == "-h" || verb == "help") {
    usage(stdout);
    return 0;
  }
  for (const Verb& v : kVerbs)
    if (v.name == verb) return v.run(argc - 1, argv + 1);
  std::fprintf(stderr, "tokenhive: unknown verb '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
