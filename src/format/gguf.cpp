#include "format/gguf.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>

namespace th {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr int kMaxDims = 4;              // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 8;
constexpr uint64_t kMaxAlignment = 1u << 20;

// Smallest encoding of a value of each type: lets the reader reject a count
// that cannot fit in the bytes left before it allocates anything.
uint64_t min_value_bytes(GgufType t) {
  switch (t) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::BOOL:
      return 1;
    case GgufType::UINT16:
    case GgufType::INT16:
      return 2;
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::FLOAT32:
      return 4;
    case GgufType::UINT64:
    case GgufType::INT64:
    case GgufType::FLOAT64:
    case GgufType::STRING:  // u64 length
      return 8;
    case GgufType::ARRAY:  // u32 type + u64 count
      return 12;
  }
  return 1;
}

// Strings, nested arrays, key-value pairs and tensor infos take several times
// their smallest encoding in memory, so a count that merely fits in the file
// can still ask for many times the file's size: a corrupt count in a 40 GiB
// model would be a bad_alloc. They are appended as they are read, so memory
// follows what the file really holds; the count only pre-sizes this much.
constexpr uint64_t kMaxUpfrontCount = 4096;
size_t upfront(uint64_t n) { return static_cast<size_t>(std::min(n, kMaxUpfrontCount)); }

// A key or tensor name for a message, quoted. It comes from the file, so
// control bytes are escaped (a newline or a terminal escape would break the
// one-line message) and a long one is cut (a megabyte key would flood it).
std::string quoted(std::string_view s) {
  constexpr size_t kMaxShown = 64;
  static const char kHex[] = "0123456789abcdef";
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < kMaxShown; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f || c == '\\') {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  out += "'";
  if (s.size() > kMaxShown) out += cat("... (", s.size(), " bytes)");
  return out;
}

// ggml type ids that tokenhive has no layout for, named: a model that uses
// one is not corrupt, and "unknown type 16" would suggest that it is.
struct ForeignType {
  uint32_t id;
  const char* name;
  bool removed;  // gone from ggml too
};
constexpr ForeignType kForeignTypes[] = {
    {4, "q4_2", true},        {5, "q4_3", true},        {16, "iq2_xxs", false},
    {17, "iq2_xs", false},    {18, "iq3_xxs", false},   {19, "iq1_s", false},
    {21, "iq3_s", false},     {22, "iq2_s", false},
    {29, "iq1_m", false},     {31, "q4_0_4_4", true},
    {32, "q4_0_4_8", true},   {33, "q4_0_8_8", true},   {34, "tq1_0", false},
    {35, "tq2_0", false},     {36, "iq4_nl_4_4", true}, {37, "iq4_nl_4_8", true},
    {38, "iq4_nl_8_8", true}, {39, "mxfp4", false},     {40, "nvfp4", false},
    {41, "q1_0", false},      {42, "q2_0", false},
};

Status unsupported_type(uint32_t id) {
  for (const ForeignType& t : kForeignTypes)
    if (t.id == id)
      return t.removed ? Status::errorf("tensor type ", id, " (", t.name, ") was removed from ggml; reconvert the model")
                       : Status::errorf("tensor type ", id, " (", t.name, ") is not supported");
  return Status::errorf("unknown tensor type ", id);
}

bool valid_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::FLOAT64); }

