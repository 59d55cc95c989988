#include "model/encrypted_model.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <thread>

#include "format/gguf.h"
#include "format/hf_folder.h"

namespace th {

namespace {

constexpr char kMagic[8] = {'T', 'K', 'H', 'V', 'E', 'N', 'C', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kAadBytes = 64;
constexpr size_t kWrapNonceAt = 64, kWrappedKeyAt = 76, kWrapTagAt = 108;

using Sha256 = std::array<uint8_t, 32>;

template <class T>
void put(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof v);  // little-endian hosts only (as the rest of tokenhive)
}
template <class T>
T get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

struct CipherCtx {
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  ~CipherCtx() { EVP_CIPHER_CTX_free(ctx); }
};

// AES-256-GCM, 12-byte nonce, `aad`, 16-byte tag. Returns false on any failure (for
// decryption: the tag did not verify).
bool gcm(bool encrypt, const uint8_t* key, const uint8_t* nonce, const uint8_t* aad, size_t aad_len, const uint8_t* in,
         size_t len, uint8_t* out, uint8_t* tag) {
  CipherCtx c;
  if (!c.ctx) return false;
  int n = 0;
  if (EVP_CipherInit_ex(c.ctx, EVP_aes_256_gcm(), nullptr, nullptr, nullptr, encrypt ? 1 : 0) != 1) return false;
  if (EVP_CIPHER_CTX_ctrl(c.ctx, EVP_CTRL_GCM_SET_IVLEN, 12, nullptr) != 1) return false;
  if (EVP_CipherInit_ex(c.ctx, nullptr, nullptr, key, nonce, encrypt ? 1 : 0) != 1) return false;
  if (EVP_CipherUpdate(c.ctx, nullptr, &n, aad, static_cast<int>(aad_len)) != 1) return false;
  // EVP takes int lengths: go in pieces of at most 1 GiB.
  for (size_t done = 0; done < len;) {
    const size_t step = std::min<size_t>(len - done, size_t{1} << 30);
    if (EVP_CipherUpdate(c.ctx, out + done, &n, in + done, static_cast<int>(step)) != 1) return false;
    done += step;
  }
  if (!encrypt && EVP_CIPHER_CTX_ctrl(c.ctx, EVP_CTRL_GCM_SET_TAG, 16, tag) != 1) return false;
  if (EVP_CipherFinal_ex(c.ctx, out + len, &n) != 1) return false;
  if (encrypt && EVP_CIPHER_CTX_ctrl(c.ctx, EVP_CTRL_GCM_GET_TAG, 16, tag) != 1) return false;
  return true;
}

Sha256 sha256(const uint8_t* data, size_t size) {
  Sha256 out{};
  unsigned int n = 0;
  EVP_Digest(data, size, out.data(), &n, EVP_sha256(), nullptr);
  return out;
}

std::array<uint8_t, 12> chunk_nonce(const uint8_t* prefix, uint32_t index, bool last) {
  std::array<uint8_t, 12> n{};
  std::memcpy(n.data(), prefix, 7);
  n[7] = static_cast<uint8_t>(index >> 24);
  n[8] = static_cast<uint8_t>(index >> 16);
  n[9] = static_cast<uint8_t>(index >> 8);
  n[10] = static_cast<uint8_t>(index);
  n[11] = last ? 1 : 0;
  return n;
}

uint64_t n_chunks(uint64_t size, uint64_t chunk) { return size == 0 ? 1 : (size + chunk - 1) / chunk; }

Result<Kek> parse_kek(const std::string& text, const std::string& from) {
  Kek k;
  if (text.size() == 32) {
    std::memcpy(k.bytes.data(), text.data(), 32);
    return k;
  }
  std::string hex = text;
  while (!hex.empty() && (hex.back() == '\n' || hex.back() == '\r' || hex.back() == ' ')) hex.pop_back();
  if (hex.size() != 64) return Status::errorf(from, ": a key is 64 hex digits (or 32 raw bytes)");
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < 32; ++i) {
    const int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return Status::errorf(from, ": a key is 64 hex digits (or 32 raw bytes)");
    k.bytes[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return k;
}

// The data key, unwrapped from an envelope's header (which is checked first).
Result<std::array<uint8_t, 32>> unwrap(const uint8_t* h, size_t size, const Kek& kek, const std::string& name) {
  if (size < kEnvelopeHeaderBytes || !is_encrypted_model(h, size))
    return Status::errorf(name, ": not an encrypted tokenhive model (bad magic or too short)");
  if (get<uint32_t>(h + 8) != kVersion)
    return Status::errorf(name, ": envelope format version ", get<uint32_t>(h + 8), " is not supported (only ", kVersion, ")");
  if (get<uint32_t>(h + 124) != 0 || h[63] != 0) return Status::errorf(name, ": the envelope header was changed");
  std::array<uint8_t, 32> key{};
  std::array<uint8_t, 16> tag{};
  std::memcpy(tag.data(), h + kWrapTagAt, 16);
  if (!gcm(false, kek.bytes.data(), h + kWrapNonceAt, h, kAadBytes, h + kWrappedKeyAt, 32, key.data(), tag.data()))
    return Status::errorf(name, ": the key does not open this model (wrong key, or the header was changed)");
  return key;
}

Status write_all(const std::string& path, const uint8_t* data, size_t size, mode_t mode, bool exclusive) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (exclusive ? O_EXCL : O_TRUNC), mode);
  if (fd < 0) return Status::errorf(path, ": cannot create: ", std::strerror(errno));
  for (size_t done = 0; done < size;) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      return Status::errorf(path, ": write failed: ", std::strerror(e));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) return Status::errorf(path, ": cannot flush: ", std::strerror(errno));
  return ok_status();
}

