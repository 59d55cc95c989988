// Encrypted model files: weights that are useless if copied off the disk.
//
// An envelope holds a GGUF file encrypted with a random 256-bit data key,
// which is itself wrapped (AES-256-GCM) by a key-encryption key (KEK) kept
// elsewhere: a file, an environment variable or a command's output. Rekeying
// re-wraps the data key and leaves the weights alone.
//
// Layout (little-endian; docs/CONVENTIONS.md has the same):
//   0   8  magic "TKHVENC1"
//   8   4  format version (1)
//   12  4  chunk size (plaintext bytes per chunk; the last may be shorter)
//   16  8  plaintext size
//   24 32  SHA-256 of the plaintext
//   56  7  nonce prefix (random per file), then 1 zero byte
//   -- bytes 0..63 are the header every tag authenticates (GCM's AAD) --
//   64 12  wrap nonce
//   76 32  wrapped data key (AES-256-GCM under the KEK)
//   108 16 its tag
//   124 4  zero
//   128 .. chunks: ciphertext, then its 16-byte GCM tag, under the data key with
//          nonce = prefix(7) || chunk index (4, big-endian) || last-chunk flag (1)
// A changed byte anywhere fails a tag or the size check; a missing, extra or
// moved chunk fails its nonce (index, last flag); a wrong KEK fails the unwrap.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/mapped_file.h"
#include "base/status.h"

namespace th {

class GgufFile;

inline constexpr size_t kEnvelopeHeaderBytes = 128;
inline constexpr size_t kEnvelopeTagBytes = 16;

/// @brief How long a "cmd:" key helper may take: a vault or KMS client answers in well
/// under a second; 10 s covers a slow network without letting a hung one hang serve.
inline constexpr std::chrono::milliseconds kKeyCommandTimeout{10'000};

/// @brief A 256-bit key-encryption key.
struct Kek {
  std::array<uint8_t, 32> bytes{};
};

/// @brief Reads a KEK from `spec`: "env:NAME" (the variable holds 64 hex digits),
/// "cmd:COMMAND" (its stdout: 64 hex digits, or exactly 32 raw bytes), or a file path (the
/// same two forms; a trailing newline is fine). A command that has not finished within
/// `command_timeout` is killed (its process group) and the key refused; one that fails
/// says "exited with status N" or "killed by signal S".
Result<Kek> load_kek(const std::string& spec,
                     std::chrono::milliseconds command_timeout = kKeyCommandTimeout);
/// @brief A fresh random KEK written as 64 hex digits to `path` (created 0600, never overwritten).
Status write_new_kek(const std::string& path);

/// @brief True when `data` starts with the envelope's magic.
bool is_encrypted_model(const uint8_t* data, size_t size);

struct EnvelopeOptions {
  size_t chunk_bytes = 4u << 20;  // 4 MiB
};

/// @brief Encrypts a plaintext image under a fresh data key wrapped by `kek`.
Result<std::vector<uint8_t>> encrypt_model(const uint8_t* plain, size_t size, const Kek& kek, EnvelopeOptions o = {});
/// @brief Encrypts the file `in` into `out` (written to a temporary name, then renamed).
Status encrypt_model_file(const std::string& in, const std::string& out, const Kek& kek, EnvelopeOptions o = {});

/// @brief Verifies and decrypts an envelope into fresh memory, `threads` chunks at a time (0:
/// one per hardware thread). Every chunk's tag and the plaintext's digest are checked before
/// anything is returned; any failure is a one-line error naming the first bad chunk.
Result<MappedFile> decrypt_model(const uint8_t* data, size_t size, const Kek& kek, const std::string& name,
                                 int threads = 0);

/// @brief Re-wraps the data key of the envelope at `path` from `old_kek` to `new_kek`, in place
/// (only the 64 bytes of the wrap change; the weights are not touched).
Status rekey_model_file(const std::string& path, const Kek& old_kek, const Kek& new_kek);

/// @brief Opens a model for `generate` and `serve`: a Hugging Face folder (format/hf_folder.h)
/// or a plain GGUF as it is; an envelope
/// decrypted with the KEK `kek_spec` names (an error when it is empty). A KEK given for a
/// plain file is an error too (a deployment that expects encryption must not load plaintext
/// silently).
Result<GgufFile> open_model(const std::string& path, const std::string& kek_spec);

}  // namespace th
