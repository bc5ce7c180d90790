// GGUF v2/v3 reader (../shared/ENGINE-FACTS.md §1). The parser walks the
// header, metadata and tensor table with one bounds-checked cursor; every
// length and count is checked against the bytes that are left before anything
// is allocated, so a hostile file costs at most a small multiple of its size.
#include "gguf/gguf_file.h"

#include <bit>
#include <cstring>
#include <limits>
#include <utility>

namespace mx::gguf {

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader assumes a little-endian host");

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as u32 LE
constexpr uint64_t kMaxStringBytes = uint64_t{1} << 30;
constexpr uint64_t kMaxArrayElements = uint64_t{1} << 30;
constexpr int64_t kMaxTensorElements = int64_t{1} << 40;
constexpr size_t kMaxTensorNameBytes = 63;  // ggml's GGML_MAX_NAME is 64 with the NUL
constexpr uint32_t kMaxDims = 4;
constexpr uint64_t kMaxAlignment = uint64_t{1} << 30;
// Smallest encodings, used to bound counts before allocating:
// key length + 1-byte key + value type + 1-byte value.
constexpr size_t kMinKvBytes = 8 + 1 + 4 + 1;
// name length + 1-byte name + n_dims + one dim + type + offset.
constexpr size_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;

bool IsKnownValueType(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::kF64); }

bool IsIntegerType(ValueType t) {  // bool excluded
  switch (t) {
    case ValueType::kU8: case ValueType::kI8: case ValueType::kU16: case ValueType::kI16:
    case ValueType::kU32: case ValueType::kI32: case ValueType::kU64: case ValueType::kI64:
      return true;
    default:
      return false;
  }
}

bool IsFloatType(ValueType t) { return t == ValueType::kF32 || t == ValueType::kF64; }

// Bytes of the smallest encoding of one value of type `t`.
size_t MinValueBytes(ValueType t) {
  switch (t) {
    case ValueType::kU8: case ValueType::kI8: case ValueType::kBool: return 1;
    case ValueType::kU16: case ValueType::kI16: return 2;
    case ValueType::kU32: case ValueType::kI32: case ValueType::kF32: return 4;
    case ValueType::kString: return 8;
    case ValueType::kArray: return 4 + 8;
    case ValueType::kU64: case ValueType::kI64: case ValueType::kF64: return 8;
  }
  return 1;
}

// A name from the file, quoted for a message: non-printable bytes escaped,
// long names cut, so that garbage input yields a readable error.
std::string Quote(std::string_view s) {
  constexpr size_t kMaxShown = 80;
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < kMaxShown; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F && c != '\'' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (s.size() > kMaxShown) out += "...(" + std::to_string(s.size()) + " bytes)";
  return out + "'";
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

std::string Hex32(uint32_t v) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "0x";
  for (int shift = 28; shift >= 0; shift -= 4) out += kHex[(v >> shift) & 15];
  return out;
}

std::string Str(uint64_t v) { return std::to_string(v); }

}  // namespace

const char* ValueTypeName(ValueType t) {
  switch (t) {
    case ValueType::kU8: return "uint8";
    case ValueType::kI8: return "int8";
    case ValueType::kU16: return "uint16";
    case ValueType::kI16: return "int16";
    case ValueType::kU32: return "uint32";
    case ValueType::kI32: return "int32";
    case ValueType::kF32: return "float32";
    case ValueType::kBool: return "bool";
    case ValueType::kString: return "string";
    case ValueType::kArray: return "array";
    case ValueType::kU64: return "uint64";
    case ValueType::kI64: return "int64";
    case ValueType::kF64: return "float64";
  }
  return "unknown";
}

bool Value::is_integer() const { return IsIntegerType(type) || type == ValueType::kBool; }
bool Value::is_float() const { return IsFloatType(type); }

size_t Value::array_size() const {
  if (type != ValueType::kArray) return 0;
  if (array_type == ValueType::kString) return strings.size();
  if (IsFloatType(array_type)) return floats.size();
  return ints.size();
}