// `command` run by /bin/sh in a process group of its own, its stdout read (the first 4 KiB
// kept, the rest drained so it never blocks on a full pipe) until it exits or `timeout`
// passes; then the whole group is killed, so a hung key helper cannot hang serve.
Result<std::string> run_key_command(const std::string& command, std::chrono::milliseconds timeout) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Status::errorf("cannot run: ", std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return Status::errorf("cannot run: ", std::strerror(e));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(fds[1], STDOUT_FILENO);  // dup2 clears FD_CLOEXEC on the copy
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here: no race with the child's own call
  ::close(fds[1]);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string out;
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd pfd{fds[0], POLLIN, 0};
    const int r = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char buf[256];
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the command (and whatever holds its stdout) is done writing
    if (out.size() < 4096) out.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) return Status::errorf("no answer within ", timeout.count() / 1000.0, " s: killed");
  if (WIFSIGNALED(status)) return Status::errorf("killed by signal ", WTERMSIG(status));
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0) return Status::errorf("exited with status ", WEXITSTATUS(status));
  return out;
}

}  // namespace

Result<Kek> load_kek(const std::string& spec, std::chrono::milliseconds command_timeout) {
  if (spec.rfind("env:", 0) == 0) {
    const char* v = std::getenv(spec.c_str() + 4);
    if (!v) return Status::errorf("key ", spec, ": the variable is not set");
    return parse_kek(v, "key " + spec);
  }
  if (spec.rfind("cmd:", 0) == 0) {
    Result<std::string> out = run_key_command(spec.substr(4), command_timeout);
    if (!out.ok()) return Status::errorf("key command: ", out.message());
    return parse_kek(*out, "key command");
  }
  Result<MappedFile> f = MappedFile::open(spec);
  if (!f.ok()) return Status::errorf("key file ", f.message());
  if (f->size() > 4096) return Status::errorf("key file ", spec, ": too large to be a key");
  return parse_kek(std::string(reinterpret_cast<const char*>(f->data()), f->size()), "key file " + spec);
}

Status write_new_kek(const std::string& path) {
  uint8_t raw[32];
  if (RAND_bytes(raw, sizeof raw) != 1) return Status::error("no randomness for a new key");
  std::string hex;
  static const char* kDigits = "0123456789abcdef";
  for (uint8_t b : raw) {
    hex += kDigits[b >> 4];
    hex += kDigits[b & 15];
  }
  hex += '\n';
  return write_all(path, reinterpret_cast<const uint8_t*>(hex.data()), hex.size(), 0600, /*exclusive=*/true);
}

