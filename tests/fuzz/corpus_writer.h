// What the seed-corpus writers (tests/fuzz/make_<stem>_corpus.cpp) share: their one
// argument, the directory to fill, and writing seeds into it as seed_0, seed_1, ...
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>

namespace th::fuzz {

/// @brief The corpus directory named by argv[1], created; nullopt (after a usage line)
/// when the arguments are not exactly one directory.
inline std::optional<std::filesystem::path> corpus_dir(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return std::nullopt;
  }
  std::filesystem::path dir = argv[1];
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "%s: cannot create %s: %s\n", argv[0], argv[1], ec.message().c_str());
    return std::nullopt;
  }
  return dir;
}

/// @brief Writes `bytes` to dir/seed_<index>; false (after a message) when it cannot.
inline bool write_seed(const std::filesystem::path& dir, size_t index, std::string_view bytes) {
  const std::filesystem::path path = dir / ("seed_" + std::to_string(index));
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) std::fprintf(stderr, "cannot write seed %s\n", path.c_str());
  return static_cast<bool>(out);
}

}  // namespace th::fuzz
