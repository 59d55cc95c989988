#include <cstdio>

#include "cli/verbs.h"

namespace th::cli {
int run_mkmodel(int, char**) {
  std::fprintf(stderr, "tokenhive mkmodel: not built yet\n");
  return 1;
}
}  // namespace th::cli
