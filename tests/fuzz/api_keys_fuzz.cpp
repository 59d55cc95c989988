// libFuzzer target for the API key file parser (ApiKeyStore::parse). The
// input is the file's text. A parse that fails must give one line naming the
// source; one that succeeds must hold only valid, distinct keys, each found
// again by authenticate(), and must survive being written back out and parsed
// again unchanged. The input's first line is also tried as an Authorization
// header value.
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <set>
#include <string>
#include <string_view>

#include "server/api_keys.h"

namespace {

using th::server::ApiKey;
using th::server::ApiKeyStore;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "api_keys_fuzz: %s\n", what);
  std::abort();
}

std::string rate_text(double v) {
  char buf[400];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  if (ec != std::errc()) die("rate does not print");
  return std::string(buf, end);
}

std::string write_back(const ApiKeyStore& store) {
  std::string text;
  for (const ApiKey& k : store.keys()) {
    text += k.key + "\t" + k.tenant;
    if (k.max_priority != std::numeric_limits<int32_t>::min())
      text += " max_priority=" + std::to_string(k.max_priority);
    text += " rpm=" + rate_text(k.requests_per_minute) + " tpm=" + rate_text(k.tokens_per_minute) + "\n";
  }
  return text;
}

bool same_key(const ApiKey& a, const ApiKey& b) {
  return a.key == b.key && a.tenant == b.tenant && a.max_priority == b.max_priority &&
         a.requests_per_minute == b.requests_per_minute && a.tokens_per_minute == b.tokens_per_minute;
}

void check(const ApiKeyStore& store) {
  if (store.size() == 0) die("a store with no keys");
  std::set<std::string> seen;
  for (const ApiKey& k : store.keys()) {
    if (k.key.size() < th::server::kMinApiKeyLength || k.key.size() > th::server::kMaxApiKeyLength)
      die("key length out of bounds");
    if (k.key[0] == '#') die("key starts with '#'");
    for (char c : k.key)
      if (c < 0x21 || c > 0x7e) die("key character outside printable ASCII");
    if (k.tenant.empty() || k.tenant.size() > th::server::kMaxTenantLength) die("tenant length out of bounds");
    for (char c : k.tenant)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') die("bad tenant character");
    if (!(k.requests_per_minute >= 0) || !std::isfinite(k.requests_per_minute) || !(k.tokens_per_minute >= 0) ||
        !std::isfinite(k.tokens_per_minute))
      die("rate negative or not finite");
    if (!seen.insert(k.key).second) die("duplicate key accepted");
    if (store.find_key(k.key) != &k) die("find_key misses a stored key");
    if (store.authenticate("Bearer " + k.key) != &k) die("authenticate misses a stored key");
    // (Either may be another stored key, but never this one.)
    if (store.find_key(k.key + "x") == &k || store.find_key(k.key.substr(1)) == &k)
      die("find_key matches a different key");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  th::Result<ApiKeyStore> r = ApiKeyStore::parse(text, "fuzz");
  if (!r.ok()) {
    const std::string& m = r.message();
    if (m.rfind("fuzz:", 0) != 0) die("error does not name the source");
    if (m.find('\n') != std::string::npos) die("error is not one line");
    return 0;
  }
  const ApiKeyStore& store = r.value();
  check(store);

  th::Result<ApiKeyStore> again = ApiKeyStore::parse(write_back(store), "again");
  if (!again.ok()) die(("written-back store does not parse: " + again.message()).c_str());
  if (again->size() != store.size()) die("written-back store differs in size");
  for (size_t i = 0; i < store.size(); ++i)
    if (!same_key(store.keys()[i], again->keys()[i])) die("written-back store differs");

  const std::string_view first_line = text.substr(0, text.find('\n'));
  if (const ApiKey* k = store.authenticate(first_line)) {
    if (first_line.find(k->key) == std::string_view::npos) die("authenticate returned a key the header lacks");
  }
  return 0;
}