int64_t TensorInfo::n_elements() const {
  if (shape.empty()) return 0;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorInfo::Describe() const {
  return name + " " + DTypeName(type) + " " + ShapeString(shape);
}

// Parses the bytes of a GgufFile into its fields. One instance per parse.
class GgufParser {
 public:
  explicit GgufParser(GgufFile* file) : f_(*file), data_(file->data_), size_(file->size_) {}

  Status Parse() {
    uint64_t n_tensors = 0, n_kv = 0;
    MX_RETURN_IF_ERROR(ParseHeader(&n_tensors, &n_kv));
    for (uint64_t i = 0; i < n_kv; ++i) MX_RETURN_IF_ERROR(ParseKv(i));
    MX_RETURN_IF_ERROR(ApplyAlignment());
    item_.clear();
    if (n_tensors > left() / kMinTensorInfoBytes) {
      return Corrupt("tensor count " + Str(n_tensors) + " needs at least " +
                     Str(kMinTensorInfoBytes) + " bytes each, only " + Str(left()) +
                     " bytes left after the metadata (offset " + Str(pos_) + ")");
    }
    f_.tensors_.reserve(n_tensors);
    for (uint64_t i = 0; i < n_tensors; ++i) MX_RETURN_IF_ERROR(ParseTensorInfo(i));
    return PlaceTensors();
  }

 private:
  // --- cursor -------------------------------------------------------------
  size_t left() const { return size_ - pos_; }

  Status Need(size_t n, const char* what) const {
    if (n <= left()) return Status::Ok();
    return Corrupt(std::string("truncated: ") + what + " at offset " + Str(pos_) + " needs " +
                   Str(n) + " bytes, " + Str(left()) + " left (file size " + Str(size_) + ")");
  }

  template <typename T>
  Status Read(T* out, const char* what) {
    MX_RETURN_IF_ERROR(Need(sizeof(T), what));
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::Ok();
  }

  Status ReadString(std::string* out, const char* what) {
    size_t at = pos_;
    uint64_t len = 0;
    MX_RETURN_IF_ERROR(Read(&len, what));
    if (len > kMaxStringBytes) {
      return Corrupt(std::string(what) + " length " + Str(len) + " at offset " + Str(at) +
                     " exceeds the limit of 2^30 bytes");
    }
    if (len > left()) {
      return Corrupt(std::string(what) + " length " + Str(len) + " at offset " + Str(at) +
                     " runs past end of file (" + Str(left()) + " bytes left, file size " +
                     Str(size_) + ")");
    }
    out->assign(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return Status::Ok();
  }

  // --- errors -------------------------------------------------------------
  std::string Prefix() const {
    return item_.empty() ? f_.name_ + ": " : f_.name_ + ": " + item_ + ": ";
  }
  Status Corrupt(const std::string& detail) const {
    return Status::Corruption(Prefix() + detail);
  }
  Status Unsupported(const std::string& detail) const {
    return Status::NotSupported(Prefix() + detail);
  }

  // --- sections -----------------------------------------------------------
  Status ParseHeader(uint64_t* n_tensors, uint64_t* n_kv) {
    item_ = "header";
    uint32_t magic = 0;
    MX_RETURN_IF_ERROR(Read(&magic, "magic"));
    if (magic != kMagic) {
      return Corrupt("bad magic " + Hex32(magic) + " at offset 0, expected " + Hex32(kMagic) +
                     " (\"GGUF\"): not a GGUF file");
    }
    uint32_t version = 0;
    MX_RETURN_IF_ERROR(Read(&version, "version"));
    if (version != 0 && (version & 0xFFFF) == 0) {
      return Unsupported("version field " + Hex32(version) + " at offset 4 looks byte-swapped (" +
                         "big-endian file, version " + Str(__builtin_bswap32(version)) +
                         "); only little-endian GGUF is supported");
    }
    if (version != 2 && version != 3) {
      return Unsupported("GGUF version " + Str(version) + " is not supported (expected 2 or 3)");
    }
    f_.version_ = version;
    MX_RETURN_IF_ERROR(Read(n_tensors, "tensor count"));
    MX_RETURN_IF_ERROR(Read(n_kv, "metadata key count"));
    if (*n_tensors > left() / kMinTensorInfoBytes) {
      return Corrupt("tensor count " + Str(*n_tensors) + " at offset 8 needs at least " +
                     Str(kMinTensorInfoBytes) + " bytes each, only " + Str(left()) +
                     " bytes left (file size " + Str(size_) + ")");
    }
    if (*n_kv > left() / kMinKvBytes) {
      return Corrupt("metadata key count " + Str(*n_kv) + " at offset 16 needs at least " +
                     Str(kMinKvBytes) + " bytes each, only " + Str(left()) +
                     " bytes left (file size " + Str(size_) + ")");
    }
    return Status::Ok();
  }

  Status ParseKv(uint64_t index) {
    size_t start = pos_;
    item_ = "key #" + Str(index) + " at offset " + Str(start);
    std::string key;
    MX_RETURN_IF_ERROR(ReadString(&key, "key"));
    if (key.empty()) return Corrupt("empty key");
    item_ = "key " + Quote(key);
    if (f_.metadata_.count(key)) {
      return Corrupt("duplicate key (second definition at offset " + Str(start) + ")");
    }
    size_t type_at = pos_;
    uint32_t type = 0;
    MX_RETURN_IF_ERROR(Read(&type, "value type"));
    if (!IsKnownValueType(type)) {
      return Corrupt("unknown value type " + Str(type) + " at offset " + Str(type_at) +
                     " (expected 0..12)");
    }
    Value v;
    v.type = static_cast<ValueType>(type);
    MX_RETURN_IF_ERROR(ParseValue(&v));
    f_.metadata_.emplace(std::move(key), std::move(v));
    return Status::Ok();
  }

  // Reads one T and widens it to int64 (a u64 above INT64_MAX wraps; bits kept).
  template <typename T>
  Status ReadWidened(int64_t* i, const char* what) {
    T x{};
    MX_RETURN_IF_ERROR(Read(&x, what));
    *i = static_cast<int64_t>(x);
    return Status::Ok();
  }

  // Reads one integer or bool (as 0/1) of type `t`.
  Status ReadInteger(ValueType t, int64_t* i, const char* what) {
    switch (t) {
      case ValueType::kU8: return ReadWidened<uint8_t>(i, what);
      case ValueType::kI8: return ReadWidened<int8_t>(i, what);
      case ValueType::kU16: return ReadWidened<uint16_t>(i, what);
      case ValueType::kI16: return ReadWidened<int16_t>(i, what);
      case ValueType::kU32: return ReadWidened<uint32_t>(i, what);
      case ValueType::kI32: return ReadWidened<int32_t>(i, what);
      case ValueType::kU64: return ReadWidened<uint64_t>(i, what);
      case ValueType::kI64: return ReadWidened<int64_t>(i, what);
      case ValueType::kBool:
        MX_RETURN_IF_ERROR(ReadWidened<uint8_t>(i, what));
        *i = *i != 0;
        return Status::Ok();
      default:
        return Corrupt("internal: not an integer type");
    }
  }

  Status ReadFloat(ValueType t, double* f, const char* what) {
    if (t == ValueType::kF32) {
      float x = 0;
      MX_RETURN_IF_ERROR(Read(&x, what));
      *f = x;
    } else {
      MX_RETURN_IF_ERROR(Read(f, what));
    }
    return Status::Ok();
  }

  Status ParseValue(Value* v) {
    if (v->type == ValueType::kArray) return ParseArray(v);
    if (v->type == ValueType::kString) return ReadString(&v->str, "string value");
    if (IsFloatType(v->type)) return ReadFloat(v->type, &v->f, "value");
    MX_RETURN_IF_ERROR(ReadInteger(v->type, &v->i, "value"));
    v->u = static_cast<uint64_t>(v->i);
    return Status::Ok();
  }

  Status ParseArray(Value* v) {
    size_t type_at = pos_;
    uint32_t element_type = 0;
    MX_RETURN_IF_ERROR(Read(&element_type, "array element type"));
    if (element_type == static_cast<uint32_t>(ValueType::kArray)) {
      return Corrupt("nested arrays are not supported (element type 9 at offset " +
                     Str(type_at) + ")");
    }
    if (!IsKnownValueType(element_type)) {
      return Corrupt("unknown array element type " + Str(element_type) + " at offset " +
                     Str(type_at) + " (expected 0..12)");
    }
    ValueType et = static_cast<ValueType>(element_type);
    v->array_type = et;
    size_t count_at = pos_;
    uint64_t n = 0;
    MX_RETURN_IF_ERROR(Read(&n, "array length"));
    if (n > kMaxArrayElements) {
      return Corrupt("array length " + Str(n) + " at offset " + Str(count_at) +
                     " exceeds the limit of 2^30 elements");
    }
    size_t min_bytes = MinValueBytes(et);
    if (n > left() / min_bytes) {
      return Corrupt("array of " + Str(n) + " " + ValueTypeName(et) + " at offset " +
                     Str(count_at) + " needs at least " + Str(n * min_bytes) + " bytes, only " +
                     Str(left()) + " left (file size " + Str(size_) + ")");
    }
    if (et == ValueType::kString) {
      v->strings.resize(n);
      for (auto& s : v->strings) MX_RETURN_IF_ERROR(ReadString(&s, "array string"));
    } else if (IsFloatType(et)) {
      v->floats.resize(n);
      for (auto& f : v->floats) MX_RETURN_IF_ERROR(ReadFloat(et, &f, "array element"));
    } else {
      v->ints.resize(n);
      for (auto& i : v->ints) MX_RETURN_IF_ERROR(ReadInteger(et, &i, "array element"));
    }
    return Status::Ok();
  }

  Status ApplyAlignment() {
    auto it = f_.metadata_.find("general.alignment");
    if (it == f_.metadata_.end()) return Status::Ok();
    item_ = "key 'general.alignment'";
    const Value& v = it->second;
    if (!IsIntegerType(v.type)) {
      return Corrupt(std::string("has type ") + ValueTypeName(v.type) + ", expected an integer");
    }
    bool negative = v.type != ValueType::kU64 && v.i < 0;
    if (negative || !std::has_single_bit(v.u) || v.u > kMaxAlignment) {
      std::string shown = negative ? std::to_string(v.i) : Str(v.u);
      return Corrupt("value " + shown + " is not a power of two in [1, 2^30]");
    }
    f_.alignment_ = static_cast<uint32_t>(v.u);
    return Status::Ok();
  }

  Status ParseTensorInfo(uint64_t index) {
    size_t start = pos_;
    item_ = "tensor #" + Str(index) + " at offset " + Str(start);
    TensorInfo t;
    MX_RETURN_IF_ERROR(ReadString(&t.name, "tensor name"));
    if (t.name.empty()) return Corrupt("empty tensor name");
    if (t.name.size() > kMaxTensorNameBytes) {
      return Corrupt("tensor name " + Quote(t.name) + " is " + Str(t.name.size()) +
                     " bytes, the limit is " + Str(kMaxTensorNameBytes));
    }
    item_ = "tensor " + Quote(t.name);
    if (f_.tensor_index_.count(t.name)) {
      return Corrupt("duplicate tensor name (tensor #" + Str(index) + " at offset " +
                     Str(start) + ")");
    }
    size_t dims_at = pos_;
    uint32_t n_dims = 0;
    MX_RETURN_IF_ERROR(Read(&n_dims, "n_dims"));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return Corrupt("n_dims " + Str(n_dims) + " at offset " + Str(dims_at) + ", expected 1.." +
                     Str(kMaxDims));
    }
    int64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      size_t at = pos_;
      int64_t ne = 0;
      MX_RETURN_IF_ERROR(Read(&ne, "dimension"));
      if (ne <= 0) {
        return Corrupt("dimension " + Str(d) + " is " + std::to_string(ne) + " at offset " +
                       Str(at) + ", expected > 0");
      }
      t.shape.push_back(ne);
      if (ne > kMaxTensorElements / n_elements) {
        return Corrupt("shape " + ShapeString(t.shape) + (d + 1 < n_dims ? "..." : "") +
                       " has more than 2^40 elements");
      }
      n_elements *= ne;
    }
    size_t type_at = pos_;
    uint32_t type_id = 0;
    MX_RETURN_IF_ERROR(Read(&type_id, "tensor type"));
    DTypeInfo info = GetDTypeInfo(type_id);
    if (info.name == nullptr) {
      return Unsupported("unsupported tensor type id " + Str(type_id) + " at offset " +
                         Str(type_at));
    }
    t.type = static_cast<DType>(type_id);
    if (t.shape[0] % info.block_values != 0) {
      return Corrupt("row length ne[0] = " + std::to_string(t.shape[0]) +
                     " is not a multiple of the " + info.name + " block size " +
                     std::to_string(info.block_values));
    }
    MX_RETURN_IF_ERROR(Read(&t.offset, "tensor data offset"));
    t.n_bytes = static_cast<size_t>(n_elements / info.block_values) * info.block_bytes;
    f_.tensor_index_.emplace(t.name, f_.tensors_.size());
    f_.tensors_.push_back(std::move(t));
    return Status::Ok();
  }

  // Locates every tensor's bytes in the data section that follows the table.
  Status PlaceTensors() {
    item_.clear();
    const uint64_t align = f_.alignment_;
    const uint64_t table_end = pos_;
    const uint64_t data_start = (table_end + align - 1) / align * align;
    if (f_.tensors_.empty()) {
      return CheckDeclaredEnd(std::max<uint64_t>(data_start, table_end), "the header");
    }
    if (data_start > size_) {
      return Corrupt("data section starts at offset " + Str(data_start) + " (tensor table ends at " +
                     Str(table_end) + ", alignment " + Str(align) + "), past end of file (size " +
                     Str(size_) + ")");
    }
    const uint64_t data_bytes = size_ - data_start;
    uint64_t data_end = data_start;
    for (TensorInfo& t : f_.tensors_) {
      item_ = "tensor " + Quote(t.name);
      if (t.offset % align != 0) {
        return Corrupt("data offset " + Str(t.offset) + " is not a multiple of the alignment " +
                       Str(align));
      }
      if (t.offset > data_bytes || t.n_bytes > data_bytes - t.offset) {
        std::string where = t.offset <= std::numeric_limits<uint64_t>::max() - data_start
                                ? Str(data_start + t.offset)
                                : Str(data_start) + " + " + Str(t.offset);
        return Corrupt("data [offset " + where + ", " + Str(t.n_bytes) +
                       " bytes] runs past end of file (size " + Str(size_) + ")");
      }
      t.data = data_ + data_start + t.offset;
      data_end = std::max<uint64_t>(data_end, data_start + t.offset + t.n_bytes);
    }
    // The writer pads the last tensor to the alignment; nothing may follow.
    return CheckDeclaredEnd((data_end + align - 1) / align * align, "the last tensor's data");
  }

  // A file longer than what its header and tensors declare (`declared_end`:
  // the last tensor's end, padded to the alignment) is refused: the tail is
  // never read by the model, yet hashing or reading the whole file would
  // cost time in its size (a valid model followed by a 10 GB hole).
  Status CheckDeclaredEnd(uint64_t declared_end, std::string_view what_ends) {
    item_.clear();
    if (size_ <= declared_end) return Status::Ok();
    return Corrupt("the file is " + Str(size_) + " bytes, but its header and tensors end at byte " +
                   Str(declared_end) + " (alignment " + Str(f_.alignment_) + "): " +
                   Str(size_ - declared_end) + " bytes follow " + std::string(what_ends));
  }

  GgufFile& f_;
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  std::string item_;  // what is being parsed, for messages: "key 'x'", "tensor 'y'"
};

