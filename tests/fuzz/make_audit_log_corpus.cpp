// Writes seed inputs for audit_log_fuzz into the directory given as argv[1]:
// valid logs of several sizes and checkpoint intervals (signed with the
// target's fixed key), a checkpoint copy, and broken variants (torn, cut,
// flipped) so that every branch of the scanner starts covered.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "audit_log_fuzz_util.h"
#include "corpus_writer.h"

int main(int argc, char** argv) {
  using th::audit::AuditFileRole;
  const std::optional<std::filesystem::path> corpus = th::fuzz::corpus_dir(argc, argv);
  if (!corpus) return 2;
  const std::filesystem::path& dir = *corpus;
  std::vector<std::vector<uint8_t>> seeds = {
      th::fuzz::build_audit_log(0, 0),  th::fuzz::build_audit_log(1, 1), th::fuzz::build_audit_log(5, 2),
      th::fuzz::build_audit_log(9, 4),  th::fuzz::build_audit_log(12, 5, AuditFileRole::kCheckpointCopy),
      th::fuzz::build_audit_log(9, 4, AuditFileRole::kCheckpointCopy)};
  const std::vector<uint8_t> base = th::fuzz::build_audit_log(6, 3);
  seeds.push_back(std::vector<uint8_t>(base.begin(), base.end() - 9));   // torn
  seeds.push_back(std::vector<uint8_t>(base.begin(), base.begin() + 5)); // torn magic
  std::vector<uint8_t> flipped = base;
  flipped[flipped.size() / 2] ^= 0x10;
  seeds.push_back(flipped);
  for (size_t i = 0; i < seeds.size(); ++i) {
    const std::string_view bytes(reinterpret_cast<const char*>(seeds[i].data()), seeds[i].size());
    if (!th::fuzz::write_seed(dir, i, bytes)) return 1;
  }
  return 0;
}
