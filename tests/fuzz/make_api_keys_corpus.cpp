// Writes seed inputs for api_keys_fuzz into the directory given as argv[1]:
// key files covering each feature and each error of the format.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "corpus_writer.h"

int main(int argc, char** argv) {
  const std::optional<std::filesystem::path> corpus = th::fuzz::corpus_dir(argc, argv);
  if (!corpus) return 2;
  const std::filesystem::path& dir = *corpus;
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
  for (size_t i = 0; i < seeds.size(); ++i)
    if (!th::fuzz::write_seed(dir, i, seeds[i])) return 1;
  return 0;
}
