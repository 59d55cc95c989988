#include "server/api_keys.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <unordered_map>

namespace th::server {
namespace {

// Each request compares against every key (kMaxApiKeyLength bytes each): at
// this many keys that is 2.5 MiB of reads, ~100-200 us. More keys would need
// a digest-indexed lookup instead.
constexpr size_t kMaxApiKeys = 10000;
constexpr size_t kMaxKeyFileBytes = 16u << 20;
// Rates above this are surely a typo; the bound keeps the bucket arithmetic
// far from overflow.
constexpr double kMaxRate = 1e12;

bool is_blank(char c) { return c == ' ' || c == '\t'; }
bool is_key_char(char c) { return c >= 0x21 && c <= 0x7e; }
bool is_tenant_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_blank(line[i])) ++i;
    if (i == line.size() || line[i] == '#') break;
    size_t start = i;
    while (i < line.size() && !is_blank(line[i])) ++i;
    fields.push_back(line.substr(start, i - start));
  }
  return fields;
}

// A decimal number >= 0 (digits with at most one '.'), no sign, exponent,
// inf or nan.
std::optional<double> parse_rate(std::string_view s) {
  if (s.empty() || s.size() > 32) return std::nullopt;
  int dots = 0, digits = 0;
  for (char c : s) {
    if (c == '.') {
      ++dots;
    } else if (c >= '0' && c <= '9') {
      ++digits;
    } else {
      return std::nullopt;
    }
  }
  if (dots > 1 || digits == 0) return std::nullopt;
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v) || v < 0 || v > kMaxRate)
    return std::nullopt;
  return v;
}

std::optional<int32_t> parse_priority(std::string_view s) {
  if (std::optional<int32_t> named = priority_from_name(s)) return named;
  int32_t v = 0;
  const char* begin = s.data();
  if (!s.empty() && s[0] == '+') ++begin;  // from_chars takes '-' but not '+'
  auto [end, ec] = std::from_chars(begin, s.data() + s.size(), v);
  if (s.empty() || begin == s.data() + s.size() || ec != std::errc() || end != s.data() + s.size())
    return std::nullopt;
  return v;
}

}  // namespace

std::optional<http::ApiError> check_priority(const ApiKey& key, int32_t requested) {
  if (requested >= key.max_priority) return std::nullopt;
  http::ApiError e;
  e.message = cat("priority ", priority_name(requested), " not allowed for this key (the most important it may ask for is ",
                  priority_name(key.max_priority), ")");
  e.param = "priority";
  e.code = "priority_not_allowed";
  return e;
}

