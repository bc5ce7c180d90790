// GGUF v3 writer (../shared/ENGINE-FACTS.md §1): header, metadata in insertion
// order, tensor infos, zero padding to the alignment, then each tensor's bytes
// at the running sum of the aligned sizes of the tensors before it.
#include "gguf/gguf_writer.h"

#include <bit>
#include <cstring>
#include <limits>
#include <utility>

namespace mx::gguf {

static_assert(std::endian::native == std::endian::little,
              "the GGUF writer assumes a little-endian host");

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF"
constexpr uint32_t kVersion = 3;
constexpr size_t kMaxTensorNameBytes = 63;
constexpr int64_t kMaxTensorElements = int64_t{1} << 40;

template <typename T>
void PutPod(std::string* out, T v) {
  char buf[sizeof(T)];
  std::memcpy(buf, &v, sizeof(T));
  out->append(buf, sizeof(T));
}

void PutString(std::string* out, std::string_view s) {
  PutPod<uint64_t>(out, s.size());
  out->append(s.data(), s.size());
}

void PutType(std::string* out, ValueType t) { PutPod<uint32_t>(out, static_cast<uint32_t>(t)); }

uint64_t AlignUp(uint64_t n, uint64_t align) { return (n + align - 1) / align * align; }

// Whether `v` is representable in integer type `t` (u64 takes any bits).
bool FitsIn(ValueType t, int64_t v) {
  switch (t) {
    case ValueType::kU8: return v >= 0 && v <= 0xFF;
    case ValueType::kI8: return v >= -128 && v <= 127;
    case ValueType::kU16: return v >= 0 && v <= 0xFFFF;
    case ValueType::kI16: return v >= -32768 && v <= 32767;
    case ValueType::kU32: return v >= 0 && v <= 0xFFFFFFFFll;
    case ValueType::kI32:
      return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
    case ValueType::kBool: return v == 0 || v == 1;
    default: return true;  // u64 (bits), i64
  }
}

// Appends the payload of one integer (or bool) of type `t`.
void PutInteger(std::string* out, ValueType t, int64_t v) {
  switch (t) {
    case ValueType::kU8: case ValueType::kI8: case ValueType::kBool:
      PutPod<uint8_t>(out, static_cast<uint8_t>(v));
      break;
    case ValueType::kU16: case ValueType::kI16:
      PutPod<uint16_t>(out, static_cast<uint16_t>(v));
      break;
    case ValueType::kU32: case ValueType::kI32:
      PutPod<uint32_t>(out, static_cast<uint32_t>(v));
      break;
    default:
      PutPod<uint64_t>(out, static_cast<uint64_t>(v));
      break;
  }
}

void PutFloat(std::string* out, ValueType t, double v) {
  if (t == ValueType::kF32) {
    PutPod<float>(out, static_cast<float>(v));
  } else {
    PutPod<double>(out, v);
  }
}

bool IsFloat(ValueType t) { return t == ValueType::kF32 || t == ValueType::kF64; }
bool IsKnown(ValueType t) { return static_cast<uint32_t>(t) <= 12; }

}  // namespace

void GgufWriter::Put(const std::string& key, std::string encoded) {
  for (Kv& kv : kvs_) {
    if (kv.key == key) {
      kv.encoded = std::move(encoded);
      return;
    }
  }
  kvs_.push_back(Kv{key, std::move(encoded)});
}

void GgufWriter::PutInt(const std::string& key, ValueType type, int64_t v) {
  std::string enc;
  PutType(&enc, type);
  PutInteger(&enc, type, v);
  Put(key, std::move(enc));
  if (key == "general.alignment" && type != ValueType::kBool && v > 0 &&
      v <= std::numeric_limits<uint32_t>::max() && std::has_single_bit(static_cast<uint64_t>(v))) {
    alignment_ = static_cast<uint32_t>(v);
  }
}

void GgufWriter::SetU8(const std::string& key, uint8_t v) { PutInt(key, ValueType::kU8, v); }
void GgufWriter::SetI8(const std::string& key, int8_t v) { PutInt(key, ValueType::kI8, v); }
void GgufWriter::SetU16(const std::string& key, uint16_t v) { PutInt(key, ValueType::kU16, v); }
void GgufWriter::SetI16(const std::string& key, int16_t v) { PutInt(key, ValueType::kI16, v); }
void GgufWriter::SetU32(const std::string& key, uint32_t v) { PutInt(key, ValueType::kU32, v); }
void GgufWriter::SetI32(const std::string& key, int32_t v) { PutInt(key, ValueType::kI32, v); }
void GgufWriter::SetU64(const std::string& key, uint64_t v) {
  PutInt(key, ValueType::kU64, static_cast<int64_t>(v));
}
void GgufWriter::SetI64(const std::string& key, int64_t v) { PutInt(key, ValueType::kI64, v); }
void GgufWriter::SetBool(const std::string& key, bool v) { PutInt(key, ValueType::kBool, v); }
void GgufWriter::SetU32Alignment(uint32_t alignment) { SetU32("general.alignment", alignment); }