Result<std::unique_ptr<GgufFile>> GgufFile::Parse(const uint8_t* data, size_t size,
                                                  std::string name) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->data_ = data;
  file->size_ = size;
  file->name_ = std::move(name);
  MX_RETURN_IF_ERROR(GgufParser(file.get()).Parse());
  return Result<std::unique_ptr<GgufFile>>(std::move(file));
}

Result<std::unique_ptr<GgufFile>> GgufFile::Open(Env* env, const std::string& path) {
  MX_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> map, env->MapReadOnly(path));
  MX_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, Parse(map->data(), map->size(), path));
  file->mapping_ = std::move(map);  // the parsed pointers stay valid: same mapping
  return Result<std::unique_ptr<GgufFile>>(std::move(file));
}

// --- lookups and typed getters ------------------------------------------------

const Value* GgufFile::Find(std::string_view key) const {
  auto it = metadata_.find(std::string(key));
  return it == metadata_.end() ? nullptr : &it->second;
}

void GgufFile::DropPages(const uint8_t* p, size_t n) const {
  if (mapping_ == nullptr || p < data_ || p > data_ + size_) return;
  mapping_->DropPages(static_cast<size_t>(p - data_), n);
}

const TensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

std::string TypeString(const Value& v) {
  if (v.type != ValueType::kArray) return ValueTypeName(v.type);
  return std::string("array of ") + ValueTypeName(v.array_type);
}