/// Bounds-checked little-endian cursor over the file image.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  size_t pos() const { return pos_; }
  size_t left() const { return size_ - pos_; }

  template <class T>
  Status read(T* out, const char* what) {
    if (left() < sizeof(T))
      return Status::errorf("truncated: ", what, " at offset ", pos_, " needs ", sizeof(T),
                            " bytes, ", left(), " left");
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return ok_status();
  }

  Status read_string(std::string* out, const char* what) {
    uint64_t len = 0;
    TH_RETURN_IF_ERROR(read(&len, what));
    if (len > left())
      return Status::errorf("string length ", len, " of ", what, " at offset ", pos_ - 8,
                            " exceeds the ", left(), " bytes left in the file");
    out->assign(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return ok_status();
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Errors from reading a value do not name its key: the caller adds it, once.
Status read_array(Reader& r, GgufArray* a, int depth);

Status read_scalar(Reader& r, GgufType t, GgufValue* v) {
  v->type = t;
  const char* what = "value";
  switch (t) {
    case GgufType::UINT8: { uint8_t x = 0; TH_RETURN_IF_ERROR(r.read(&x, what)); v->v = int64_t{x}; break; }
    case GgufType::INT8: { int8_t x = 0; TH_RETURN_IF_ERROR(r.read(&x, what)); v->v = int64_t{x}; break; }
    case GgufType::UINT16: { uint16_t x = 0; TH_RETURN_IF_ERROR(r.read(&x, what)); v->v = int64_t{x}; break; }
    case GgufType::INT16: { int16_t x = 0; TH_RETURN_IF_ERROR(r.read(&x, what)); v->v = int64_t{x}; break; }
    case GgufType::UINT32: { uint32_t x = 0; TH_RETURN_IF_ERROR(r.read(&x, what)); v->v = int64_t{x}; break; }
    case GgufType::INT32: { int32_t x = 0; TH_RETURN_IF_ERROR(r.read(&x, what)); v->v = int64_t{x}; break; }
    case GgufType::UINT64: { uint64_t x = 0; TH_RETURN_IF_ERROR(r.read(&x, what)); v->v = static_cast<int64_t>(x); break; }
    case GgufType::INT64: { int64_t x = 0; TH_RETURN_IF_ERROR(r.read(&x, what)); v->v = x; break; }
    case GgufType::FLOAT32: { float x = 0; TH_RETURN_IF_ERROR(r.read(&x, what)); v->v = double{x}; break; }
    case GgufType::FLOAT64: { double x = 0; TH_RETURN_IF_ERROR(r.read(&x, what)); v->v = x; break; }
    case GgufType::BOOL: {
      uint8_t x = 0;
      TH_RETURN_IF_ERROR(r.read(&x, what));
      if (x > 1) return Status::errorf("bool value ", int{x}, " is not 0 or 1");
      v->v = x == 1;
      break;
    }
    case GgufType::STRING: {
      std::string s;
      TH_RETURN_IF_ERROR(r.read_string(&s, "string value"));
      v->v = std::move(s);
      break;
    }
    case GgufType::ARRAY: {
      auto a = std::make_shared<GgufArray>();
      TH_RETURN_IF_ERROR(read_array(r, a.get(), 0));
      v->v = std::move(a);
      break;
    }
  }
  return ok_status();
}

Status read_array(Reader& r, GgufArray* a, int depth) {
  if (depth >= kMaxArrayDepth)
    return Status::errorf("arrays nested deeper than ", kMaxArrayDepth);
  uint32_t et = 0;
  uint64_t n = 0;
  TH_RETURN_IF_ERROR(r.read(&et, "array type"));
  if (!valid_type(et)) return Status::errorf("unknown array element type ", et);
  TH_RETURN_IF_ERROR(r.read(&n, "array length"));
  a->elem_type = static_cast<GgufType>(et);
  if (n > r.left() / min_value_bytes(a->elem_type))
    return Status::errorf("array of ", n, " ", gguf_type_name(a->elem_type),
                          " cannot fit in the ", r.left(), " bytes left in the file");
  // Fixed-size elements are sized up front: the check above guarantees that
  // every one of them is there to be read.
  const size_t count = static_cast<size_t>(n);
  switch (a->elem_type) {
    case GgufType::STRING:
      a->strings.reserve(upfront(n));
      for (size_t i = 0; i < count; ++i) {
        std::string s;
        TH_RETURN_IF_ERROR(r.read_string(&s, "array string"));
        a->strings.push_back(std::move(s));
      }
      break;
    case GgufType::ARRAY:
      a->arrays.reserve(upfront(n));
      for (size_t i = 0; i < count; ++i)
        TH_RETURN_IF_ERROR(read_array(r, &a->arrays.emplace_back(), depth + 1));
      break;
    case GgufType::BOOL:
      a->bools.resize(count);
      for (size_t i = 0; i < count; ++i) {
        GgufValue v;
        TH_RETURN_IF_ERROR(read_scalar(r, a->elem_type, &v));
        a->bools[i] = std::get<bool>(v.v) ? 1 : 0;
      }
      break;
    case GgufType::FLOAT32:
    case GgufType::FLOAT64:
      a->floats.resize(count);
      for (size_t i = 0; i < count; ++i) {
        GgufValue v;
        TH_RETURN_IF_ERROR(read_scalar(r, a->elem_type, &v));
        a->floats[i] = std::get<double>(v.v);
      }
      break;
    default:
      a->ints.resize(count);
      for (size_t i = 0; i < count; ++i) {
        GgufValue v;
        TH_RETURN_IF_ERROR(read_scalar(r, a->elem_type, &v));
        a->ints[i] = std::get<int64_t>(v.v);
      }
      break;
  }
  return ok_status();
}

bool is_unsigned(GgufType t) {
  return t == GgufType::UINT8 || t == GgufType::UINT16 || t == GgufType::UINT32 ||
         t == GgufType::UINT64;
}

bool is_integer(GgufType t) {
  return is_unsigned(t) || t == GgufType::INT8 || t == GgufType::INT16 || t == GgufType::INT32 ||
         t == GgufType::INT64;
}

// One tensor's info (name, dims, type, offset) read and checked against the file's size:
// rows whole blocks, the offset aligned, the bytes within the file.
Status read_tensor_info(Reader& r, uint64_t alignment, size_t size, GgufTensor* t) {
  if (Status s = r.read_string(&t->name, "tensor name"); !s.ok()) return s;
  // Whatever goes wrong from here on, the message names the tensor.
  auto fail_t = [&](const Status& s) { return Status::errorf("tensor ", quoted(t->name), ": ", s.message()); };
  uint32_t n_dims = 0;
  if (Status s = r.read(&n_dims, "dimension count"); !s.ok()) return fail_t(s);
  if (n_dims == 0 || n_dims > kMaxDims)
    return fail_t(Status::errorf(n_dims, " dimensions (1 to ", kMaxDims, " allowed)"));
  int64_t n_elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    uint64_t dim = 0;
    if (Status s = r.read(&dim, "dimension"); !s.ok()) return fail_t(s);
    if (dim == 0 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max() / n_elements))
      return fail_t(Status::errorf("dimension ", d, " = ", dim, " is zero or too large"));
    n_elements *= static_cast<int64_t>(dim);
    t->dims.push_back(static_cast<int64_t>(dim));
  }
  uint32_t raw_type = 0;
  if (Status s = r.read(&raw_type, "tensor type"); !s.ok()) return fail_t(s);
  const DTypeInfo* info = raw_type < kFirstOwnDType ? dtype_info(raw_type) : nullptr;
  if (!info) return fail_t(unsupported_type(raw_type));
  t->type = info->type;
  if (t->dims[0] % info->block_size != 0)
    return fail_t(Status::errorf("row length ", t->dims[0], " is not a multiple of the ", info->name,
                                 " block size ", info->block_size));
  if (Status s = r.read(&t->offset, "data offset"); !s.ok()) return fail_t(s);
  if (t->offset % alignment != 0)
    return fail_t(Status::errorf("offset ", t->offset, " is not aligned to ", alignment));
  // n_elements < 2^63 and type_size <= 292: the product fits in 128 bits; check it fits in size_t.
  const unsigned __int128 bytes = static_cast<unsigned __int128>(n_elements / info->block_size) * info->type_size;
  if (bytes > UINT64_MAX)
    return fail_t(Status::errorf("2^64 or more bytes of data cannot fit in a ", size, "-byte file"));
  if (bytes > size)
    return fail_t(Status::errorf(static_cast<uint64_t>(bytes), " bytes of data cannot fit in a ", size, "-byte file"));
  t->nbytes = static_cast<size_t>(bytes);
  return ok_status();
}

}  // namespace