void GgufWriter::SetF32(const std::string& key, float v) {
  std::string enc;
  PutType(&enc, ValueType::kF32);
  PutPod<float>(&enc, v);
  Put(key, std::move(enc));
}

void GgufWriter::SetF64(const std::string& key, double v) {
  std::string enc;
  PutType(&enc, ValueType::kF64);
  PutPod<double>(&enc, v);
  Put(key, std::move(enc));
}

void GgufWriter::SetString(const std::string& key, const std::string& v) {
  std::string enc;
  PutType(&enc, ValueType::kString);
  PutString(&enc, v);
  Put(key, std::move(enc));
}

void GgufWriter::SetStringArray(const std::string& key, const std::vector<std::string>& v) {
  std::string enc;
  PutType(&enc, ValueType::kArray);
  PutType(&enc, ValueType::kString);
  PutPod<uint64_t>(&enc, v.size());
  for (const std::string& s : v) PutString(&enc, s);
  Put(key, std::move(enc));
}

void GgufWriter::SetI32Array(const std::string& key, const std::vector<int32_t>& v) {
  std::string enc;
  PutType(&enc, ValueType::kArray);
  PutType(&enc, ValueType::kI32);
  PutPod<uint64_t>(&enc, v.size());
  for (int32_t x : v) PutPod<int32_t>(&enc, x);
  Put(key, std::move(enc));
}

void GgufWriter::SetF32Array(const std::string& key, const std::vector<float>& v) {
  std::string enc;
  PutType(&enc, ValueType::kArray);
  PutType(&enc, ValueType::kF32);
  PutPod<uint64_t>(&enc, v.size());
  for (float x : v) PutPod<float>(&enc, x);
  Put(key, std::move(enc));
}

Status GgufWriter::SetValue(const std::string& key, const Value& v) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("GGUF writer: key '" + key + "': " + why);
  };
  if (!IsKnown(v.type)) return bad("unknown value type " + std::to_string(uint32_t(v.type)));
  if (v.type == ValueType::kString) {
    SetString(key, v.str);
    return Status::Ok();
  }
  if (IsFloat(v.type)) {
    if (v.type == ValueType::kF32) SetF32(key, static_cast<float>(v.f));
    else SetF64(key, v.f);
    return Status::Ok();
  }
  if (v.type != ValueType::kArray) {
    if (!FitsIn(v.type, v.i)) {
      return bad("value " + std::to_string(v.i) + " does not fit in " + ValueTypeName(v.type));
    }
    PutInt(key, v.type, v.i);
    return Status::Ok();
  }
  const ValueType et = v.array_type;
  if (!IsKnown(et)) return bad("unknown array element type " + std::to_string(uint32_t(et)));
  if (et == ValueType::kArray) return bad("nested arrays are not supported");
  std::string enc;
  PutType(&enc, ValueType::kArray);
  PutType(&enc, et);
  if (et == ValueType::kString) {
    PutPod<uint64_t>(&enc, v.strings.size());
    for (const std::string& s : v.strings) PutString(&enc, s);
  } else if (IsFloat(et)) {
    PutPod<uint64_t>(&enc, v.floats.size());
    for (double f : v.floats) PutFloat(&enc, et, f);
  } else {
    PutPod<uint64_t>(&enc, v.ints.size());
    for (size_t i = 0; i < v.ints.size(); ++i) {
      if (!FitsIn(et, v.ints[i])) {
        return bad("element " + std::to_string(i) + " = " + std::to_string(v.ints[i]) +
                   " does not fit in " + ValueTypeName(et));
      }
      PutInteger(&enc, et, v.ints[i]);
    }
  }
  Put(key, std::move(enc));
  return Status::Ok();
}

Result<size_t> GgufWriter::CheckTensor(const std::string& name, DType type,
                                       const std::vector<int64_t>& shape) const {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("GGUF writer: tensor '" + name + "': " + why);
  };
  if (name.empty() || name.size() > kMaxTensorNameBytes) {
    return bad("name is " + std::to_string(name.size()) + " bytes, expected 1.." +
               std::to_string(kMaxTensorNameBytes));
  }
  for (const Tensor& t : tensors_) {
    if (t.name == name) return bad("duplicate tensor name");
  }
  DTypeInfo info = GetDTypeInfo(type);
  if (info.name == nullptr) return bad("unknown type id " + std::to_string(uint32_t(type)));
  if (shape.empty() || shape.size() > 4) {
    return bad(std::to_string(shape.size()) + " dims, expected 1..4");
  }
  int64_t n_elements = 1;
  for (int64_t d : shape) {
    if (d <= 0) return bad("dimension " + std::to_string(d) + ", expected > 0");
    if (d > kMaxTensorElements / n_elements) return bad("more than 2^40 elements");
    n_elements *= d;
  }
  size_t row_bytes = RowBytes(type, shape[0]);
  if (row_bytes == 0) {
    return bad("row length " + std::to_string(shape[0]) + " is not a multiple of the " +
               info.name + " block size " + std::to_string(info.block_values));
  }
  return row_bytes * static_cast<size_t>(n_elements / shape[0]);
}