// Looks `key` up; NotFound naming the file and key when absent.
Result<const Value*> Lookup(const GgufFile& f, std::string_view key) {
  const Value* v = f.Find(key);
  if (v == nullptr) return Status::NotFound(f.path() + ": key '" + std::string(key) + "' not found");
  return v;
}

Status WrongType(const std::string& file, std::string_view key, const Value& v,
                 const char* expected) {
  return Status::InvalidArgument(file + ": key '" + std::string(key) + "' has type " +
                                 TypeString(v) + ", expected " + expected);
}

}  // namespace

Result<std::string> GgufFile::GetString(std::string_view key) const {
  MX_ASSIGN_OR_RETURN(const Value* v, Lookup(*this, key));
  if (v->type != ValueType::kString) return WrongType(name_, key, *v, "string");
  return v->str;
}

Result<int64_t> GgufFile::GetInt(std::string_view key) const {
  MX_ASSIGN_OR_RETURN(const Value* v, Lookup(*this, key));
  if (!IsIntegerType(v->type)) return WrongType(name_, key, *v, "an integer");
  if (v->type == ValueType::kU64 && v->i < 0) {
    return Status::InvalidArgument(name_ + ": key '" + std::string(key) + "' value " +
                                   Str(v->u) + " does not fit in int64");
  }
  return v->i;
}

