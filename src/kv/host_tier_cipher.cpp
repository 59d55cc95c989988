#include "kv/host_tier_cipher.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <cstring>
#include <memory>

namespace th {

namespace {

using CtxPtr = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

std::array<uint8_t, 12> nonce_of(uint64_t counter) {
  std::array<uint8_t, 12> n{};
  std::memcpy(n.data(), &counter, sizeof counter);
  return n;
}

// Large pieces go through EVP in steps that fit its int lengths.
template <class F>
bool in_steps(size_t n, F f) {
  for (size_t done = 0; done < n;) {
    const size_t step = std::min<size_t>(n - done, size_t{1} << 30);
    if (!f(done, step)) return false;
    done += step;
  }
  return true;
}

}  // namespace

Result<HostTierCipher> HostTierCipher::create(int64_t n_blocks) {
  HostTierCipher c;
  if (RAND_bytes(c.key_.data(), static_cast<int>(c.key_.size())) != 1)
    return Status::error("host KV tier: no randomness for its key");
  c.records_.resize(static_cast<size_t>(n_blocks));
  return c;
}

HostTierCipher::HostTierCipher(HostTierCipher&& o) noexcept { *this = std::move(o); }
HostTierCipher& HostTierCipher::operator=(HostTierCipher&& o) noexcept {
  key_ = o.key_;
  next_counter_ = o.next_counter_;
  records_ = std::move(o.records_);
  OPENSSL_cleanse(o.key_.data(), o.key_.size());
  return *this;
}
HostTierCipher::~HostTierCipher() { OPENSSL_cleanse(key_.data(), key_.size()); }

Status HostTierCipher::seal(int32_t block, const Pieces& pieces) {
  Record& r = records_.at(static_cast<size_t>(block));
  r.counter = next_counter_++;
  const auto nonce = nonce_of(r.counter);
  CtxPtr ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  int n = 0;
  if (!ctx || EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key_.data(), nonce.data()) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &n, reinterpret_cast<const uint8_t*>(&block), sizeof block) != 1)
    return Status::error("host KV tier: AES-256-GCM setup failed");
  for (const auto& piece : pieces) {
    uint8_t* p = piece.first;  // not a structured binding: clang 14 cannot capture those
    if (!in_steps(piece.second, [&](size_t off, size_t step) {
          return EVP_EncryptUpdate(ctx.get(), p + off, &n, p + off, static_cast<int>(step)) == 1;
        }))
      return Status::error("host KV tier: AES-256-GCM failed");
  }
  uint8_t tail[16];
  if (EVP_EncryptFinal_ex(ctx.get(), tail, &n) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, 16, r.tag.data()) != 1)
    return Status::error("host KV tier: AES-256-GCM failed");
  return ok_status();
}

Status HostTierCipher::open(int32_t block, const std::vector<std::pair<const uint8_t*, size_t>>& pieces,
                            const std::function<void(size_t, const uint8_t*, size_t)>& sink) const {
  const Record& r = records_.at(static_cast<size_t>(block));
  const auto nonce = nonce_of(r.counter);
  CtxPtr ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  int n = 0;
  if (!ctx || EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key_.data(), nonce.data()) != 1 ||
      EVP_DecryptUpdate(ctx.get(), nullptr, &n, reinterpret_cast<const uint8_t*>(&block), sizeof block) != 1)
    return Status::error("host KV tier: AES-256-GCM setup failed");
  std::vector<uint8_t> plain;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const uint8_t* p = pieces[i].first;
    const size_t len = pieces[i].second;
    plain.resize(len);
    if (!in_steps(len, [&](size_t off, size_t step) {
          return EVP_DecryptUpdate(ctx.get(), plain.data() + off, &n, p + off, static_cast<int>(step)) == 1;
        }))
      return Status::error("host KV tier: AES-256-GCM failed");
    sink(i, plain.data(), len);
  }
  std::array<uint8_t, 16> tag = r.tag;
  uint8_t tail[16];
  if (EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, 16, tag.data()) != 1 ||
      EVP_DecryptFinal_ex(ctx.get(), tail, &n) != 1)
    return Status::errorf("host KV tier: block ", block, " does not verify (its memory was changed)");
  return ok_status();
}

}  // namespace th
