#include "audit/ed25519.h"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/unique_fd.h"

namespace th::audit {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

std::string openssl_error() {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

// A PEM with a passphrase must fail, not prompt on the terminal.
int no_passphrase(char*, int, int, void*) { return -1; }

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::errorf(path, ": cannot open: ", std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::errorf(path, ": cannot read");
  return ss.str();
}

std::string write_pem(EVP_PKEY* key, bool private_key) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new(BIO_s_mem()));
  const int ok = private_key ? PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr)
                             : PEM_write_bio_PUBKEY(bio.get(), key);
  if (!bio || ok != 1) std::abort();
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

Result<Ed25519RawPublicKey> raw_public(EVP_PKEY* key) {
  Ed25519RawPublicKey raw{};
  size_t len = raw.size();
  if (EVP_PKEY_get_raw_public_key(key, raw.data(), &len) != 1 || len != raw.size())
    return Status::errorf("cannot read the Ed25519 public key: ", openssl_error());
  return raw;
}

}  // namespace

void EvpPkeyFree::operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }

Ed25519PublicKey::Ed25519PublicKey(EvpPkeyPtr key, const Ed25519RawPublicKey& raw)
    : key_(std::move(key)), raw_(raw) {}

Result<Ed25519PublicKey> Ed25519PublicKey::from_raw(std::span<const uint8_t> raw) {
  if (raw.size() != 32) return Status::errorf("an Ed25519 public key is 32 bytes, not ", raw.size());
  EvpPkeyPtr key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, raw.data(), raw.size()));
  if (!key) return Status::errorf("not an Ed25519 public key: ", openssl_error());
  Ed25519RawPublicKey r{};
  std::memcpy(r.data(), raw.data(), r.size());
  return Ed25519PublicKey(std::move(key), r);
}

Result<Ed25519PublicKey> Ed25519PublicKey::from_pem(std::string_view pem) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  EvpPkeyPtr key(bio ? PEM_read_bio_PUBKEY(bio.get(), nullptr, no_passphrase, nullptr) : nullptr);
  if (!key) {
    ERR_clear_error();
    return Status::error("not a PEM public key");
  }
  if (EVP_PKEY_id(key.get()) != EVP_PKEY_ED25519) return Status::error("the public key is not Ed25519");
  TH_ASSIGN_OR_RETURN(Ed25519RawPublicKey raw, raw_public(key.get()));
  return Ed25519PublicKey(std::move(key), raw);
}

Result<Ed25519PublicKey> Ed25519PublicKey::load(const std::string& path) {
  TH_ASSIGN_OR_RETURN(std::string pem, read_file(path));
  Result<Ed25519PublicKey> k = from_pem(pem);
  if (!k.ok()) return Status::errorf(path, ": ", k.message());
  return k;
}

std::string Ed25519PublicKey::pem() const { return write_pem(key_.get(), false); }

bool Ed25519PublicKey::verify(std::span<const uint8_t> message, const Ed25519Signature& signature) const {
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  const bool ok = ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key_.get()) == 1 &&
                  EVP_DigestVerify(ctx.get(), signature.data(), signature.size(), message.data(),
                                   message.size()) == 1;
  ERR_clear_error();
  return ok;
}

Ed25519PrivateKey::Ed25519PrivateKey(EvpPkeyPtr key, Ed25519PublicKey pub)
    : key_(std::move(key)), public_(std::move(pub)) {}

Result<Ed25519PrivateKey> Ed25519PrivateKey::generate() {
  EvpPkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"));
  if (!key) return Status::errorf("cannot generate an Ed25519 key: ", openssl_error());
  TH_ASSIGN_OR_RETURN(Ed25519RawPublicKey raw, raw_public(key.get()));
  TH_ASSIGN_OR_RETURN(Ed25519PublicKey pub, Ed25519PublicKey::from_raw(raw));
  return Ed25519PrivateKey(std::move(key), std::move(pub));
}

Result<Ed25519PrivateKey> Ed25519PrivateKey::from_seed(std::span<const uint8_t> seed) {
  if (seed.size() != 32) return Status::errorf("an Ed25519 seed is 32 bytes, not ", seed.size());
  EvpPkeyPtr key(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, seed.data(), seed.size()));
  if (!key) return Status::errorf("not an Ed25519 seed: ", openssl_error());
  TH_ASSIGN_OR_RETURN(Ed25519RawPublicKey raw, raw_public(key.get()));
  TH_ASSIGN_OR_RETURN(Ed25519PublicKey pub, Ed25519PublicKey::from_raw(raw));
  return Ed25519PrivateKey(std::move(key), std::move(pub));
}

Result<Ed25519PrivateKey> Ed25519PrivateKey::from_pem(std::string_view pem) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  EvpPkeyPtr key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, no_passphrase, nullptr) : nullptr);
  if (!key) {
    ERR_clear_error();
    return Status::error("not an unencrypted PEM private key");
  }
  if (EVP_PKEY_id(key.get()) != EVP_PKEY_ED25519) return Status::error("the private key is not Ed25519");
  TH_ASSIGN_OR_RETURN(Ed25519RawPublicKey raw, raw_public(key.get()));
  TH_ASSIGN_OR_RETURN(Ed25519PublicKey pub, Ed25519PublicKey::from_raw(raw));
  return Ed25519PrivateKey(std::move(key), std::move(pub));
}

Result<Ed25519PrivateKey> Ed25519PrivateKey::load(const std::string& path) {
  TH_ASSIGN_OR_RETURN(std::string pem, read_file(path));
  Result<Ed25519PrivateKey> k = from_pem(pem);
  if (!k.ok()) return Status::errorf(path, ": ", k.message());
  return k;
}

std::string Ed25519PrivateKey::pem() const { return write_pem(key_.get(), true); }

Ed25519Signature Ed25519PrivateKey::sign(std::span<const uint8_t> message) const {
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  Ed25519Signature sig{};
  size_t len = sig.size();
  // Signing with a valid key over memory cannot fail short of allocation failure.
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key_.get()) != 1 ||
      EVP_DigestSign(ctx.get(), sig.data(), &len, message.data(), message.size()) != 1 || len != sig.size())
    std::abort();
  return sig;
}

Status write_new_file(const std::string& path, std::string_view data, unsigned mode) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (!fd) return Status::errorf(path, ": cannot create: ", std::strerror(errno));
  // The umask may have cleared bits we asked for; never more than `mode`.
  if (::fchmod(fd.get(), mode) != 0) return Status::errorf(path, ": cannot chmod: ", std::strerror(errno));
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t w = ::write(fd.get(), data.data() + done, data.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return Status::errorf(path, ": cannot write: ", std::strerror(errno));
    done += static_cast<size_t>(w);
  }
  if (::fsync(fd.get()) != 0) return Status::errorf(path, ": cannot sync: ", std::strerror(errno));
  return ok_status();
}

}  // namespace th::audit