Result<double> GgufFile::GetFloat(std::string_view key) const {
  MX_ASSIGN_OR_RETURN(const Value* v, Lookup(*this, key));
  if (IsFloatType(v->type)) return v->f;
  if (v->type == ValueType::kU64) return static_cast<double>(v->u);
  if (IsIntegerType(v->type)) return static_cast<double>(v->i);
  return WrongType(name_, key, *v, "a float or an integer");
}

Result<bool> GgufFile::GetBool(std::string_view key) const {
  MX_ASSIGN_OR_RETURN(const Value* v, Lookup(*this, key));
  if (v->type != ValueType::kBool) return WrongType(name_, key, *v, "bool");
  return v->i != 0;
}

Result<std::vector<int64_t>> GgufFile::GetIntArray(std::string_view key) const {
  MX_ASSIGN_OR_RETURN(const Value* v, Lookup(*this, key));
  if (v->type != ValueType::kArray || !IsIntegerType(v->array_type)) {
    return WrongType(name_, key, *v, "an array of integers");
  }
  if (v->array_type == ValueType::kU64) {
    for (size_t i = 0; i < v->ints.size(); ++i) {
      if (v->ints[i] < 0) {
        return Status::InvalidArgument(name_ + ": key '" + std::string(key) + "' element " +
                                       Str(i) + " = " + Str(static_cast<uint64_t>(v->ints[i])) +
                                       " does not fit in int64");
      }
    }
  }
  return v->ints;
}

