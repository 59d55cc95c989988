#include "audit/audit_record.h"

#include <algorithm>
#include <cstring>

namespace th::audit {
namespace {

constexpr uint8_t kEntryVersion = 1;
constexpr uint8_t kHeaderVersion = 1;
constexpr uint8_t kCheckpointVersion = 1;

class ByteWriter {
 public:
  void u8(uint8_t v) { out_.push_back(v); }
  void u16(uint16_t v) { le(v, 2); }
  void u32(uint32_t v) { le(v, 4); }
  void u64(uint64_t v) { le(v, 8); }
  void i32(int32_t v) { u32(static_cast<uint32_t>(v)); }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void bytes(std::span<const uint8_t> b) { out_.insert(out_.end(), b.begin(), b.end()); }
  void str(std::string_view s) {
    u16(static_cast<uint16_t>(s.size()));
    bytes(std::span(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
  }
  std::vector<uint8_t> take() { return std::move(out_); }

 private:
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> out_;
};

class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> b) : b_(b) {}
  bool ok() const { return ok_; }
  bool at_end() const { return pos_ == b_.size(); }
  uint8_t u8() { return static_cast<uint8_t>(le(1)); }
  uint16_t u16() { return static_cast<uint16_t>(le(2)); }
  uint32_t u32() { return static_cast<uint32_t>(le(4)); }
  uint64_t u64() { return le(8); }
  int32_t i32() { return static_cast<int32_t>(u32()); }
  int64_t i64() { return static_cast<int64_t>(u64()); }
  template <size_t N>
  void array(std::array<uint8_t, N>& a) {
    if (!take(N)) return;
    std::memcpy(a.data(), b_.data() + pos_ - N, N);
  }
  void str(std::string& s) {
    const uint16_t n = u16();
    if (n > kAuditMaxString) ok_ = false;
    if (!ok_ || !take(n)) return;
    s.assign(reinterpret_cast<const char*>(b_.data() + pos_ - n), n);
  }

 private:
  bool take(size_t n) {
    if (!ok_ || b_.size() - pos_ < n) return ok_ = false;
    pos_ += n;
    return true;
  }
  uint64_t le(int n) {
    if (!take(n)) return 0;
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(b_[pos_ - n + i]) << (8 * i);
    return v;
  }
  std::span<const uint8_t> b_;
  size_t pos_ = 0;
  bool ok_ = true;
};

uint32_t read_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

bool known_type(uint8_t t) {
  return t == static_cast<uint8_t>(AuditRecordType::kHeader) || t == static_cast<uint8_t>(AuditRecordType::kEntry) ||
         t == static_cast<uint8_t>(AuditRecordType::kCheckpoint);
}

bool all_zero(std::span<const uint8_t> b) {
  return std::all_of(b.begin(), b.end(), [](uint8_t c) { return c == 0; });
}

}  // namespace

int64_t to_unix_us(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

std::chrono::system_clock::time_point from_unix_us(int64_t us) {
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::microseconds(us)));
}

std::string audit_key_id(std::string_view api_key) { return to_hex(sha256(api_key)).substr(0, 8); }

Hash audit_text_digest(std::string_view text) { return sha256(text); }

Hash audit_texts_digest(std::span<const std::string> texts) {
  ByteWriter w;
  for (const std::string& t : texts) {
    w.u64(t.size());
    w.bytes(std::span(reinterpret_cast<const uint8_t*>(t.data()), t.size()));
  }
  const std::vector<uint8_t> b = w.take();
  return sha256(std::span<const uint8_t>(b));
}

uint32_t crc32c(std::span<const uint8_t> data, uint32_t crc) {
  static const auto kTable = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (uint8_t b : data) crc = kTable[(crc ^ b) & 0xff] ^ (crc >> 8);
  return ~crc;
}

Status check_entry_fits(const AuditEntry& e) {
  const std::pair<const char*, const std::string*> fields[] = {
      {"request_id", &e.request_id}, {"tenant", &e.tenant}, {"key_id", &e.key_id},
      {"route", &e.route},           {"model", &e.model},   {"outcome", &e.outcome}};
  for (const auto& [name, s] : fields)
    if (s->size() > kAuditMaxString)
      return Status::errorf("audit entry field ", name, " is ", s->size(), " bytes (at most ", kAuditMaxString, ")");
  return ok_status();
}

