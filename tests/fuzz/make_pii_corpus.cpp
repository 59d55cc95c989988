// Writes seed inputs for pii_fuzz into the directory given as argv[1]: two control bytes
// (kinds and mode; split seed), then each row of tests/data/pii/corpus.tsv, and a few mixed
// texts with every kind, near-misses and pseudonym tokens.
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
  std::vector<std::string> texts = {
      "Hi, I'm Li Wei (liwei@example.cn, 电话13812345678). ID 11010519491231002X; card 4111 1111 1111 1111, IBAN "
      "DE89 3704 0044 0532 0130 00. Server 10.0.0.1 / 2001:db8::1. Version 1.2.3.4.5 costs $12.99 at 12:30.",
      "+1 (415) 555-2671, +44 (0)20 7946 0958; 138-1234-5678 and 138 1234 5678 or 13812345678,13987654321.",
      "fe80::1ff:fe23:4567:890a [2001:db8::ff00:42:8329]:443 ::ffff:192.0.2.128 12:30:45 std::vector",
      "reply: <EMAIL_1> <PHONE_12> <CN_ID_3> <EMAIL_ <a> <",
  };
  std::ifstream in(std::string(TH_SOURCE_DIR) + "/tests/data/pii/corpus.tsv");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t t1 = line.find('\t'), t2 = line.find('\t', t1 + 1);
    if (t2 != std::string::npos) texts.push_back(line.substr(t1 + 1, t2 - t1 - 1));
  }
  for (size_t i = 0; i < texts.size(); ++i) {
    // Alternate mask and pseudonymize; every kind.
    const std::string seed = std::string(1, '\0') + static_cast<char>(i % 256) + texts[i];
    if (!th::fuzz::write_seed(dir, i, seed)) return 1;
  }
  return 0;
}