bool is_encrypted_model(const uint8_t* data, size_t size) {
  return size >= sizeof kMagic && std::memcmp(data, kMagic, sizeof kMagic) == 0;
}

Result<std::vector<uint8_t>> encrypt_model(const uint8_t* plain, size_t size, const Kek& kek, EnvelopeOptions o) {
  if (o.chunk_bytes < 4096 || o.chunk_bytes > (size_t{1} << 30))
    return Status::errorf("chunk size must be in [4 KiB, 1 GiB], got ", o.chunk_bytes);
  const uint64_t chunks = n_chunks(size, o.chunk_bytes);
  if (chunks > std::numeric_limits<uint32_t>::max()) return Status::error("too many chunks: use a larger chunk size");
  std::vector<uint8_t> out(kEnvelopeHeaderBytes + size + chunks * kEnvelopeTagBytes);
  uint8_t* h = out.data();
  std::memcpy(h, kMagic, 8);
  put<uint32_t>(h + 8, kVersion);
  put<uint32_t>(h + 12, static_cast<uint32_t>(o.chunk_bytes));
  put<uint64_t>(h + 16, size);
  const Sha256 digest = sha256(plain, size);
  std::memcpy(h + 24, digest.data(), 32);
  std::array<uint8_t, 32> data_key{};
  if (RAND_bytes(h + 56, 7) != 1 || RAND_bytes(data_key.data(), 32) != 1 || RAND_bytes(h + kWrapNonceAt, 12) != 1)
    return Status::error("no randomness for the keys");
  if (!gcm(true, kek.bytes.data(), h + kWrapNonceAt, h, kAadBytes, data_key.data(), 32, h + kWrappedKeyAt, h + kWrapTagAt))
    return Status::error("AES-256-GCM failed wrapping the data key");
  uint8_t* p = h + kEnvelopeHeaderBytes;
  for (uint64_t i = 0; i < chunks; ++i) {
    const size_t off = i * o.chunk_bytes, len = std::min<size_t>(o.chunk_bytes, size - off);
    const auto nonce = chunk_nonce(h + 56, static_cast<uint32_t>(i), i + 1 == chunks);
    if (!gcm(true, data_key.data(), nonce.data(), h, kAadBytes, plain + off, len, p, p + len))
      return Status::errorf("AES-256-GCM failed on chunk ", i);
    p += len + kEnvelopeTagBytes;
  }
  OPENSSL_cleanse(data_key.data(), data_key.size());
  return out;
}

Status encrypt_model_file(const std::string& in, const std::string& out, const Kek& kek, EnvelopeOptions o) {
  TH_ASSIGN_OR_RETURN(MappedFile plain, MappedFile::open(in));
  if (is_encrypted_model(plain.data(), plain.size())) return Status::errorf(in, ": already encrypted");
  TH_ASSIGN_OR_RETURN(std::vector<uint8_t> env, encrypt_model(plain.data(), plain.size(), kek, o));
  const std::string tmp = out + ".tmp";
  TH_RETURN_IF_ERROR(write_all(tmp, env.data(), env.size(), 0644, /*exclusive=*/false));
  if (::rename(tmp.c_str(), out.c_str()) != 0) return Status::errorf(out, ": cannot rename into place: ", std::strerror(errno));
  return ok_status();
}