std::vector<uint8_t> encode_entry(const LoggedEntry& le) {
  const AuditEntry& e = le.entry;
  ByteWriter w;
  w.u8(kEntryVersion);
  w.u64(le.index);
  w.bytes(le.prev_leaf);
  w.i64(to_unix_us(e.time));
  w.str(e.request_id);
  w.str(e.tenant);
  w.str(e.key_id);
  w.str(e.route);
  w.str(e.model);
  w.i32(e.priority);
  w.i32(e.status);
  w.str(e.outcome);
  w.u64(e.prompt_tokens);
  w.u64(e.completion_tokens);
  w.u64(e.latency_us);
  w.bytes(e.prompt_sha256);
  w.bytes(e.output_sha256);
  return w.take();
}

Result<LoggedEntry> decode_entry(std::span<const uint8_t> bytes) {
  ByteReader r(bytes);
  LoggedEntry le;
  AuditEntry& e = le.entry;
  const uint8_t version = r.u8();
  if (r.ok() && version != kEntryVersion) return Status::errorf("entry version ", int(version), " (expected 1)");
  le.index = r.u64();
  r.array(le.prev_leaf);
  const int64_t us = r.i64();
  // system_clock counts nanoseconds here: about +-292 years around 1970.
  constexpr int64_t kMaxUs = std::chrono::duration_cast<std::chrono::microseconds>(
                                 std::chrono::system_clock::duration::max()).count();
  if (r.ok() && (us > kMaxUs || us < -kMaxUs)) return Status::errorf("entry time ", us, " us is out of range");
  e.time = from_unix_us(us);
  r.str(e.request_id);
  r.str(e.tenant);
  r.str(e.key_id);
  r.str(e.route);
  r.str(e.model);
  e.priority = r.i32();
  e.status = r.i32();
  r.str(e.outcome);
  e.prompt_tokens = r.u64();
  e.completion_tokens = r.u64();
  e.latency_us = r.u64();
  r.array(e.prompt_sha256);
  r.array(e.output_sha256);
  if (!r.ok()) return Status::error("entry is cut short or a field is too long");
  if (!r.at_end()) return Status::error("entry has trailing bytes");
  return le;
}

std::vector<uint8_t> encode_header(const AuditHeader& h) {
  ByteWriter w;
  w.u8(kHeaderVersion);
  w.bytes(h.log_id);
  w.bytes(h.public_key);
  w.i64(h.created_unix_us);
  w.u8(static_cast<uint8_t>(h.role));
  return w.take();
}

Result<AuditHeader> decode_header(std::span<const uint8_t> bytes) {
  ByteReader r(bytes);
  AuditHeader h;
  const uint8_t version = r.u8();
  if (r.ok() && version != kHeaderVersion) return Status::errorf("header version ", int(version), " (expected 1)");
  r.array(h.log_id);
  r.array(h.public_key);
  h.created_unix_us = r.i64();
  const uint8_t role = r.u8();
  if (!r.ok() || !r.at_end()) return Status::error("header has the wrong length");
  if (role > 1) return Status::errorf("header role ", int(role), " (expected 0 or 1)");
  h.role = static_cast<AuditFileRole>(role);
  return h;
}

std::vector<uint8_t> encode_checkpoint(const AuditCheckpoint& c) {
  ByteWriter w;
  w.u8(kCheckpointVersion);
  w.u64(c.tree_size);
  w.bytes(c.root);
  w.i64(c.time_unix_us);
  w.bytes(c.signature);
  return w.take();
}

Result<AuditCheckpoint> decode_checkpoint(std::span<const uint8_t> bytes) {
  ByteReader r(bytes);
  AuditCheckpoint c;
  const uint8_t version = r.u8();
  if (r.ok() && version != kCheckpointVersion)
    return Status::errorf("checkpoint version ", int(version), " (expected 1)");
  c.tree_size = r.u64();
  r.array(c.root);
  c.time_unix_us = r.i64();
  r.array(c.signature);
  if (!r.ok() || !r.at_end()) return Status::error("checkpoint has the wrong length");
  return c;
}

