// Ed25519 keys (OpenSSL EVP): generation, PEM files (PKCS#8 private key,
// SubjectPublicKeyInfo public key: what `openssl genpkey -algorithm ed25519`
// and `openssl pkey -pubout` write), signing and verification.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "base/status.h"

typedef struct evp_pkey_st EVP_PKEY;

namespace th::audit {

using Ed25519Signature = std::array<uint8_t, 64>;
using Ed25519RawPublicKey = std::array<uint8_t, 32>;

struct EvpPkeyFree {
  void operator()(EVP_PKEY* k) const;
};
using EvpPkeyPtr = std::unique_ptr<EVP_PKEY, EvpPkeyFree>;

class Ed25519PublicKey {
 public:
  static Result<Ed25519PublicKey> from_raw(std::span<const uint8_t> raw);
  static Result<Ed25519PublicKey> from_pem(std::string_view pem);
  static Result<Ed25519PublicKey> load(const std::string& path);

  const Ed25519RawPublicKey& raw() const { return raw_; }
  std::string pem() const;
  bool verify(std::span<const uint8_t> message, const Ed25519Signature& signature) const;

 private:
  Ed25519PublicKey(EvpPkeyPtr key, const Ed25519RawPublicKey& raw);
  std::shared_ptr<EVP_PKEY> key_;  // immutable once made; shared so the key copies
  Ed25519RawPublicKey raw_{};
};

class Ed25519PrivateKey {
 public:
  static Result<Ed25519PrivateKey> generate();
  /// @brief From the 32-byte seed (RFC 8032's private key); tests and fuzzing.
  static Result<Ed25519PrivateKey> from_seed(std::span<const uint8_t> seed);
  static Result<Ed25519PrivateKey> from_pem(std::string_view pem);
  static Result<Ed25519PrivateKey> load(const std::string& path);

  const Ed25519PublicKey& public_key() const { return public_; }
  std::string pem() const;  // unencrypted PKCS#8
  Ed25519Signature sign(std::span<const uint8_t> message) const;

 private:
  Ed25519PrivateKey(EvpPkeyPtr key, Ed25519PublicKey pub);
  std::shared_ptr<EVP_PKEY> key_;
  Ed25519PublicKey public_;
};

/// @brief Writes `data` to a new file `path` with `mode` (O_EXCL: never over an
/// existing file), fsynced.
Status write_new_file(const std::string& path, std::string_view data, unsigned mode);

}  // namespace th::audit
