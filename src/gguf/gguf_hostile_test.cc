// GGUF reader against damaged and hostile files: every error is a value
// with a message naming the file, the key or tensor and the offset.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/env.h"
#include "core/status.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_test_util.h"
#include "gguf/gguf_writer.h"

namespace mx::gguf {
namespace {

using namespace mx::gguf::test;  // NOLINT: test helpers

// --- damaged files: truncation and byte flips --------------------------------------

TEST(GgufDamageTest, TruncationAtEveryLengthIsAnError) {
  const std::string bytes = SmallFile();
  ASSERT_TRUE(ParseStatus(bytes).ok());
  ASSERT_GT(bytes.size(), 1000u);
  for (size_t len = 0; len < bytes.size(); ++len) {
    Status s = ParseStatus(bytes.substr(0, len));
    ASSERT_EQ(s.code(), Code::kCorruption) << "length " << len << ": " << s.ToString();
  }
}

TEST(GgufDamageTest, ByteFlipsInHeaderAndMetadataNeverCrash) {
  const std::string bytes = SmallFile();
  auto clean = GgufFile::Parse(U8(bytes), bytes.size(), "clean.gguf");
  ASSERT_TRUE(clean.ok());
  const size_t data_start = clean.value()->tensors()[0].data - clean.value()->file_data();
  int ok = 0, failed = 0;
  for (size_t pos = 0; pos < data_start; ++pos) {
    for (uint8_t mask : {0x01, 0x10, 0x80, 0xFF}) {
      std::vector<uint8_t> buf(bytes.begin(), bytes.end());
      buf[pos] ^= mask;
      auto r = GgufFile::Parse(buf.data(), buf.size(), "flipped.gguf");
      if (r.ok()) {
        TouchAll(*r.value());
        ++ok;
      } else {
        EXPECT_FALSE(r.status().message().empty());
        ++failed;
      }
    }
  }
  EXPECT_GT(ok, 0);  // flips inside string payloads are harmless
  EXPECT_GT(failed, 0);
}

// --- hostile files, one case each ---------------------------------------------------

TEST(GgufHostileTest, EmptyFileIsTruncated) {
  ExpectError(ParseStatus(""), Code::kCorruption, {"truncated", "magic"});
}

TEST(GgufHostileTest, WrongMagic) {
  std::string b = Bytes().U32(0x4C4D4747).U32(3).U64(0).U64(0).str();  // "GGML"
  ExpectError(ParseStatus(b), Code::kCorruption, {"bad magic", "0x4c4d4747"});
}

TEST(GgufHostileTest, Version1IsNotSupported) {
  ExpectError(ParseStatus(Bytes().Header(0, 0, 1).str()), Code::kNotSupported,
              {"version 1", "expected 2 or 3"});
}

TEST(GgufHostileTest, Version4IsNotSupported) {
  ExpectError(ParseStatus(Bytes().Header(0, 0, 4).str()), Code::kNotSupported, {"version 4"});
}

TEST(GgufHostileTest, ByteSwappedVersionIsDetected) {
  ExpectError(ParseStatus(Bytes().Header(0, 0, 0x03000000).str()), Code::kNotSupported,
              {"byte-swapped", "big-endian", "0x03000000"});
}

TEST(GgufHostileTest, Version2IsAccepted) {
  std::string b = Bytes().Header(0, 1, 2).Str("k").U32(4).U32(5).str();
  std::vector<uint8_t> buf(b.begin(), b.end());
  auto r = GgufFile::Parse(buf.data(), buf.size(), "v2.gguf");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.value()->version(), 2u);
  EXPECT_EQ(r.value()->GetInt("k").value(), 5);
}

TEST(GgufHostileTest, HugeTensorCount) {
  ExpectError(ParseStatus(Bytes().Header(1ull << 60, 0).str()), Code::kCorruption,
              {"tensor count 1152921504606846976"});
}

TEST(GgufHostileTest, HugeKeyCount) {
  ExpectError(ParseStatus(Bytes().Header(0, ~0ull).str()), Code::kCorruption,
              {"metadata key count 18446744073709551615"});
}

TEST(GgufHostileTest, HugeKeyLength) {
  std::string b = Bytes().Header(0, 1).U64(1ull << 62).Zeros(16).str();
  ExpectError(ParseStatus(b), Code::kCorruption,
              {"key #0", "length 4611686018427387904", "offset 24", "limit"});
}

TEST(GgufHostileTest, HugeStringValueLength) {
  ExpectError(ParseStatus(OneKeyFile("name", 8, Bytes().U64(1ull << 40).Zeros(8).str())),
              Code::kCorruption, {"key 'name'", "length 1099511627776", "limit"});
}

TEST(GgufHostileTest, StringValuePastEndOfFile) {
  ExpectError(ParseStatus(OneKeyFile("name", 8, Bytes().U64(1000).Zeros(8).str())),
              Code::kCorruption, {"key 'name'", "length 1000", "runs past end of file"});
}

TEST(GgufHostileTest, HugeArrayCount) {
  std::string payload = Bytes().U32(4).U64(1ull << 40).Zeros(16).str();
  ExpectError(ParseStatus(OneKeyFile("arr", 9, payload)), Code::kCorruption,
              {"key 'arr'", "array length 1099511627776", "limit"});
}

TEST(GgufHostileTest, ArrayCountLargerThanTheFile) {
  std::string payload = Bytes().U32(4).U64(1ull << 29).Zeros(16).str();
  ExpectError(ParseStatus(OneKeyFile("arr", 9, payload)), Code::kCorruption,
              {"key 'arr'", "536870912 uint32", "needs at least 2147483648 bytes"});
}

TEST(GgufHostileTest, StringArrayCountLargerThanTheFile) {
  std::string payload = Bytes().U32(8).U64(100).Zeros(64).str();
  ExpectError(ParseStatus(OneKeyFile("tokens", 9, payload)), Code::kCorruption,
              {"key 'tokens'", "100 string", "needs at least 800 bytes"});
}

TEST(GgufHostileTest, NestedArray) {
  std::string payload = Bytes().U32(9).U64(1).U32(4).U64(1).U32(0).str();
  ExpectError(ParseStatus(OneKeyFile("nest", 9, payload)), Code::kCorruption,
              {"key 'nest'", "nested arrays"});
}

TEST(GgufHostileTest, UnknownValueType) {
  ExpectError(ParseStatus(OneKeyFile("k", 13, Bytes().U32(0).str())), Code::kCorruption,
              {"key 'k'", "unknown value type 13"});
}

TEST(GgufHostileTest, EmptyKey) {
  ExpectError(ParseStatus(OneKeyFile("", 4, Bytes().U32(0).str())), Code::kCorruption,
              {"key #0", "empty key"});
}

TEST(GgufHostileTest, DuplicateKey) {
  std::string b = Bytes().Header(0, 2).Str("a").U32(4).U32(1).Str("a").U32(4).U32(2).str();
  ExpectError(ParseStatus(b), Code::kCorruption, {"key 'a'", "duplicate key", "offset 41"});
}

TEST(GgufHostileTest, AlignmentZero) {
  GgufWriter w;
  w.SetU32("general.alignment", 0);
  ExpectError(ParseStatus(w.Serialize()), Code::kCorruption,
              {"general.alignment", "value 0", "power of two"});
}

TEST(GgufHostileTest, AlignmentThree) {
  GgufWriter w;
  w.SetU32("general.alignment", 3);
  ASSERT_TRUE(w.AddTensor("t", DType::kF32, {1}, "abcd").ok());
  ExpectError(ParseStatus(w.Serialize()), Code::kCorruption,
              {"general.alignment", "value 3", "power of two"});
}

TEST(GgufHostileTest, AlignmentOfWrongType) {
  GgufWriter w;
  w.SetString("general.alignment", "32");
  ExpectError(ParseStatus(w.Serialize()), Code::kCorruption,
              {"general.alignment", "type string"});
}

TEST(GgufHostileTest, FiveDims) {
  ExpectError(ParseStatus(OneTensorFile("t5", {1, 1, 1, 1, 1}, 0, 0, 32)), Code::kCorruption,
              {"tensor 't5'", "n_dims 5", "expected 1..4"});
}

TEST(GgufHostileTest, ZeroDim) {
  ExpectError(ParseStatus(OneTensorFile("z", {4, 0}, 0, 0, 32)), Code::kCorruption,
              {"tensor 'z'", "dimension 1 is 0", "expected > 0"});
}

TEST(GgufHostileTest, NegativeDim) {
  ExpectError(ParseStatus(OneTensorFile("neg", {-4}, 0, 0, 32)), Code::kCorruption,
              {"tensor 'neg'", "dimension 0 is -4"});
}

TEST(GgufHostileTest, DimsWhoseProductOverflows) {
  ExpectError(ParseStatus(OneTensorFile("big", {1ll << 32, 1ll << 32, 1ll << 32}, 0, 0, 32)),
              Code::kCorruption, {"tensor 'big'", "more than 2^40 elements"});
}

TEST(GgufHostileTest, UnknownTensorType) {
  ExpectError(ParseStatus(OneTensorFile("odd", {32}, 77, 0, 128)), Code::kNotSupported,
              {"tensor 'odd'", "type id 77"});
}

TEST(GgufHostileTest, RowNotAMultipleOfTheBlockSize) {
  ExpectError(ParseStatus(OneTensorFile("q", {16}, 8, 0, 64)), Code::kCorruption,
              {"tensor 'q'", "ne[0] = 16", "Q8_0 block size 32"});
}

TEST(GgufHostileTest, OffsetNotAligned) {
  ExpectError(ParseStatus(OneTensorFile("t", {4}, 0, 8, 64)), Code::kCorruption,
              {"tensor 't'", "offset 8", "alignment 32"});
}

TEST(GgufHostileTest, TensorPastEndOfFile) {
  // Header 24 + info (8 + 3 + 4 + 8 + 4 + 8 = 35) = 59, data section at 64.
  ExpectError(ParseStatus(OneTensorFile("w.0", {64}, 0, 0, 100)), Code::kCorruption,
              {"tensor 'w.0'", "data [offset 64, 256 bytes] runs past end of file (size 164)"});
}

TEST(GgufHostileTest, TensorOffsetHuge) {
  ExpectError(ParseStatus(OneTensorFile("w", {4}, 0, ~0ull - 31, 64)), Code::kCorruption,
              {"tensor 'w'", "runs past end of file"});
}

TEST(GgufHostileTest, DuplicateTensorName) {
  std::string b =
      Bytes().Header(2, 0).Info("w", {4}, 0, 0).Info("w", {4}, 0, 32).PadTo(32).Zeros(64).str();
  ExpectError(ParseStatus(b), Code::kCorruption, {"tensor 'w'", "duplicate tensor name"});
}

TEST(GgufHostileTest, TensorNameTooLong) {
  ExpectError(ParseStatus(OneTensorFile(std::string(64, 'n'), {4}, 0, 0, 32)),
              Code::kCorruption, {"tensor #0", "64 bytes", "limit is 63"});
}

TEST(GgufHostileTest, EmptyTensorName) {
  ExpectError(ParseStatus(OneTensorFile("", {4}, 0, 0, 32)), Code::kCorruption,
              {"tensor #0", "empty tensor name"});
}

TEST(GgufHostileTest, BinaryKeyIsEscapedInTheMessage) {
  std::string b = Bytes().Header(0, 2).Str("\x01\xff").U32(0).U8(0).Str("\x01\xff").U32(0).U8(0).str();
  ExpectError(ParseStatus(b), Code::kCorruption, {"key '\\x01\\xff'", "duplicate key"});
}

}  // namespace
}  // namespace mx::gguf