std::vector<uint8_t> checkpoint_signed_bytes(const AuditLogId& log_id, const AuditCheckpoint& c) {
  ByteWriter w;
  w.bytes(std::span(reinterpret_cast<const uint8_t*>(kCheckpointSigningContext.data()),
                    kCheckpointSigningContext.size()));
  w.bytes(log_id);
  w.u64(c.tree_size);
  w.bytes(c.root);
  w.i64(c.time_unix_us);
  return w.take();
}

std::vector<uint8_t> frame_record(AuditRecordType type, std::span<const uint8_t> payload) {
  ByteWriter w;
  w.u8(static_cast<uint8_t>(type));
  w.u32(static_cast<uint32_t>(payload.size()));
  std::vector<uint8_t> head = w.take();
  ByteWriter out;
  out.bytes(head);
  out.u32(crc32c(head));
  out.bytes(payload);
  out.u32(crc32c(payload));
  return out.take();
}

AuditFileScan scan_audit_file(std::span<const uint8_t> bytes) {
  AuditFileScan scan;
  const std::span<const uint8_t> magic(reinterpret_cast<const uint8_t*>(kAuditMagic.data()), kAuditMagic.size());
  if (bytes.empty()) return scan;
  if (bytes.size() < magic.size() || all_zero(bytes)) {
    // A crash while the file was being created; anything else is not ours.
    if (all_zero(bytes) || std::equal(bytes.begin(), bytes.end(), magic.begin()))
      scan.torn = AuditScanProblem{0, "the file ends inside its magic number"};
    else
      scan.corrupt = AuditScanProblem{0, "not a tokenhive audit log (bad magic number)"};
    return scan;
  }
  if (!std::equal(magic.begin(), magic.end(), bytes.begin())) {
    scan.corrupt = AuditScanProblem{0, "not a tokenhive audit log (bad magic number)"};
    return scan;
  }
  uint64_t o = magic.size();
  scan.good_size = o;
  while (o < bytes.size()) {
    const std::span<const uint8_t> rest = bytes.subspan(o);
    if (rest.size() < 9) {
      scan.torn = AuditScanProblem{o, "the file ends inside a record's frame"};
      break;
    }
    if (read_u32(rest.data() + 5) != crc32c(rest.first(5))) {
      // Blocks allocated but never written read as zeros after a crash.
      if (all_zero(rest))
        scan.torn = AuditScanProblem{o, "the file ends in zero bytes"};
      else
        scan.corrupt = AuditScanProblem{o, "a record's frame fails its CRC"};
      break;
    }
    const uint8_t type = rest[0];
    const uint32_t len = read_u32(rest.data() + 1);
    if (!known_type(type) || len > kAuditMaxPayload) {
      scan.corrupt = AuditScanProblem{o, "a record's frame has an unknown type or length"};
      break;
    }
    if (rest.size() < kAuditRecordOverhead + len) {
      scan.torn = AuditScanProblem{o, "the file ends inside a record"};
      break;
    }
    const std::span<const uint8_t> payload = rest.subspan(9, len);
    if (read_u32(rest.data() + 9 + len) != crc32c(payload)) {
      if (rest.size() == kAuditRecordOverhead + len)
        scan.torn = AuditScanProblem{o, "the last record fails its CRC"};
      else
        scan.corrupt = AuditScanProblem{o, "a record fails its CRC"};
      break;
    }
    const bool is_header = type == static_cast<uint8_t>(AuditRecordType::kHeader);
    if (is_header != !scan.header.has_value()) {
      scan.corrupt = AuditScanProblem{o, is_header ? "a second header record" : "the first record is not a header"};
      break;
    }
    if (is_header) {
      Result<AuditHeader> h = decode_header(payload);
      if (!h.ok()) {
        scan.corrupt = AuditScanProblem{o, h.message()};
        break;
      }
      scan.header = *h;
    } else {
      scan.records.push_back({static_cast<AuditRecordType>(type), o, payload});
    }
    o += kAuditRecordOverhead + len;
    scan.good_size = o;
  }
  return scan;
}

}  // namespace th::audit