Result<ApiKeyStore> ApiKeyStore::parse(std::string_view text, std::string_view source_name) {
  ApiKeyStore store;
  std::unordered_map<std::string_view, size_t> first_line;  // views into `text`
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    auto fail = [&](auto&&... parts) {
      return Status::errorf(source_name, ":", line_no, ": ", std::forward<decltype(parts)>(parts)...);
    };

    std::vector<std::string_view> fields = split_fields(line);
    if (fields.empty()) continue;
    // No message below quotes a field: a key with a stray space in it would
    // otherwise end up on the terminal as a "tenant" or an "option".
    std::string_view key = fields[0];
    if (key.size() < kMinApiKeyLength || key.size() > kMaxApiKeyLength)
      return fail("key is ", key.size(), " characters; a key is ", kMinApiKeyLength, "..", kMaxApiKeyLength);
    for (char c : key)
      if (!is_key_char(c)) return fail("key has a character outside printable ASCII (0x21..0x7e)");
    if (fields.size() < 2) return fail("no tenant after the key (KEY TENANT [options])");
    std::string_view tenant = fields[1];
    bool tenant_ok = !tenant.empty() && tenant.size() <= kMaxTenantLength;
    for (char c : tenant) tenant_ok = tenant_ok && is_tenant_char(c);
    if (!tenant_ok)
      return fail("tenant must be 1..", kMaxTenantLength, " characters of [A-Za-z0-9_.-] (got ", tenant.size(),
                  " characters)");

    ApiKey k;
    k.key = std::string(key);
    k.tenant = std::string(tenant);
    bool seen_priority = false, seen_rpm = false, seen_tpm = false, seen_pii = false, seen_conc = false;
    for (size_t f = 2; f < fields.size(); ++f) {
      std::string_view field = fields[f];
      size_t eq = field.find('=');
      std::string_view name = field.substr(0, eq);
      std::string_view value = eq == std::string_view::npos ? std::string_view() : field.substr(eq + 1);
      if (eq == std::string_view::npos ||
          (name != "max_priority" && name != "rpm" && name != "tpm" && name != "pii" && name != "max_concurrency"))
        return fail("field ", f + 1, " is not an option; options are max_priority=, rpm=, tpm=, pii=, max_concurrency=");
      bool& seen = name == "max_priority" ? seen_priority
                   : name == "rpm"        ? seen_rpm
                   : name == "tpm"        ? seen_tpm
                   : name == "pii"        ? seen_pii
                                          : seen_conc;
      if (seen) return fail(name, " given twice");
      seen = true;
      if (name == "max_concurrency") {
        std::optional<double> n = parse_rate(value);
        if (!n || *n != static_cast<double>(static_cast<int64_t>(*n)) || *n > 1e6)
          return fail("max_concurrency must be a whole number in 0..1000000 (0: unlimited)");
        k.max_concurrency = static_cast<int64_t>(*n);
      } else if (name == "pii") {
        if (value == "off") k.pii = PiiPolicy::Off;
        else if (value == "mask") k.pii = PiiPolicy::Mask;
        else if (value == "pseudonymize") k.pii = PiiPolicy::Pseudonymize;
        else return fail("pii must be off, mask or pseudonymize");
      } else if (name == "max_priority") {
        std::optional<int32_t> p = parse_priority(value);
        if (!p) return fail("max_priority must be high, normal, low or an int32");
        k.max_priority = *p;
      } else {
        std::optional<double> r = parse_rate(value);
        if (!r) return fail(name, " must be a decimal number in 0..", kMaxRate, " (0: unlimited)");
        (name == "rpm" ? k.requests_per_minute : k.tokens_per_minute) = *r;
      }
    }

    auto [it, inserted] = first_line.emplace(key, line_no);
    if (!inserted) return fail("duplicate key (first on line ", it->second, ")");
    if (store.keys_.size() == kMaxApiKeys) return fail("more than ", kMaxApiKeys, " keys");
    store.keys_.push_back(std::move(k));
  }
  if (store.keys_.empty())
    return Status::errorf(source_name, ": no keys (a server with --api-keys and no key would refuse every request)");

  store.padded_.assign(store.keys_.size() * kMaxApiKeyLength, 0);
  for (size_t i = 0; i < store.keys_.size(); ++i)
    std::memcpy(store.padded_.data() + i * kMaxApiKeyLength, store.keys_[i].key.data(), store.keys_[i].key.size());
  return store;
}

Result<ApiKeyStore> ApiKeyStore::load(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return Status::errorf(path, ": cannot open the key file: ", std::strerror(errno));
  std::string text;
  char buf[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) {
    text.append(buf, n);
    if (text.size() > kMaxKeyFileBytes)
      return Status::errorf(path, ": key file over ", kMaxKeyFileBytes >> 20, " MiB");
  }
  if (std::ferror(f.get())) return Status::errorf(path, ": cannot read the key file: ", std::strerror(errno));
  return parse(text, path);
}

const ApiKey* ApiKeyStore::find_key(std::string_view presented) const {
  uint8_t candidate[kMaxApiKeyLength] = {};
  size_t n = presented.size() < kMaxApiKeyLength ? presented.size() : kMaxApiKeyLength;
  std::memcpy(candidate, presented.data(), n);
  // A longer key matches nothing, but is compared all the same.
  uint32_t too_long = presented.size() > kMaxApiKeyLength ? 1 : 0;
  uint64_t found = 0;  // index + 1 of the match; 0 for none
  for (size_t i = 0; i < keys_.size(); ++i) {
    uint32_t diff = too_long | static_cast<uint32_t>(keys_[i].key.size() ^ n);
    diff |= http::constant_time_difference(padded_.data() + i * kMaxApiKeyLength, candidate, kMaxApiKeyLength);
    found |= (uint64_t{0} - http::constant_time_is_zero(diff)) & (i + 1);
  }
  return found == 0 ? nullptr : &keys_[found - 1];
}

const ApiKey* ApiKeyStore::authenticate(std::string_view value) const {
  const std::optional<std::string_view> key = http::bearer_credentials(value);
  if (!key || key->empty()) return nullptr;
  return find_key(*key);
}

}  // namespace th::server
