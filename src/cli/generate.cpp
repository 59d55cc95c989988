#include <cstdio>

#include "cli/verbs.h"

namespace th::cli {
int run_generate(int, char**) {
  std::fprintf(stderr, "tokenhive generate: not built yet\n");
  return 1;
}
}  // namespace th::cli