Result<MappedFile> decrypt_model(const uint8_t* data, size_t size, const Kek& kek, const std::string& name, int threads) {
  TH_ASSIGN_OR_RETURN(auto data_key, unwrap(data, size, kek, name));
  const uint8_t* h = data;
  const uint64_t chunk = get<uint32_t>(h + 12), plain_size = get<uint64_t>(h + 16);
  if (chunk == 0) return Status::errorf(name, ": bad chunk size 0");
  const uint64_t chunks = n_chunks(plain_size, chunk);
  // The header is authenticated (the unwrap used it as AAD), so these sizes are the writer's.
  if (plain_size > size || size - kEnvelopeHeaderBytes != plain_size + chunks * kEnvelopeTagBytes)
    return Status::errorf(name, ": ", size, " bytes where the header promises ",
                          kEnvelopeHeaderBytes + plain_size + chunks * kEnvelopeTagBytes,
                          " (truncated or extended)");
  TH_ASSIGN_OR_RETURN(MappedFile out, MappedFile::anonymous(plain_size, name));
  uint8_t* dst = out.mutable_data();
  const int n_threads = std::max(1, std::min<int>(threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency()),
                                                  static_cast<int>(std::min<uint64_t>(chunks, 256))));
  std::atomic<uint64_t> next{0}, first_bad{std::numeric_limits<uint64_t>::max()};
  auto worker = [&] {
    for (uint64_t i; (i = next.fetch_add(1)) < chunks;) {
      const uint64_t off = i * chunk, len = std::min<uint64_t>(chunk, plain_size - off);
      const uint8_t* src = data + kEnvelopeHeaderBytes + off + i * kEnvelopeTagBytes;
      const auto nonce = chunk_nonce(h + 56, static_cast<uint32_t>(i), i + 1 == chunks);
      uint8_t tag[16];
      std::memcpy(tag, src + len, 16);
      if (!gcm(false, data_key.data(), nonce.data(), h, kAadBytes, src, len, dst + off, tag)) {
        uint64_t cur = first_bad.load();
        while (i < cur && !first_bad.compare_exchange_weak(cur, i)) {
        }
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < n_threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  OPENSSL_cleanse(data_key.data(), data_key.size());
  if (first_bad.load() != std::numeric_limits<uint64_t>::max())
    return Status::errorf(name, ": chunk ", first_bad.load(), " of ", chunks,
                          " does not verify (changed, moved, or from another file)");
  const Sha256 digest = sha256(dst, plain_size);
  if (std::memcmp(digest.data(), h + 24, 32) != 0)
    return Status::errorf(name, ": the decrypted model's SHA-256 differs from the header's");
  return out;
}

Status rekey_model_file(const std::string& path, const Kek& old_kek, const Kek& new_kek) {
  uint8_t h[kEnvelopeHeaderBytes];
  {
    std::ifstream in(path, std::ios::binary);
    if (!in || !in.read(reinterpret_cast<char*>(h), sizeof h)) return Status::errorf(path, ": cannot read its header");
  }
  TH_ASSIGN_OR_RETURN(auto data_key, unwrap(h, sizeof h, old_kek, path));
  if (RAND_bytes(h + kWrapNonceAt, 12) != 1) return Status::error("no randomness for the new wrap");
  if (!gcm(true, new_kek.bytes.data(), h + kWrapNonceAt, h, kAadBytes, data_key.data(), 32, h + kWrappedKeyAt, h + kWrapTagAt))
    return Status::error("AES-256-GCM failed wrapping the data key");
  OPENSSL_cleanse(data_key.data(), data_key.size());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Status::errorf(path, ": cannot open for writing: ", std::strerror(errno));
  const ssize_t n = ::pwrite(fd, h + kWrapNonceAt, kEnvelopeHeaderBytes - kWrapNonceAt, kWrapNonceAt);
  const bool ok = n == static_cast<ssize_t>(kEnvelopeHeaderBytes - kWrapNonceAt) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) return Status::errorf(path, ": cannot write the new wrap: ", std::strerror(errno));
  return ok_status();
}

Result<GgufFile> open_model(const std::string& path, const std::string& kek_spec) {
  if (is_hf_folder(path)) {
    if (!kek_spec.empty()) return Status::errorf(path, ": a key was given but a Hugging Face folder is not encrypted");
    return open_hf_folder(path);
  }
  TH_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  const bool encrypted = is_encrypted_model(file.data(), file.size());
  if (!encrypted) {
    if (!kek_spec.empty())
      return Status::errorf(path, ": a key was given but the model is not encrypted (refusing to load plaintext weights)");
    return GgufFile::adopt(std::move(file));
  }
  if (kek_spec.empty()) return Status::errorf(path, ": the model is encrypted: give its key (--key-file)");
  TH_ASSIGN_OR_RETURN(Kek kek, load_kek(kek_spec));
  TH_ASSIGN_OR_RETURN(MappedFile plain, decrypt_model(file.data(), file.size(), kek, path));
  return GgufFile::adopt(std::move(plain));
}

}  // namespace th