Status GgufWriter::AddTensor(const std::string& name, DType type, std::vector<int64_t> shape,
                             std::string bytes) {
  MX_ASSIGN_OR_RETURN(const size_t expected, CheckTensor(name, type, shape));
  if (bytes.size() != expected) {
    return Status::InvalidArgument("GGUF writer: tensor '" + name + "': " +
                                   GetDTypeInfo(type).name + " data is " +
                                   std::to_string(bytes.size()) + " bytes, expected " +
                                   std::to_string(expected));
  }
  tensors_.push_back(Tensor{name, type, std::move(shape), std::move(bytes), expected, false});
  return Status::Ok();
}

Status GgufWriter::DeclareTensor(const std::string& name, DType type, std::vector<int64_t> shape) {
  MX_ASSIGN_OR_RETURN(const size_t n_bytes, CheckTensor(name, type, shape));
  tensors_.push_back(Tensor{name, type, std::move(shape), {}, n_bytes, true});
  return Status::Ok();
}

std::string GgufWriter::SerializeHeader() const {
  const uint64_t align = alignment_;
  std::string out;
  PutPod<uint32_t>(&out, kMagic);
  PutPod<uint32_t>(&out, kVersion);
  PutPod<uint64_t>(&out, tensors_.size());
  PutPod<uint64_t>(&out, kvs_.size());
  for (const Kv& kv : kvs_) {
    PutString(&out, kv.key);
    out += kv.encoded;
  }
  uint64_t offset = 0;  // relative to the data section
  for (const Tensor& t : tensors_) {
    PutString(&out, t.name);
    PutPod<uint32_t>(&out, static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) PutPod<int64_t>(&out, d);
    PutPod<uint32_t>(&out, static_cast<uint32_t>(t.type));
    PutPod<uint64_t>(&out, offset);
    offset += AlignUp(t.n_bytes, align);
  }
  if (!tensors_.empty()) out.resize(AlignUp(out.size(), align), '\0');
  return out;
}

std::string GgufWriter::Serialize() const {
  std::string out = SerializeHeader();
  for (const Tensor& t : tensors_) {
    out += t.bytes;
    out.resize(AlignUp(out.size(), alignment_), '\0');
  }
  return out;
}

Status GgufWriter::WriteStreaming(Env* env, const std::string& path, const FillFn& fill) const {
  uint64_t suffix = 0;
  MX_RETURN_IF_ERROR(env->RandomBytes(&suffix, sizeof(suffix)));
  const std::string tmp = path + ".tmp-" + std::to_string(suffix);
  MX_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f,
                      env->NewWritableFile(tmp, 0644, /*exclusive=*/true));
  auto write_all = [&]() -> Status {
    MX_RETURN_IF_ERROR(f->Append(SerializeHeader()));
    std::string bytes;
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const Tensor& t = tensors_[i];
      const std::string* data = &t.bytes;
      if (t.declared) {
        bytes.clear();
        MX_RETURN_IF_ERROR(fill(i, &bytes));
        if (bytes.size() != t.n_bytes) {
          return Status::Internal("GGUF writer: tensor '" + t.name + "' came with " +
                                  std::to_string(bytes.size()) + " bytes, expected " +
                                  std::to_string(t.n_bytes));
        }
        data = &bytes;
      }
      MX_RETURN_IF_ERROR(f->Append(*data));
      const size_t pad = AlignUp(data->size(), alignment_) - data->size();
      if (pad > 0) MX_RETURN_IF_ERROR(f->Append(std::string(pad, '\0')));
    }
    MX_RETURN_IF_ERROR(f->Sync());
    MX_RETURN_IF_ERROR(f->Close());
    MX_RETURN_IF_ERROR(env->RenameFile(tmp, path));
    const size_t slash = path.rfind('/');
    return env->SyncDir(slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash));
  };
  Status st = write_all();
  if (!st.ok()) {
    f.reset();
    (void)env->RemoveFile(tmp);
  }
  return st;
}

Status GgufWriter::WriteTo(Env* env, const std::string& path) const {
  for (const Tensor& t : tensors_) {
    if (t.declared) {
      return Status::InvalidArgument("GGUF writer: tensor '" + t.name +
                                     "' was declared without bytes: write with WriteStreaming");
    }
  }
  return env->WriteFileAtomic(path, Serialize());
}

}  // namespace mx::gguf
