// Bad GGUF files: every one must be refused with a one-line message that names
// the problem -- never a crash, a huge allocation or a hang. The files are made
// valid (by GgufWriter, or the real stories260K.gguf) and then broken by
// patching single fields, located by walking the valid file's layout, so each
// case breaks exactly one thing.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "format/gguf.h"
#include "test_util.h"

namespace th {
namespace {

using Bytes = std::vector<uint8_t>;

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

// ------------------------------------------------------------------ layout

// Where the fields of a valid file lie (byte offsets from the file start).
struct KvAt {
  std::string key;
  size_t key_len;   // the key's u64 length
  size_t type;      // the value's u32 type
  size_t value;     // the value; for an array its u32 element type, then u64 count at +4, elements at +12
  size_t end;
};
struct TensorAt {
  std::string name;
  size_t name_len;
  size_t n_dims;
  size_t dims;      // dims[0]; dims[i] at dims + 8 * i
  size_t type;
  size_t offset;
};
struct Layout {
  std::vector<KvAt> kv;
  std::vector<TensorAt> tensors;
  size_t header_end = 0;  // before the padding to the data section
  const KvAt& key(std::string_view k) const {
    for (const KvAt& e : kv)
      if (e.key == k) return e;
    ADD_FAILURE() << "no key " << k;
    return kv.at(0);
  }
  const TensorAt& tensor(std::string_view n) const {
    for (const TensorAt& t : tensors)
      if (t.name == n) return t;
    ADD_FAILURE() << "no tensor " << n;
    return tensors.at(0);
  }
};

// Walks a file the format's way, trusting it: only ever given valid files.
class Walker {
 public:
  explicit Walker(const Bytes& b) : b_(b) {}

  Layout walk() {
    Layout l;
    pos_ = 8;
    const uint64_t n_tensors = get<uint64_t>();
    const uint64_t n_kv = get<uint64_t>();
    for (uint64_t i = 0; i < n_kv; ++i) {
      KvAt e;
      e.key_len = pos_;
      e.key = str();
      e.type = pos_;
      const uint32_t t = get<uint32_t>();
      e.value = pos_;
      skip(t);
      e.end = pos_;
      l.kv.push_back(e);
    }
    for (uint64_t i = 0; i < n_tensors; ++i) {
      TensorAt t;
      t.name_len = pos_;
      t.name = str();
      t.n_dims = pos_;
      const uint32_t nd = get<uint32_t>();
      t.dims = pos_;
      pos_ += 8 * nd;
      t.type = pos_;
      pos_ += 4;
      t.offset = pos_;
      pos_ += 8;
      l.tensors.push_back(t);
    }
    l.header_end = pos_;
    return l;
  }