Result<std::vector<int64_t>> GgufFile::GetIntArrayOrScalar(std::string_view key, size_t n) const {
  MX_ASSIGN_OR_RETURN(const Value* v, Lookup(*this, key));
  if (v->type != ValueType::kArray) {
    MX_ASSIGN_OR_RETURN(int64_t x, GetInt(key));
    return std::vector<int64_t>(n, x);
  }
  MX_ASSIGN_OR_RETURN(std::vector<int64_t> xs, GetIntArray(key));
  if (xs.size() != n) {
    return Status::InvalidArgument(name_ + ": key '" + std::string(key) + "' has " +
                                   Str(xs.size()) + " elements, expected " + Str(n));
  }
  return xs;
}

Result<std::vector<std::string>> GgufFile::GetStringArray(std::string_view key) const {
  MX_ASSIGN_OR_RETURN(const Value* v, Lookup(*this, key));
  if (v->type != ValueType::kArray || v->array_type != ValueType::kString) {
    return WrongType(name_, key, *v, "an array of strings");
  }
  return v->strings;
}

Result<std::vector<double>> GgufFile::GetFloatArray(std::string_view key) const {
  MX_ASSIGN_OR_RETURN(const Value* v, Lookup(*this, key));
  if (v->type == ValueType::kArray && IsFloatType(v->array_type)) return v->floats;
  if (v->type != ValueType::kArray || !IsIntegerType(v->array_type)) {
    return WrongType(name_, key, *v, "an array of floats or integers");
  }
  std::vector<double> out;
  out.reserve(v->ints.size());
  for (int64_t x : v->ints) {
    out.push_back(v->array_type == ValueType::kU64
                      ? static_cast<double>(static_cast<uint64_t>(x))
                      : static_cast<double>(x));
  }
  return out;
}

}  // namespace mx::gguf
