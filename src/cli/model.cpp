// tokenhive model: encrypted model files. `keygen` makes a key-encryption key,
// `encrypt` wraps a GGUF in an envelope (model/encrypted_model.h), `rekey`
// re-wraps an envelope's data key under a new key without touching the
// weights. `generate` and `serve` load an envelope given --key-file.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "cli/parse_flags.h"
#include "cli/verbs.h"
#include "model/encrypted_model.h"

namespace th::cli {

namespace {

constexpr const char* kKeyHelp = "key-encryption key: a file (64 hex digits or 32 raw bytes), env:VAR or cmd:COMMAND";

}  // namespace

int run_model(int argc, char** argv) {
  CLI::App app{"Encrypted model files: keygen, encrypt, rekey.", "tokenhive model"};
  app.require_subcommand(1);
  std::string key_out, key, new_key, in, out, file;
  size_t chunk_mib = 4;
  CLI::App* keygen = app.add_subcommand("keygen", "write a new random key-encryption key (0600; never overwrites)");
  keygen->add_option("-o,--out", key_out, "key file to create")->required();
  CLI::App* encrypt = app.add_subcommand("encrypt", "encrypt a GGUF model: AES-256-GCM chunks under a wrapped data key");
  encrypt->add_option("--key-file", key, kKeyHelp)->required();
  encrypt->add_option("--chunk-mib", chunk_mib, "plaintext MiB per authenticated chunk")->check(CLI::Range(1, 1024))->capture_default_str();
  encrypt->add_option("input", in, "plain GGUF model")->required();
  encrypt->add_option("output", out, "encrypted model to write")->required();
  CLI::App* rekey = app.add_subcommand("rekey", "re-wrap an encrypted model's data key under a new key, in place");
  rekey->add_option("--key-file", key, "the current key (" + std::string(kKeyHelp) + ")")->required();
  rekey->add_option("--new-key-file", new_key, "the new key (same forms)")->required();
  rekey->add_option("file", file, "encrypted model")->required();
  if (std::optional<int> rc = parse_flags(app, "model", argc, argv)) return *rc;

  if (keygen->parsed()) {
    if (Status s = write_new_kek(key_out); !s.ok()) return fail("model", s.message());
    std::fprintf(stderr, "tokenhive model: wrote a new key to %s\n", key_out.c_str());
    return 0;
  }
  Result<Kek> kek = load_kek(key);
  if (!kek.ok()) return fail("model", kek.message());
  if (encrypt->parsed()) {
    EnvelopeOptions o;
    o.chunk_bytes = chunk_mib << 20;
    if (Status s = encrypt_model_file(in, out, *kek, o); !s.ok()) return fail("model", s.message());
    std::fprintf(stderr, "tokenhive model: encrypted %s -> %s\n", in.c_str(), out.c_str());
    return 0;
  }
  Result<Kek> next = load_kek(new_key);
  if (!next.ok()) return fail("model", next.message());
  if (Status s = rekey_model_file(file, *kek, *next); !s.ok()) return fail("model", s.message());
  std::fprintf(stderr, "tokenhive model: %s now opens with the new key\n", file.c_str());
  return 0;
}

}  // namespace th::cli