 private:
  template <class T>
  T get() {
    T x;
    std::memcpy(&x, b_.data() + pos_, sizeof x);
    pos_ += sizeof x;
    return x;
  }
  std::string str() {
    const uint64_t n = get<uint64_t>();
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  void skip(uint32_t type) {
    switch (static_cast<GgufType>(type)) {
      case GgufType::UINT8: case GgufType::INT8: case GgufType::BOOL: pos_ += 1; break;
      case GgufType::UINT16: case GgufType::INT16: pos_ += 2; break;
      case GgufType::UINT32: case GgufType::INT32: case GgufType::FLOAT32: pos_ += 4; break;
      case GgufType::UINT64: case GgufType::INT64: case GgufType::FLOAT64: pos_ += 8; break;
      case GgufType::STRING: str(); break;
      case GgufType::ARRAY: {
        const uint32_t et = get<uint32_t>();
        const uint64_t n = get<uint64_t>();
        for (uint64_t i = 0; i < n; ++i) skip(et);
        break;
      }
    }
  }
  const Bytes& b_;
  size_t pos_ = 0;
};

Layout layout_of(const Bytes& b) { return Walker(b).walk(); }

template <class T>
Bytes patched(Bytes b, size_t at, T value) {
  EXPECT_LE(at + sizeof(T), b.size());
  std::memcpy(b.data() + at, &value, sizeof(T));
  return b;
}

template <class T>
void append(Bytes& b, T value) {
  const size_t at = b.size();
  b.resize(at + sizeof(T));
  std::memcpy(b.data() + at, &value, sizeof(T));
}

void append_string(Bytes& b, std::string_view s) {
  append<uint64_t>(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}

// magic, version 3, counts.
Bytes header(uint64_t n_tensors, uint64_t n_kv) {
  Bytes b;
  append<uint32_t>(b, 0x46554747);
  append<uint32_t>(b, 3);
  append<uint64_t>(b, n_tensors);
  append<uint64_t>(b, n_kv);
  return b;
}

template <class T>
T read_at(const Bytes& b, size_t at) {
  T x;
  std::memcpy(&x, b.data() + at, sizeof x);
  return x;
}

// ------------------------------------------------------------------ parsing

// Parses an exactly-sized heap copy, so that ASan flags any read past the end.
Result<GgufFile> parse_copy(const uint8_t* p, size_t n, std::vector<uint8_t>* keep) {
  keep->assign(p, p + n);
  keep->shrink_to_fit();
  return GgufFile::parse(keep->data(), keep->size(), "bad.gguf");
}

// A refusal is one short line: a hostile file must not be able to put
// newlines, terminal escapes or megabytes of its own text into it.
testing::AssertionResult one_line(const std::string& m) {
  if (m.empty()) return testing::AssertionFailure() << "empty message";
  if (m.size() > 400) return testing::AssertionFailure() << m.size() << "-byte message: " << m.substr(0, 400);
  for (char c : m)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      return testing::AssertionFailure() << "control byte " << int{c} << " in message: " << m;
  return testing::AssertionSuccess();
}

testing::AssertionResult Rejects(const Bytes& b, std::string_view want) {
  std::vector<uint8_t> keep;
  Result<GgufFile> g = parse_copy(b.data(), b.size(), &keep);
  if (g.ok()) return testing::AssertionFailure() << "parsed, expected an error naming \"" << want << "\"";
  if (g.message().find(want) == std::string::npos)
    return testing::AssertionFailure() << "message \"" << g.message() << "\" does not say \"" << want << "\"";
  if (g.message().rfind("bad.gguf: ", 0) != 0)
    return testing::AssertionFailure() << "message \"" << g.message() << "\" does not name the file";
  return one_line(g.message());
}

// Refused, for whatever reason, with a proper message.
testing::AssertionResult Rejects(const Bytes& b) { return Rejects(b, ""); }

testing::AssertionResult Parses(const Bytes& b) {
  std::vector<uint8_t> keep;
  Result<GgufFile> g = parse_copy(b.data(), b.size(), &keep);
  if (!g.ok()) return testing::AssertionFailure() << g.message();
  return testing::AssertionSuccess();
}

// ------------------------------------------------------------------ files

GgufArray int_array(GgufType t, std::vector<int64_t> v) {
  GgufArray a;
  a.elem_type = t;
  a.ints = std::move(v);
  return a;
}

// A small file with a value of every kind and two tensors of different types.
GgufWriter sample_writer() {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_u32("u32", 7);
  w.add_bool("flag", true);
  w.add_f32("f32", 0.25f);
  GgufArray strs;
  strs.elem_type = GgufType::STRING;
  strs.strings = {"<s>", "", "hello"};
  w.add_array("strs", strs);
  w.add_array("ints", int_array(GgufType::INT32, {1, -2, 3}));
  GgufArray bools;
  bools.elem_type = GgufType::BOOL;
  bools.bools = {1, 0};
  w.add_array("bools", bools);
  GgufArray nested;
  nested.elem_type = GgufType::ARRAY;
  nested.arrays = {int_array(GgufType::UINT8, {1, 2}), int_array(GgufType::UINT8, {})};
  w.add_array("nested", nested);
  static const float kF32[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  w.add_tensor("t.f32", {4, 2}, DType::F32, kF32, sizeof kF32);
  static const uint8_t kQ8[34] = {0x3c, 0x00, 1, 2, 3};  // one q8_0 block: f16 scale + 32 int8
  w.add_tensor("t.q8", {32}, DType::Q8_0, kQ8, sizeof kQ8);
  return w;
}

Bytes sample() { return sample_writer().to_bytes(); }

Bytes stories() {
  std::ifstream f(test::shared_path("models/stories260K.gguf"), std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// The smallest prefix of `b` that still holds every byte the reader needs:
// the end of the last tensor's data, or of the header when there are none.
// Only the padding after that may be cut. Worked out from the layout, not
// from what the reader says, and checked against the reader's pointers.
size_t needed_prefix(const Bytes& b) {
  const Layout l = layout_of(b);
  uint64_t alignment = 32;
  for (const KvAt& e : l.kv)
    if (e.key == "general.alignment") alignment = read_at<uint32_t>(b, e.value);
  const size_t data_start = (l.header_end + alignment - 1) / alignment * alignment;
  Result<GgufFile> g = GgufFile::parse(b.data(), b.size());
  EXPECT_TRUE(g.ok()) << g.message();
  size_t need = l.header_end;
  for (const TensorAt& t : l.tensors) {
    const uint32_t n_dims = read_at<uint32_t>(b, t.n_dims);
    uint64_t n = 1;
    for (uint32_t d = 0; d < n_dims; ++d) n *= read_at<uint64_t>(b, t.dims + 8 * d);
    const DTypeInfo* info = dtype_info(read_at<uint32_t>(b, t.type));
    const size_t at = data_start + read_at<uint64_t>(b, t.offset);
    const size_t nbytes = n / info->block_size * info->type_size;
    need = std::max(need, at + nbytes);
    if (g.ok()) {
      const GgufTensor* gt = g->tensor(t.name);
      EXPECT_TRUE(gt && gt->data == b.data() + at && gt->nbytes == nbytes) << t.name;
    }
  }
  return need;
}

// What a message about a cut-short file may say: each names the file's end.
bool names_truncation(const std::string& m) {
  for (const char* s : {"truncated", "past the end", "cannot fit", "left in the file"})
    if (m.find(s) != std::string::npos) return true;
  return false;
}

// Every prefix shorter than `need` fails with a one-line truncation message;
// every longer one parses.
void check_prefixes(const Bytes& b, const std::vector<size_t>& lengths) {
  const size_t need = needed_prefix(b);
  std::vector<uint8_t> keep;
  for (size_t n : lengths) {
    Result<GgufFile> g = parse_copy(b.data(), n, &keep);
    if (n >= need) {
      EXPECT_TRUE(g.ok()) << "prefix " << n << " of " << b.size() << ": " << g.message();
      continue;
    }
    ASSERT_FALSE(g.ok()) << "prefix " << n << " of " << b.size() << " parsed; needs " << need;
    EXPECT_TRUE(names_truncation(g.message())) << "prefix " << n << ": " << g.message();
    EXPECT_TRUE(one_line(g.message())) << "prefix " << n;
  }
}

// ------------------------------------------------------------------ truncation

TEST(GgufBadFiles, SampleIsValid) {
  const Bytes b = sample();
  ASSERT_TRUE(Parses(b));
  const Layout l = layout_of(b);
  ASSERT_EQ(l.kv.size(), 8u);
  ASSERT_EQ(l.tensors.size(), 2u);
  EXPECT_EQ(read_at<uint64_t>(b, l.key("strs").value + 4), 3u);
  EXPECT_EQ(read_at<uint32_t>(b, l.tensor("t.q8").type), static_cast<uint32_t>(DType::Q8_0));
  // The last tensor ends before the file does: a prefix may cut the padding.
  EXPECT_LT(needed_prefix(b), b.size());
}

TEST(GgufBadFiles, EveryPrefixOfASmallFile) {
  const Bytes b = sample();
  std::vector<size_t> all(b.size() + 1);
  for (size_t n = 0; n <= b.size(); ++n) all[n] = n;
  check_prefixes(b, all);
}

TEST(GgufBadFiles, EveryPrefixOfATensorlessFile) {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_u32("general.alignment", 64);  // the header is padded to 64 though nothing follows
  const Bytes b = w.to_bytes();
  ASSERT_GT(b.size(), layout_of(b).header_end);
  std::vector<size_t> all(b.size() + 1);
  for (size_t n = 0; n <= b.size(); ++n) all[n] = n;
  check_prefixes(b, all);
}

TEST(GgufBadFiles, ManyPrefixesOfStories260K) {
  const Bytes b = stories();
  ASSERT_GT(b.size(), 1000000u);
  const Layout l = layout_of(b);
  std::vector<size_t> lengths;
  // Every cut inside the header (each field boundary and each byte between),
  // a sweep through the tensor data, and the cuts around the end.
  for (size_t n = 0; n <= l.header_end + 64; ++n) lengths.push_back(n);
  for (size_t n = 0; n < b.size(); n += 997) lengths.push_back(n);
  for (size_t n = b.size() - 64; n <= b.size(); ++n) lengths.push_back(n);
  check_prefixes(b, lengths);
}

// A cut inside a key-value pair or a tensor info names the key or tensor,
// not just an offset. (The counts are lowered to what comes before the cut,
// else the does-it-fit checks on the counts would fire first.)
TEST(GgufBadFiles, TruncationNamesTheKeyOrTensor) {
  const Bytes b = sample();
  const Layout l = layout_of(b);
  auto cut = [&b](size_t n, uint64_t n_kv, uint64_t n_tensors) {
    Bytes c = patched<uint64_t>(patched<uint64_t>(b, 8, n_tensors), 16, n_kv);
    c.resize(n);
    return c;
  };
  const KvAt& arch = l.key("general.architecture");
  EXPECT_TRUE(Rejects(cut(arch.type + 2, 1, 0), "metadata 'general.architecture': truncated: value type at offset"));
  EXPECT_TRUE(Rejects(cut(arch.value + 3, 1, 0), "metadata 'general.architecture': truncated: string value at offset"));
  EXPECT_TRUE(Rejects(cut(arch.value + 9, 1, 0), "metadata 'general.architecture': string length 5 of string value"));
  EXPECT_TRUE(Rejects(cut(l.key("u32").value + 1, 2, 0), "metadata 'u32': truncated: value at offset"));
  // The count check admits 3 strings of at least 8 bytes; the first two take 19.
  EXPECT_TRUE(Rejects(cut(l.key("strs").value + 12 + 24, 5, 0), "metadata 'strs': truncated: array string at offset"));
  const TensorAt& t = l.tensor("t.f32");
  EXPECT_TRUE(Rejects(cut(t.n_dims + 1, 8, 1), "tensor 't.f32': truncated: dimension count at offset"));
  EXPECT_TRUE(Rejects(cut(t.dims + 12, 8, 1), "tensor 't.f32': truncated: dimension at offset"));
  EXPECT_TRUE(Rejects(cut(t.type, 8, 1), "tensor 't.f32': truncated: tensor type at offset"));
  EXPECT_TRUE(Rejects(cut(t.offset + 7, 8, 1), "tensor 't.f32': truncated: data offset at offset"));
}

// ------------------------------------------------------------------ header

TEST(GgufBadFiles, EmptyFile) { EXPECT_TRUE(Rejects({}, "truncated: magic")); }

TEST(GgufBadFiles, WrongMagic) {
  const Bytes b = sample();
  EXPECT_TRUE(Rejects(patched<uint32_t>(b, 0, 0x47475546), "bad magic"));  // "FUGG": byte-swapped
  EXPECT_TRUE(Rejects(patched<uint32_t>(b, 0, 0x746a6767), "bad magic"));  // "ggjt": pre-GGUF llama.cpp
  EXPECT_TRUE(Rejects(patched<uint32_t>(b, 0, 0), "not a GGUF file"));
}

TEST(GgufBadFiles, UnknownVersions) {
  const Bytes b = sample();
  for (uint32_t v : {0u, 1u, 4u, 0xffffffffu}) {
    SCOPED_TRACE(v);
    EXPECT_TRUE(Rejects(patched<uint32_t>(b, 4, v), cat("unsupported GGUF version ", v)));
  }
  EXPECT_TRUE(Parses(patched<uint32_t>(b, 4, 2)));  // v2 has the same layout
  EXPECT_TRUE(Rejects(patched<uint32_t>(b, 4, 0x03000000), "a big-endian file: only little-endian is supported"));
}

TEST(GgufBadFiles, AbsurdCounts) {
  const Bytes b = sample();
  for (uint64_t n : {uint64_t{1} << 63, uint64_t{1} << 40, kU64Max, uint64_t{1000}}) {
    SCOPED_TRACE(n);
    EXPECT_TRUE(Rejects(patched<uint64_t>(b, 8, n), cat("tensor count ", n, " cannot fit")));
    EXPECT_TRUE(Rejects(patched<uint64_t>(b, 16, n), cat("metadata count ", n, " cannot fit")));
  }
}

TEST(GgufBadFiles, CountsOneTooMany) {
  const Bytes b = sample();
  // Plausible counts: the reader walks on into the next section and finds junk there.
  EXPECT_TRUE(Rejects(patched<uint64_t>(b, 16, 9)));
  EXPECT_TRUE(Rejects(patched<uint64_t>(b, 8, 3)));
}

// ------------------------------------------------------------------ metadata

TEST(GgufBadFiles, AbsurdStringLengths) {
  const Bytes b = sample();
  const Layout l = layout_of(b);
  const KvAt& arch = l.key("general.architecture");
  const KvAt& strs = l.key("strs");
  const TensorAt& t = l.tensor("t.f32");
  struct Case {
    size_t at;
    const char* what;
  };
  for (const Case& c : {Case{arch.key_len, "of metadata key"}, Case{arch.value, "of string value"},
                        Case{strs.value + 12, "of array string"}, Case{t.name_len, "of tensor name"}}) {
    SCOPED_TRACE(c.what);
    const uint64_t left = b.size() - c.at - 8;
    for (uint64_t len : {kU64Max, uint64_t{1} << 63, left + 1}) {
      SCOPED_TRACE(len);
      EXPECT_TRUE(Rejects(patched<uint64_t>(b, c.at, len), cat("string length ", len, " ", c.what)));
    }
    // Exactly the bytes left: the string swallows the rest of the file, which then ends too early.
    EXPECT_TRUE(Rejects(patched<uint64_t>(b, c.at, left)));
  }
}

TEST(GgufBadFiles, UnknownValueTypes) {
  const Bytes b = sample();
  const Layout l = layout_of(b);
  for (uint32_t t : {13u, 14u, 0x80000000u, 0xffffffffu}) {
    SCOPED_TRACE(t);
    EXPECT_TRUE(Rejects(patched<uint32_t>(b, l.key("u32").type, t), cat("metadata 'u32': unknown value type ", t)));
    EXPECT_TRUE(Rejects(patched<uint32_t>(b, l.key("ints").value, t),
                        cat("metadata 'ints': unknown array element type ", t)));
    EXPECT_TRUE(Rejects(patched<uint32_t>(b, l.key("nested").value + 12, t),
                        cat("metadata 'nested': unknown array element type ", t)));
  }
}

TEST(GgufBadFiles, AbsurdArrayLengths) {
  const Bytes b = sample();
  const Layout l = layout_of(b);
  for (const char* key : {"strs", "ints", "bools", "nested"}) {
    SCOPED_TRACE(key);
    const size_t count_at = l.key(key).value + 4;
    for (uint64_t n : {kU64Max, uint64_t{1} << 63, uint64_t{1} << 40, uint64_t{b.size()}}) {
      SCOPED_TRACE(n);
      EXPECT_TRUE(Rejects(patched<uint64_t>(b, count_at, n), cat("metadata '", key, "': array of ", n)));
    }
  }
  // Just past what the rest of the file could hold, by element size.
  const size_t ints_at = l.key("ints").value + 4;
  const uint64_t fit = (b.size() - ints_at - 8) / 4;
  EXPECT_TRUE(Rejects(patched<uint64_t>(b, ints_at, fit + 1), "cannot fit"));
  EXPECT_TRUE(Rejects(patched<uint64_t>(b, ints_at, fit)));  // fits, but eats the tensor infos
  // The inner arrays' counts are checked too.
  EXPECT_TRUE(Rejects(patched<uint64_t>(b, l.key("nested").value + 16, kU64Max), "array of 18446744073709551615 uint8"));
}

GgufArray nest(int depth) {
  GgufArray a = int_array(GgufType::INT8, {1});
  for (int i = 1; i < depth; ++i) {
    GgufArray outer;
    outer.elem_type = GgufType::ARRAY;
    outer.arrays.push_back(std::move(a));
    a = std::move(outer);
  }
  return a;
}

TEST(GgufBadFiles, DeeplyNestedArrays) {
  for (int depth : {1, 2, 8}) {
    GgufWriter w;
    w.add_array("deep", nest(depth));
    EXPECT_TRUE(Parses(w.to_bytes())) << depth;
  }
  for (int depth : {9, 100}) {
    SCOPED_TRACE(depth);
    GgufWriter w;
    w.add_array("deep", nest(depth));
    EXPECT_TRUE(Rejects(w.to_bytes(), "metadata 'deep': arrays nested deeper than 8"));
  }
  // A million levels would overflow the stack of a reader that recursed
  // without a limit. Built by hand: the writer (and GgufArray's destructor)
  // would recurse that deep themselves.
  Bytes b = header(0, 1);
  append_string(b, "deep");
  append<uint32_t>(b, static_cast<uint32_t>(GgufType::ARRAY));
  for (int i = 0; i < 1000000; ++i) {
    append<uint32_t>(b, static_cast<uint32_t>(GgufType::ARRAY));
    append<uint64_t>(b, 1);
  }
  append<uint32_t>(b, static_cast<uint32_t>(GgufType::INT8));
  append<uint64_t>(b, 1);
  append<int8_t>(b, 1);
  EXPECT_TRUE(Rejects(b, "metadata 'deep': arrays nested deeper than 8"));
}

TEST(GgufBadFiles, BoolsOtherThanZeroOrOne) {
  const Bytes b = sample();
  const Layout l = layout_of(b);
  for (uint8_t x : {uint8_t{2}, uint8_t{0x80}, uint8_t{0xff}}) {
    SCOPED_TRACE(int{x});
    EXPECT_TRUE(Rejects(patched<uint8_t>(b, l.key("flag").value, x), cat("metadata 'flag': bool value ", int{x}, " is not 0 or 1")));
    EXPECT_TRUE(Rejects(patched<uint8_t>(b, l.key("bools").value + 13, x), cat("metadata 'bools': bool value ", int{x})));
  }
}

TEST(GgufBadFiles, DuplicateKeys) {
  GgufWriter w = sample_writer();
  w.add_u32("u32", 8);
  EXPECT_TRUE(Rejects(w.to_bytes(), "duplicate metadata key 'u32'"));
}

TEST(GgufBadFiles, BadAlignment) {
  for (uint32_t a : {0u, 3u, 48u, 1u << 21, 0x80000000u}) {
    SCOPED_TRACE(a);
    GgufWriter w = sample_writer();
    w.add_u32("general.alignment", a);
    EXPECT_TRUE(Rejects(w.to_bytes(), cat("general.alignment ", a, " is not a power of two")));
  }
  GgufWriter i32 = sample_writer();
  i32.add_i32("general.alignment", 32);
  EXPECT_TRUE(Rejects(i32.to_bytes(), "general.alignment has type int32, expected uint32"));
  GgufWriter str = sample_writer();
  str.add_string("general.alignment", "32");
  EXPECT_TRUE(Rejects(str.to_bytes(), "general.alignment has type string, expected uint32"));
  GgufWriter u64 = sample_writer();
  u64.add("general.alignment", {GgufType::UINT64, int64_t{32}});
  EXPECT_TRUE(Rejects(u64.to_bytes(), "general.alignment has type uint64, expected uint32"));
  // A valid alignment the tensors do not follow.
  GgufWriter w64 = sample_writer();
  w64.add_u32("general.alignment", 64);
  const Bytes b = w64.to_bytes();
  ASSERT_TRUE(Parses(b));
  EXPECT_TRUE(Rejects(patched<uint32_t>(b, layout_of(b).key("general.alignment").value, 1024),
                      "tensor 't.q8': offset 64 is not aligned to 1024"));
}

// Keys and names come from the file: in a message they are escaped and cut
// short, so a hostile file cannot break the one line or flood it.
TEST(GgufBadFiles, HostileNamesInMessages) {
  GgufWriter w;
  w.add_u32("evil\n\x1b[2Jkey", 1);
  w.add_u32("evil\n\x1b[2Jkey", 2);
  EXPECT_TRUE(Rejects(w.to_bytes(), "duplicate metadata key 'evil\\x0a\\x1b[2Jkey'"));

  const std::string long_key(100000, 'k');
  GgufWriter w2;
  w2.add_u32(long_key, 1);
  w2.add_u32(long_key, 2);
  EXPECT_TRUE(Rejects(w2.to_bytes(), cat("duplicate metadata key '", std::string(64, 'k'), "'... (100000 bytes)")));

  GgufWriter w3;
  w3.add_bool("flag\r", true);
  Bytes b = w3.to_bytes();
  EXPECT_TRUE(Rejects(patched<uint8_t>(b, layout_of(b).key("flag\r").value, 7), "metadata 'flag\\x0d': bool value 7"));

  GgufWriter w4;
  const float x[4] = {};
  w4.add_tensor(std::string("t\0\t", 3), {4}, DType::F32, x, sizeof x);
  b = w4.to_bytes();
  EXPECT_TRUE(Rejects(patched<uint32_t>(b, layout_of(b).tensors[0].type, 99), "tensor 't\\x00\\x09': unknown tensor type 99"));
  w4.add_tensor(std::string("t\0\t", 3), {4}, DType::F32, x, sizeof x);
  EXPECT_TRUE(Rejects(w4.to_bytes(), "duplicate tensor name 't\\x00\\x09'"));
}

// ------------------------------------------------------------------ tensors

TEST(GgufBadFiles, BadDimensionCounts) {
  const Bytes b = sample();
  const size_t at = layout_of(b).tensor("t.f32").n_dims;
  for (uint32_t n : {0u, 5u, 0xffffffffu}) {
    SCOPED_TRACE(n);
    EXPECT_TRUE(Rejects(patched<uint32_t>(b, at, n), cat("tensor 't.f32': ", n, " dimensions (1 to 4 allowed)")));
  }
  EXPECT_TRUE(Rejects(patched<uint32_t>(b, at, 1)));  // the second dim is then read as the type
}

TEST(GgufBadFiles, ZeroAndHugeDims) {
  const Bytes b = sample();
  const Layout l = layout_of(b);
  const TensorAt& t = l.tensor("t.f32");
  EXPECT_TRUE(Rejects(patched<uint64_t>(b, t.dims, 0), "tensor 't.f32': dimension 0 = 0 is zero"));
  EXPECT_TRUE(Rejects(patched<uint64_t>(b, t.dims + 8, 0), "tensor 't.f32': dimension 1 = 0 is zero"));
  // A dim that is negative as int64.
  EXPECT_TRUE(Rejects(patched<uint64_t>(b, t.dims, kU64Max), "dimension 0 = 18446744073709551615 is zero or too large"));
  // Dims whose product overflows int64: 2^32 * 2^32.
  Bytes over = patched<uint64_t>(patched<uint64_t>(b, t.dims, uint64_t{1} << 32), t.dims + 8, uint64_t{1} << 32);
  EXPECT_TRUE(Rejects(over, "dimension 1 = 4294967296 is zero or too large"));
  // Element count fits int64 but the bytes (x4 for f32) overflow 64 bits.
  Bytes bytes_over = patched<uint64_t>(patched<uint64_t>(b, t.dims, uint64_t{1} << 31), t.dims + 8, uint64_t{1} << 31);
  EXPECT_TRUE(Rejects(bytes_over, "tensor 't.f32': 2^64 or more bytes of data cannot fit"));
  // Big but representable: more data than the file holds.
  EXPECT_TRUE(Rejects(patched<uint64_t>(b, t.dims, 1000), "tensor 't.f32': 8000 bytes of data cannot fit"));
}

TEST(GgufBadFiles, UnknownTensorTypes) {
  const Bytes b = sample();
  const size_t at = layout_of(b).tensor("t.f32").type;
  for (uint32_t type : {43u, 99u, 0xffffffffu}) {
    SCOPED_TRACE(type);
    EXPECT_TRUE(Rejects(patched<uint32_t>(b, at, type), cat("tensor 't.f32': unknown tensor type ", type)));
  }
  // ggml types the file may rightly hold are named, so that the user does
  // not take a model that needs a newer tokenhive for a corrupt one.
  EXPECT_TRUE(Rejects(patched<uint32_t>(b, at, 4), "tensor 't.f32': tensor type 4 (q4_2) was removed from ggml"));
  EXPECT_TRUE(Rejects(patched<uint32_t>(b, at, 5), "tensor type 5 (q4_3) was removed from ggml"));
  EXPECT_TRUE(Rejects(patched<uint32_t>(b, at, 31), "tensor type 31 (q4_0_4_4) was removed from ggml"));
  EXPECT_TRUE(Rejects(patched<uint32_t>(b, at, 16), "tensor 't.f32': tensor type 16 (iq2_xxs) is not supported"));
  EXPECT_TRUE(Rejects(patched<uint32_t>(b, at, 39), "tensor type 39 (mxfp4) is not supported"));
}

TEST(GgufBadFiles, RowNotAMultipleOfTheBlock) {
  GgufWriter w;
  const uint8_t q[34] = {};
  w.add_tensor("q", {40}, DType::Q8_0, q, sizeof q);
  EXPECT_TRUE(Rejects(w.to_bytes(), "tensor 'q': row length 40 is not a multiple of the q8_0 block size 32"));
  // The block rule is about rows: other dims may be anything.
  const Bytes b = sample();
  const Layout l = layout_of(b);
  const TensorAt& t = l.tensor("t.q8");
  Bytes two_d = patched<uint32_t>(b, t.type, static_cast<uint32_t>(DType::F32));
  EXPECT_TRUE(Parses(patched<uint64_t>(two_d, t.dims, 3)));
  EXPECT_TRUE(Rejects(patched<uint64_t>(b, t.dims, 16), "row length 16 is not a multiple of the q8_0 block size 32"));
}

TEST(GgufBadFiles, TensorExtentsOutsideTheFile) {
  const Bytes b = sample();
  const Layout l = layout_of(b);
  const TensorAt& q = l.tensor("t.q8");
  const uint64_t data_start = (l.header_end + 31) / 32 * 32;
  const uint64_t data_size = b.size() - data_start;
  // Offset past the end (aligned, so only the extent is wrong).
  const uint64_t past = (data_size + 31) / 32 * 32 + 32;
  EXPECT_TRUE(Rejects(patched<uint64_t>(b, q.offset, past),
                      cat("tensor 't.q8': data offset ", past, " lies past the end of the ", data_size, "-byte data section")));
  // The offset is in the file but the data runs past its end.
  const uint64_t last = data_size / 32 * 32;
  EXPECT_TRUE(Rejects(patched<uint64_t>(b, q.offset, last),
                      cat("tensor 't.q8': data at [", last, ", ", last + 34, ") runs past the end")));
  // An offset so large that offset + size wraps around 2^64: the message
  // must not print a wrapped end (it once said "data at [18446744073709551584, 2)").
  const uint64_t huge = kU64Max / 32 * 32;
  EXPECT_TRUE(Rejects(patched<uint64_t>(b, q.offset, huge), cat("data offset ", huge, " lies past the end")));
  // The file ends before the data section starts.
  Bytes cut(b.begin(), b.begin() + static_cast<ptrdiff_t>(l.header_end));
  EXPECT_TRUE(Rejects(cut, "the tensor data section at offset"));
}

TEST(GgufBadFiles, MisalignedOffsets) {
  const Bytes b = sample();
  const size_t at = layout_of(b).tensor("t.q8").offset;
  const uint64_t off = read_at<uint64_t>(b, at);
  for (uint64_t d : {1, 4, 16, 31}) {
    SCOPED_TRACE(d);
    EXPECT_TRUE(Rejects(patched<uint64_t>(b, at, off + d), cat("tensor 't.q8': offset ", off + d, " is not aligned to 32")));
  }
}

TEST(GgufBadFiles, OverlappingTensors) {
  const Bytes b = sample();
  const Layout l = layout_of(b);
  // The same offset twice.
  EXPECT_TRUE(Rejects(patched<uint64_t>(b, l.tensor("t.q8").offset, 0),
                      "tensor 't.q8': data at [0, 34) overlaps tensor 't.f32' at [0, 32)"));
  // t.f32 grown to 64 bytes runs into t.q8 at 32.
  EXPECT_TRUE(Rejects(patched<uint64_t>(b, l.tensor("t.f32").dims + 8, 4),
                      "tensor 't.q8': data at [32, 66) overlaps tensor 't.f32' at [0, 64)"));
  // Out of order but apart is fine.
  Bytes swapped = patched<uint64_t>(patched<uint64_t>(b, l.tensor("t.q8").offset, 0), l.tensor("t.f32").offset, 64);
  EXPECT_TRUE(Parses(swapped));
}

TEST(GgufBadFiles, DuplicateTensorNames) {
  GgufWriter w = sample_writer();
  const float x[4] = {};
  w.add_tensor("t.f32", {4}, DType::F32, x, sizeof x);
  EXPECT_TRUE(Rejects(w.to_bytes(), "duplicate tensor name 't.f32'"));
}

// ------------------------------------------------------------------ huge files

// A 256 GiB "file" of zero pages, of which only the header is ever written or
// read: it lets a count pass every does-it-fit check (the bytes are there) and
// shows what the reader allocates on the count's word alone. A real model is
// tens of GiB, so a corrupt count in one must not turn into a bad_alloc.
class SparseImage {
 public:
  static constexpr size_t kSize = size_t{1} << 38;
  explicit SparseImage(const Bytes& head) {
    void* p = mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return;
    data_ = static_cast<uint8_t*>(p);
    std::memcpy(data_, head.data(), head.size());
  }
  ~SparseImage() {
    if (data_) munmap(data_, kSize);
  }
  SparseImage(const SparseImage&) = delete;
  SparseImage& operator=(const SparseImage&) = delete;
  bool ok() const { return data_ != nullptr; }
  std::string parse_error() const {
    Result<GgufFile> g = GgufFile::parse(data_, kSize, "huge.gguf");
    return g.ok() ? "parsed" : g.message();
  }

 private:
  uint8_t* data_ = nullptr;
};

#define SPARSE_REJECTS(head, want)                                                  \
  do {                                                                              \
    SparseImage img(head);                                                          \
    if (!img.ok()) GTEST_SKIP() << "cannot map 256 GiB of address space";          \
    const std::string m = img.parse_error();                                        \
    EXPECT_NE(m.find(want), std::string::npos) << m;                                \
    EXPECT_TRUE(one_line(m));                                                       \
  } while (0)

// Before: reserve(n) for 2^34 key-value pairs (about 1.3 TB) threw bad_alloc.
TEST(GgufBadFiles, HugeMetadataCountInAHugeFile) {
  // Zeros after the header read as key "" = uint8 0, twice.
  SPARSE_REJECTS(header(0, uint64_t{1} << 34), "duplicate metadata key ''");
}

TEST(GgufBadFiles, HugeTensorCountInAHugeFile) {
  // Zeros after the header read as a tensor "" with 0 dimensions.
  SPARSE_REJECTS(header(uint64_t{1} << 32, 0), "0 dimensions");
}

// Before: resize(n) of 2^34 std::strings (512 GiB) ahead of reading the first.
TEST(GgufBadFiles, HugeStringArrayInAHugeFile) {
  Bytes b = header(0, 1);
  append_string(b, "tokens");
  append<uint32_t>(b, static_cast<uint32_t>(GgufType::ARRAY));
  append<uint32_t>(b, static_cast<uint32_t>(GgufType::STRING));
  append<uint64_t>(b, uint64_t{1} << 34);
  append<uint64_t>(b, kU64Max);  // the first string's length
  SPARSE_REJECTS(b, "string length 18446744073709551615 of array string");
}

// Before: resize(n) of 2^33 nested arrays (1 TiB), and again at every level.
TEST(GgufBadFiles, HugeNestedArrayInAHugeFile) {
  Bytes b = header(0, 1);
  append_string(b, "a");
  append<uint32_t>(b, static_cast<uint32_t>(GgufType::ARRAY));
  append<uint32_t>(b, static_cast<uint32_t>(GgufType::ARRAY));
  append<uint64_t>(b, uint64_t{1} << 33);
  append<uint32_t>(b, static_cast<uint32_t>(GgufType::ARRAY));
  append<uint64_t>(b, uint64_t{1} << 33);
  append<uint32_t>(b, 99);  // the innermost array's element type
  SPARSE_REJECTS(b, "unknown array element type 99");
}

// ------------------------------------------------------------------ stories260K

// The same breakages in a real file, where the fields sit among 48 tensors
// and a 512-entry vocabulary.
TEST(GgufBadFiles, BrokenStories260K) {
  const Bytes b = stories();
  ASSERT_TRUE(Parses(b));
  const Layout l = layout_of(b);
  const KvAt& tokens = l.key("tokenizer.ggml.tokens");
  EXPECT_TRUE(Rejects(patched<uint64_t>(b, tokens.value + 4, uint64_t{1} << 40),
                      "metadata 'tokenizer.ggml.tokens': array of 1099511627776 string cannot fit"));
  EXPECT_TRUE(Rejects(patched<uint64_t>(b, tokens.value + 12, kU64Max), "string length 18446744073709551615 of array string"));
  EXPECT_TRUE(Rejects(patched<uint32_t>(b, tokens.value, 13), "unknown array element type 13"));
  const TensorAt& last = l.tensors.back();
  EXPECT_TRUE(Rejects(patched<uint32_t>(b, last.type, 5), cat("tensor '", last.name, "': tensor type 5 (q4_3)")));
  EXPECT_TRUE(Rejects(patched<uint64_t>(b, last.offset, read_at<uint64_t>(b, last.offset) + 8), "is not aligned to 32"));
  const TensorAt& q = l.tensor("blk.4.attn_q.weight");
  EXPECT_TRUE(Rejects(patched<uint64_t>(b, q.dims + 8, uint64_t{1} << 40), "cannot fit in a 1185376-byte file"));
  EXPECT_TRUE(Rejects(patched<uint64_t>(b, 16, uint64_t{1} << 40), "metadata count 1099511627776 cannot fit"));
}

}  // namespace
}  // namespace th