std::string_view gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::UINT8: return "uint8";
    case GgufType::INT8: return "int8";
    case GgufType::UINT16: return "uint16";
    case GgufType::INT16: return "int16";
    case GgufType::UINT32: return "uint32";
    case GgufType::INT32: return "int32";
    case GgufType::FLOAT32: return "float32";
    case GgufType::BOOL: return "bool";
    case GgufType::STRING: return "string";
    case GgufType::ARRAY: return "array";
    case GgufType::UINT64: return "uint64";
    case GgufType::INT64: return "int64";
    case GgufType::FLOAT64: return "float64";
  }
  return "unknown";
}

size_t GgufArray::size() const {
  switch (elem_type) {
    case GgufType::STRING: return strings.size();
    case GgufType::ARRAY: return arrays.size();
    case GgufType::BOOL: return bools.size();
    case GgufType::FLOAT32:
    case GgufType::FLOAT64: return floats.size();
    default: return ints.size();
  }
}

int64_t GgufTensor::n_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

Result<GgufFile> GgufFile::open(const std::string& path) {
  TH_ASSIGN_OR_RETURN(MappedFile mf, MappedFile::open(path));
  const uint8_t* data = mf.data();
  const size_t size = mf.size();
  TH_ASSIGN_OR_RETURN(GgufFile g, parse(data, size, path));
  g.file_ = std::move(mf);  // the mapping does not move: pointers into it stay valid
  return g;
}

