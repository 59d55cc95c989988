// Writes seed inputs for api_keys_fuzz into the directory given as argv[1]:
// key files covering each feature and each error of the format.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  namespace fs = std::filesystem;
  const fs::path dir = argv[1];
  fs::create_directories(dir);
  const std::vector<std::string> seeds = {
      "sk-aaaaaaaaaaaaaaaa acme\n",
      "# keys\n\nsk-aaaaaaaaaaaaaaaa acme max_priority=normal rpm=60 tpm=12000\n"
      "sk-bbbbbbbbbbbbbbbb beta.team-1\tmax_priority=-3 tpm=0.5 # comment\r\n",
      "Bearer sk-cccccccccccccccc\nsk-cccccccccccccccc t max_priority=low rpm=1\n",
      "sk-aaaaaaaaaaaaaaaa acme\nsk-aaaaaaaaaaaaaaaa other\n",
      "short acme\n",
      "sk-aaaaaaaaaaaaaaaa bad/tenant\n",
      "sk-aaaaaaaaaaaaaaaa t rpm=1 rpm=2 max_priority=urgent tpm=-1\n",
      "sk-aaaaaaaaaaaaaaaa\n",
      "# nothing\n",
      "sk-aaaaaaaaaaaaaaaa t max_priority=high rpm=1000000000000 tpm=0.000001\n",
  };
  for (size_t i = 0; i < seeds.size(); ++i) {
    std::ofstream out(dir / ("seed_" + std::to_string(i)), std::ios::binary);
    out << seeds[i];
    if (!out) {
      std::fprintf(stderr, "make_api_keys_corpus: cannot write seed %zu\n", i);
      return 1;
    }
  }
  return 0;
}