Result<GgufFile> GgufFile::adopt(MappedFile image) {
  TH_ASSIGN_OR_RETURN(GgufFile g, parse(image.data(), image.size(), image.path()));
  g.file_ = std::move(image);  // the mapping does not move: pointers into it stay valid
  return g;
}

Result<GgufFile> GgufFile::assemble(std::string name, std::vector<std::pair<std::string, GgufValue>> kv,
                                   std::vector<GgufTensor> tensors, std::vector<MappedFile> maps) {
  GgufFile g;
  g.name_ = std::move(name);
  g.version_ = 3;
  g.kv_ = std::move(kv);
  for (size_t i = 0; i < g.kv_.size(); ++i)
    if (!g.kv_index_.emplace(g.kv_[i].first, i).second)
      return Status::errorf(g.name_, ": duplicate metadata key '", g.kv_[i].first, "'");
  g.tensors_ = std::move(tensors);
  for (size_t i = 0; i < g.tensors_.size(); ++i)
    if (!g.tensor_index_.emplace(g.tensors_[i].name, i).second)
      return Status::errorf(g.name_, ": duplicate tensor '", g.tensors_[i].name, "'");
  g.parts_ = std::move(maps);
  return g;
}

Result<GgufFile> GgufFile::parse(const uint8_t* data, size_t size, std::string name) {
  GgufFile g;
  g.name_ = name;
  auto fail = [&](const Status& s) { return Status::errorf(name, ": ", s.message()); };
  Reader r(data, size);

  uint32_t magic = 0;
  if (Status s = r.read(&magic, "magic"); !s.ok()) return fail(s);
  if (magic != kMagic) return fail(Status::error("not a GGUF file (bad magic)"));
  if (Status s = r.read(&g.version_, "version"); !s.ok()) return fail(s);
  if (g.version_ != 2 && g.version_ != 3) {
    // GGUF v3 allows big-endian files; their version reads byte-swapped here.
    const bool big_endian = g.version_ == 0x02000000 || g.version_ == 0x03000000;
    return fail(Status::errorf("unsupported GGUF version ", g.version_,
                               big_endian ? " (a big-endian file: only little-endian is supported)"
                                          : " (2 and 3 are supported)"));
  }

  uint64_t n_tensors = 0, n_kv = 0;
  if (Status s = r.read(&n_tensors, "tensor count"); !s.ok()) return fail(s);
  if (Status s = r.read(&n_kv, "metadata count"); !s.ok()) return fail(s);
  // A key-value pair takes at least 8 + 4 + 1 bytes; a tensor info at least 8 + 4 + 8 + 4 + 8.
  if (n_kv > r.left() / 13)
    return fail(Status::errorf("metadata count ", n_kv, " cannot fit in a ", size, "-byte file"));
  if (n_tensors > r.left() / 32)
    return fail(Status::errorf("tensor count ", n_tensors, " cannot fit in a ", size, "-byte file"));

  g.kv_.reserve(upfront(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key;
    if (Status s = r.read_string(&key, "metadata key"); !s.ok()) return fail(s);
    // Whatever goes wrong from here on, the message names the key.
    auto fail_kv = [&](const Status& s) { return fail(Status::errorf("metadata ", quoted(key), ": ", s.message())); };
    uint32_t t = 0;
    if (Status s = r.read(&t, "value type"); !s.ok()) return fail_kv(s);
    if (!valid_type(t)) return fail_kv(Status::errorf("unknown value type ", t));
    GgufValue v;
    if (Status s = read_scalar(r, static_cast<GgufType>(t), &v); !s.ok()) return fail_kv(s);
    if (g.kv_index_.count(key)) return fail(Status::errorf("duplicate metadata key ", quoted(key)));
    g.kv_index_.emplace(key, g.kv_.size());
    g.kv_.emplace_back(std::move(key), std::move(v));
  }

  if (const GgufValue* a = g.find("general.alignment")) {
    if (a->type != GgufType::UINT32)
      return fail(Status::errorf("general.alignment has type ", gguf_type_name(a->type), ", expected uint32"));
    const uint64_t al = static_cast<uint64_t>(std::get<int64_t>(a->v));
    if (al == 0 || (al & (al - 1)) != 0 || al > kMaxAlignment)
      return fail(Status::errorf("general.alignment ", al, " is not a power of two up to ", kMaxAlignment));
    g.alignment_ = al;
  }

  g.tensors_.reserve(upfront(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensor t;
    if (Status s = read_tensor_info(r, g.alignment_, size, &t); !s.ok()) return fail(s);
    if (g.tensor_index_.count(t.name)) return fail(Status::errorf("duplicate tensor name ", quoted(t.name)));
    g.tensor_index_.emplace(t.name, g.tensors_.size());
    g.tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment.
  const uint64_t header_end = r.pos();
  const uint64_t data_start = (header_end + g.alignment_ - 1) / g.alignment_ * g.alignment_;
  if (!g.tensors_.empty() && data_start > size)
    return fail(Status::errorf("truncated: the tensor data section at offset ", data_start,
                               " starts past the end of the ", size, "-byte file"));
  const uint64_t data_size = data_start <= size ? size - data_start : 0;
  for (GgufTensor& t : g.tensors_) {
    // Two messages so that offset + nbytes is only printed when it cannot wrap.
    if (t.offset > data_size)
      return fail(Status::errorf("tensor ", quoted(t.name), ": data offset ", t.offset, " lies past the end of the ",
                                 data_size, "-byte data section (file truncated?)"));
    if (t.nbytes > data_size - t.offset)
      return fail(Status::errorf("tensor ", quoted(t.name), ": data at [", t.offset, ", ", t.offset + t.nbytes,
                                 ") runs past the end of the ", data_size, "-byte data section (file truncated?)"));
    t.data = data + data_start + t.offset;
  }
  // Overlapping tensors cannot come from a writer (ggml lays them out one
  // after another): one is a corrupt offset pointing into another's weights,
  // which would load silently as garbage.
  std::vector<const GgufTensor*> by_offset;
  by_offset.reserve(g.tensors_.size());
  for (const GgufTensor& t : g.tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensor& a = *by_offset[i - 1];
    const GgufTensor& b = *by_offset[i];
    if (b.offset < a.offset + a.nbytes)
      return fail(Status::errorf("tensor ", quoted(b.name), ": data at [", b.offset, ", ", b.offset + b.nbytes,
                                 ") overlaps tensor ", quoted(a.name), " at [", a.offset, ", ",
                                 a.offset + a.nbytes, ")"));
  }
  return g;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const GgufTensor* GgufFile::tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {
Status missing(const GgufFile& f, std::string_view key) {
  return Status::errorf(f.name(), ": missing metadata key '", key, "'");
}
Status wrong_type(const GgufFile& f, std::string_view key, GgufType t, const char* want) {
  return Status::errorf(f.name(), ": metadata '", key, "' has type ", gguf_type_name(t), ", expected ", want);
}
}  // namespace

Result<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return missing(*this, key);
  if (v->type != GgufType::STRING) return wrong_type(*this, key, v->type, "string");
  return std::get<std::string>(v->v);
}

Result<uint64_t> GgufFile::get_uint(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return missing(*this, key);
  if (!is_integer(v->type)) return wrong_type(*this, key, v->type, "an integer");
  const int64_t x = std::get<int64_t>(v->v);
  if (!is_unsigned(v->type) && x < 0)
    return Status::errorf(name_, ": metadata '", key, "' is negative (", x, ")");
  return static_cast<uint64_t>(x);
}

Result<int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return missing(*this, key);
  if (!is_integer(v->type)) return wrong_type(*this, key, v->type, "an integer");
  const int64_t x = std::get<int64_t>(v->v);
  if (v->type == GgufType::UINT64 && x < 0)
    return Status::errorf(name_, ": metadata '", key, "' is too large");
  return x;
}

Result<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return missing(*this, key);
  if (v->type == GgufType::FLOAT32 || v->type == GgufType::FLOAT64) return std::get<double>(v->v);
  if (is_integer(v->type)) return static_cast<double>(std::get<int64_t>(v->v));
  return wrong_type(*this, key, v->type, "a number");
}

Result<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return missing(*this, key);
  if (v->type != GgufType::BOOL) return wrong_type(*this, key, v->type, "bool");
  return std::get<bool>(v->v);
}

Result<const GgufArray*> GgufFile::get_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return missing(*this, key);
  if (v->type != GgufType::ARRAY) return wrong_type(*this, key, v->type, "array");
  return static_cast<const GgufArray*>(std::get<std::shared_ptr<GgufArray>>(v->v).get());
}

// ---------------------------------------------------------------- writer

namespace {

class Bytes {
 public:
  std::vector<uint8_t> b;
  template <class T>
  void put(T x) {
    const size_t at = b.size();
    b.resize(at + sizeof(T));
    std::memcpy(b.data() + at, &x, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
  }
};

void put_scalar(Bytes& out, GgufType t, const GgufValue& v);

void put_array(Bytes& out, const GgufArray& a) {
  out.put<uint32_t>(static_cast<uint32_t>(a.elem_type));
  out.put<uint64_t>(a.size());
  switch (a.elem_type) {
    case GgufType::STRING:
      for (const auto& s : a.strings) out.put_string(s);
      break;
    case GgufType::ARRAY:
      for (const auto& x : a.arrays) put_array(out, x);
      break;
    case GgufType::BOOL:
      for (uint8_t x : a.bools) out.put<uint8_t>(x ? 1 : 0);
      break;
    case GgufType::FLOAT32:
    case GgufType::FLOAT64:
      for (double x : a.floats) put_scalar(out, a.elem_type, GgufValue{a.elem_type, x});
      break;
    default:
      for (int64_t x : a.ints) put_scalar(out, a.elem_type, GgufValue{a.elem_type, x});
      break;
  }
}

void put_scalar(Bytes& out, GgufType t, const GgufValue& v) {
  switch (t) {
    case GgufType::UINT8: out.put<uint8_t>(static_cast<uint8_t>(std::get<int64_t>(v.v))); break;
    case GgufType::INT8: out.put<int8_t>(static_cast<int8_t>(std::get<int64_t>(v.v))); break;
    case GgufType::UINT16: out.put<uint16_t>(static_cast<uint16_t>(std::get<int64_t>(v.v))); break;
    case GgufType::INT16: out.put<int16_t>(static_cast<int16_t>(std::get<int64_t>(v.v))); break;
    case GgufType::UINT32: out.put<uint32_t>(static_cast<uint32_t>(std::get<int64_t>(v.v))); break;
    case GgufType::INT32: out.put<int32_t>(static_cast<int32_t>(std::get<int64_t>(v.v))); break;
    case GgufType::UINT64: out.put<uint64_t>(static_cast<uint64_t>(std::get<int64_t>(v.v))); break;
    case GgufType::INT64: out.put<int64_t>(std::get<int64_t>(v.v)); break;
    case GgufType::FLOAT32: out.put<float>(static_cast<float>(std::get<double>(v.v))); break;
    case GgufType::FLOAT64: out.put<double>(std::get<double>(v.v)); break;
    case GgufType::BOOL: out.put<uint8_t>(std::get<bool>(v.v) ? 1 : 0); break;
    case GgufType::STRING: out.put_string(std::get<std::string>(v.v)); break;
    case GgufType::ARRAY: put_array(out, *std::get<std::shared_ptr<GgufArray>>(v.v)); break;
  }
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

void GgufWriter::add(std::string key, GgufValue value) { kv_.emplace_back(std::move(key), std::move(value)); }
void GgufWriter::add_string(std::string key, std::string v) { add(std::move(key), {GgufType::STRING, std::move(v)}); }
void GgufWriter::add_u32(std::string key, uint32_t v) { add(std::move(key), {GgufType::UINT32, int64_t{v}}); }
void GgufWriter::add_i32(std::string key, int32_t v) { add(std::move(key), {GgufType::INT32, int64_t{v}}); }
void GgufWriter::add_f32(std::string key, float v) { add(std::move(key), {GgufType::FLOAT32, double{v}}); }
void GgufWriter::add_bool(std::string key, bool v) { add(std::move(key), {GgufType::BOOL, v}); }
void GgufWriter::add_array(std::string key, GgufArray a) {
  add(std::move(key), {GgufType::ARRAY, std::make_shared<GgufArray>(std::move(a))});
}

void GgufWriter::add_tensor(std::string name, std::vector<int64_t> dims, DType type, const void* data,
                            size_t nbytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  tensors_.push_back({std::move(name), std::move(dims), type, nbytes, std::vector<uint8_t>(p, p + nbytes), {}});
}

void GgufWriter::add_tensor_lazy(std::string name, std::vector<int64_t> dims, DType type,
                                 std::function<void(uint8_t*, size_t)> fill) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  const size_t nbytes = row_bytes(type, n);
  tensors_.push_back({std::move(name), std::move(dims), type, nbytes, {}, std::move(fill)});
}

uint64_t GgufWriter::layout_alignment() const {
  for (const auto& [k, v] : kv_) {
    if (k != "general.alignment" || v.type != GgufType::UINT32) continue;
    const auto a = static_cast<uint64_t>(std::get<int64_t>(v.v));
    // An alignment the reader refuses is written as given (tests make such
    // files) but not laid out by: 2^31 would pad the file by gigabytes.
    if (a != 0 && (a & (a - 1)) == 0 && a <= kMaxAlignment) return a;
  }
  return alignment_;
}

std::vector<uint8_t> GgufWriter::header_bytes(std::vector<uint64_t>* offsets) const {
  const uint64_t align = layout_alignment();
  Bytes out;
  out.put<uint32_t>(kMagic);
  out.put<uint32_t>(3);
  out.put<uint64_t>(tensors_.size());
  bool has_alignment = false;
  for (const auto& [k, v] : kv_) has_alignment |= k == "general.alignment";
  out.put<uint64_t>(kv_.size() + (has_alignment || alignment_ == 32 ? 0 : 1));
  for (const auto& [k, v] : kv_) {
    out.put_string(k);
    out.put<uint32_t>(static_cast<uint32_t>(v.type));
    put_scalar(out, v.type, v);
  }
  if (!has_alignment && alignment_ != 32) {
    out.put_string("general.alignment");
    out.put<uint32_t>(static_cast<uint32_t>(GgufType::UINT32));
    out.put<uint32_t>(alignment_);
  }
  uint64_t offset = 0;
  offsets->clear();
  for (const auto& t : tensors_) {
    out.put_string(t.name);
    out.put<uint32_t>(static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) out.put<uint64_t>(static_cast<uint64_t>(d));
    out.put<uint32_t>(static_cast<uint32_t>(t.type));
    out.put<uint64_t>(offset);
    offsets->push_back(offset);
    offset = align_up(offset + t.nbytes, align);
  }
  out.b.resize(align_up(out.b.size(), align), 0);
  return std::move(out.b);
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  const uint64_t align = layout_alignment();
  std::vector<uint64_t> offsets;
  std::vector<uint8_t> out = header_bytes(&offsets);
  const size_t data_start = out.size();
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const auto& t = tensors_[i];
    out.resize(data_start + offsets[i] + t.nbytes, 0);
    uint8_t* dst = out.data() + data_start + offsets[i];
    if (t.fill) t.fill(dst, t.nbytes);
    else std::memcpy(dst, t.data.data(), t.nbytes);
    out.resize(data_start + align_up(offsets[i] + t.nbytes, align), 0);
  }
  return out;
}

Status GgufWriter::write(const std::string& path) const {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return Status::errorf(path, ": cannot open for writing");
  const uint64_t align = layout_alignment();
  std::vector<uint64_t> offsets;
  const std::vector<uint8_t> header = header_bytes(&offsets);
  f.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size()));
  uint64_t pos = 0;
  std::vector<uint8_t> buf;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const auto& t = tensors_[i];
    const uint64_t end = align_up(offsets[i] + t.nbytes, align);
    buf.assign(static_cast<size_t>(end - pos), 0);
    uint8_t* dst = buf.data() + (offsets[i] - pos);
    if (t.fill) t.fill(dst, t.nbytes);
    else std::memcpy(dst, t.data.data(), t.nbytes);
    f.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
    pos = end;
  }
  f.flush();
  if (!f) return Status::errorf(path, ": write failed");
  return ok_status();
}

}  // namespace th
