// GGUF reader and writer: reference models, round trips, typed getters.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/env.h"
#include "core/fault_env.h"
#include "core/status.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_test_util.h"
#include "gguf/gguf_writer.h"

namespace mx::gguf {
namespace {

using namespace mx::gguf::test;  // NOLINT: test helpers

// --- reference models (written by llama.cpp's gguf-py) --------------------------

std::string RefModel(const std::string& file) {
  return JoinPath(JoinPath(MATRICXON_REF_DIR, "models"), file);
}

std::unique_ptr<GgufFile> OpenRef(const std::string& file) {
  auto r = GgufFile::Open(Env::Default(), RefModel(file));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

TEST(GgufRefTest, EveryReferenceModelOpens) {
  auto names = Env::Default()->ListDir(JoinPath(MATRICXON_REF_DIR, "models"));
  if (!names.ok()) GTEST_SKIP() << "no reference models: " << names.status().ToString();
  int opened = 0;
  for (const std::string& name : names.value()) {
    if (name.size() < 5 || name.substr(name.size() - 5) != ".gguf") continue;
    SCOPED_TRACE(name);
    auto f = OpenRef(name);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->version(), 3u);
    EXPECT_FALSE(f->tensors().empty());
    EXPECT_EQ(f->GetStringArray("tokenizer.ggml.tokens").value().size(), 4096u);
    for (const TensorInfo& t : f->tensors()) {
      EXPECT_EQ(t.offset % f->alignment(), 0u) << t.Describe();
      EXPECT_LE(t.data + t.n_bytes, f->file_data() + f->file_size()) << t.Describe();
    }
    ++opened;
  }
  EXPECT_GE(opened, 7);
}

TEST(GgufRefTest, TinyLlamaHasDocumentedFacts) {
  auto f = OpenRef("tiny-llama.gguf");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->GetString("general.architecture").value(), "llama");
  EXPECT_EQ(f->GetInt("llama.embedding_length").value(), 128);
  EXPECT_EQ(f->GetInt("llama.block_count").value(), 4);
  EXPECT_EQ(f->GetInt("llama.context_length").value(), 2048);
  EXPECT_NEAR(f->GetFloat("llama.attention.layer_norm_rms_epsilon").value(), 1e-5, 1e-12);
  EXPECT_EQ(f->GetStringArray("tokenizer.ggml.tokens").value().size(), 4096u);
  EXPECT_EQ(f->GetString("tokenizer.ggml.model").value(), "gpt2");
  EXPECT_EQ(f->GetInt("tokenizer.ggml.bos_token_id").value(), 4093);
  EXPECT_TRUE(f->GetBool("tokenizer.ggml.add_bos_token").value());
  EXPECT_EQ(f->alignment(), 32u);
  const TensorInfo* k = f->FindTensor("blk.0.attn_k.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->type, DType::kF32);
  EXPECT_EQ(k->shape, (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(k->n_bytes, 128u * 64 * 4);
  EXPECT_EQ(k->n_rows(), 64);
  EXPECT_EQ(k->Describe(), "blk.0.attn_k.weight F32 [128, 64]");
  EXPECT_EQ(f->FindTensor("no.such.tensor"), nullptr);
}

TEST(GgufRefTest, TinyLlamaQ8_0HasQ8_0Matrices) {
  auto f = OpenRef("tiny-llama-q8_0.gguf");
  ASSERT_NE(f, nullptr);
  const TensorInfo* q = f->FindTensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, DType::kQ8_0);
  EXPECT_EQ(q->n_bytes, 128u / 32 * 34 * 128);
  EXPECT_EQ(f->FindTensor("blk.0.attn_norm.weight")->type, DType::kF32);
}

TEST(GgufRefTest, TinyQwen2Bf16HasBf16Matrices) {
  auto f = OpenRef("tiny-qwen2-bf16.gguf");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->GetString("general.architecture").value(), "qwen2");
  EXPECT_EQ(f->FindTensor("blk.0.attn_q.weight")->type, DType::kBF16);
  EXPECT_EQ(f->FindTensor("token_embd.weight")->type, DType::kBF16);
  EXPECT_EQ(f->FindTensor("blk.0.attn_q.bias")->type, DType::kF32);
  EXPECT_EQ(f->FindTensor("output.weight"), nullptr);  // tied
}

TEST(GgufRefTest, NemotronHHasPerLayerArrays) {
  auto f = OpenRef("tiny-hybrid-nemotron_h.gguf");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->GetInt("nemotron_h.block_count").value(), 8);
  EXPECT_EQ(f->GetIntArrayOrScalar("nemotron_h.attention.head_count_kv", 8).value(),
            (std::vector<int64_t>{0, 0, 0, 2, 0, 0, 2, 0}));
  EXPECT_EQ(f->GetIntArrayOrScalar("nemotron_h.feed_forward_length", 8).value(),
            (std::vector<int64_t>{0, 256, 0, 0, 256, 0, 0, 256}));
  EXPECT_EQ(f->GetIntArrayOrScalar("nemotron_h.attention.head_count", 8).value(),
            std::vector<int64_t>(8, 4));
  EXPECT_EQ(f->FindTensor("blk.0.ssm_conv1d.weight")->shape, (std::vector<int64_t>{4, 320}));
}

TEST(GgufRefTest, Llama256Q4KMHasQ4KAndQ6K) {
  auto f = OpenRef("tiny-llama256-q4_k_m.gguf");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->FindTensor("token_embd.weight")->type, DType::kQ4_K);
  EXPECT_EQ(f->FindTensor("output.weight")->type, DType::kQ6_K);
  EXPECT_EQ(f->FindTensor("blk.1.ffn_down.weight")->type, DType::kQ6_K);
  const TensorInfo* q = f->FindTensor("blk.0.attn_q.weight");
  EXPECT_EQ(q->type, DType::kQ4_K);
  EXPECT_EQ(q->n_bytes, 256u / 256 * 144 * 256);
}

// --- writer round trips ---------------------------------------------------------

TEST(GgufWriterTest, RoundTripsEveryValueType) {
  GgufWriter w;
  w.SetU8("u8", 200);
  w.SetI8("i8", -100);
  w.SetU16("u16", 60000);
  w.SetI16("i16", -30000);
  w.SetU32("u32", 4000000000u);
  w.SetI32("i32", -2000000000);
  w.SetU64("u64", 1ull << 40);
  w.SetI64("i64", -(1ll << 50));
  w.SetF32("f32", 0.25f);
  w.SetF64("f64", 1e-300);
  w.SetBool("bool", true);
  w.SetString("str", std::string("caf\xc3\xa9\0x", 7));
  w.SetStringArray("arr.str", {"a", "", "ccc"});
  w.SetI32Array("arr.i32", {-1, 0, 7});
  w.SetF32Array("arr.f32", {1.5f, -2.0f});
  for (uint32_t t : {0u, 1u, 2u, 3u, 4u, 5u, 7u, 10u, 11u}) {
    Value v;
    v.type = ValueType::kArray;
    v.array_type = static_cast<ValueType>(t);
    v.ints = {0, 1, t == 7 ? 0 : 100};
    ASSERT_TRUE(w.SetValue("arr.t" + std::to_string(t), v).ok());
  }
  Value f64s;
  f64s.type = ValueType::kArray;
  f64s.array_type = ValueType::kF64;
  f64s.floats = {1e300, -0.5};
  ASSERT_TRUE(w.SetValue("arr.f64", f64s).ok());
  Value empty;
  empty.type = ValueType::kArray;
  empty.array_type = ValueType::kString;
  ASSERT_TRUE(w.SetValue("arr.empty", empty).ok());

  std::string bytes = w.Serialize();
  auto r = GgufFile::Parse(U8(bytes), bytes.size(), "rt.gguf");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const GgufFile& f = *r.value();
  EXPECT_EQ(f.metadata().size(), 26u);
  EXPECT_EQ(f.GetInt("u8").value(), 200);
  EXPECT_EQ(f.GetInt("i8").value(), -100);
  EXPECT_EQ(f.GetInt("u16").value(), 60000);
  EXPECT_EQ(f.GetInt("i16").value(), -30000);
  EXPECT_EQ(f.GetInt("u32").value(), 4000000000ll);
  EXPECT_EQ(f.GetInt("i32").value(), -2000000000);
  EXPECT_EQ(f.GetInt("u64").value(), 1ll << 40);
  EXPECT_EQ(f.GetInt("i64").value(), -(1ll << 50));
  EXPECT_EQ(f.GetFloat("f32").value(), 0.25);
  EXPECT_EQ(f.GetFloat("f64").value(), 1e-300);
  EXPECT_TRUE(f.GetBool("bool").value());
  EXPECT_EQ(f.GetString("str").value(), std::string("caf\xc3\xa9\0x", 7));
  EXPECT_EQ(f.GetStringArray("arr.str").value(), (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(f.GetIntArray("arr.i32").value(), (std::vector<int64_t>{-1, 0, 7}));
  EXPECT_EQ(f.GetFloatArray("arr.f32").value(), (std::vector<double>{1.5, -2.0}));
  EXPECT_EQ(f.GetFloatArray("arr.f64").value(), (std::vector<double>{1e300, -0.5}));
  for (uint32_t t : {0u, 1u, 2u, 3u, 4u, 5u, 7u, 10u, 11u}) {
    const Value* v = f.Find("arr.t" + std::to_string(t));
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v->array_type, static_cast<ValueType>(t));
    EXPECT_EQ(v->ints, (std::vector<int64_t>{0, 1, t == 7 ? 0 : 100}));
  }
  EXPECT_EQ(f.Find("arr.empty")->array_size(), 0u);
  // Every value copies through SetValue into an identical file.
  GgufWriter copy;
  for (const auto& [key, v] : f.metadata()) ASSERT_TRUE(copy.SetValue(key, v).ok()) << key;
  std::string copied = copy.Serialize();
  auto r2 = GgufFile::Parse(U8(copied), copied.size(), "copy.gguf");
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  for (const auto& [key, v] : f.metadata()) {
    const Value* c = r2.value()->Find(key);
    ASSERT_NE(c, nullptr) << key;
    EXPECT_EQ(c->type, v.type) << key;
    EXPECT_EQ(c->i, v.i) << key;
    EXPECT_EQ(c->str, v.str) << key;
    EXPECT_EQ(c->ints, v.ints) << key;
    EXPECT_EQ(c->strings, v.strings) << key;
  }
}

TEST(GgufWriterTest, RoundTripsTensorsAtAlignedRunningOffsets) {
  GgufWriter w;
  w.SetU32Alignment(64);
  struct Spec {
    const char* name;
    DType type;
    std::vector<int64_t> shape;
    size_t n_bytes;
  };
  const std::vector<Spec> specs = {
      {"f32", DType::kF32, {3, 2}, 24},       {"q8", DType::kQ8_0, {64, 2}, 136},
      {"f16", DType::kF16, {5}, 10},          {"bf16", DType::kBF16, {4, 1, 2}, 16},
      {"q4k", DType::kQ4_K, {256}, 144},      {"i32", DType::kI32, {1, 1, 1, 7}, 28},
  };
  for (size_t i = 0; i < specs.size(); ++i) {
    const Spec& s = specs[i];
    ASSERT_TRUE(w.AddTensor(s.name, s.type, s.shape, Pattern(s.n_bytes, uint8_t(i))).ok());
  }
  std::string bytes = w.Serialize();
  auto r = GgufFile::Parse(U8(bytes), bytes.size(), "rt.gguf");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const GgufFile& f = *r.value();
  EXPECT_EQ(f.alignment(), 64u);
  ASSERT_EQ(f.tensors().size(), specs.size());
  uint64_t expected_offset = 0;
  const size_t data_start = f.tensors()[0].data - f.file_data();
  EXPECT_EQ(data_start % 64, 0u);
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorInfo& t = f.tensors()[i];
    SCOPED_TRACE(t.Describe());
    EXPECT_EQ(t.name, specs[i].name);
    EXPECT_EQ(t.type, specs[i].type);
    EXPECT_EQ(t.shape, specs[i].shape);
    EXPECT_EQ(t.n_bytes, specs[i].n_bytes);
    EXPECT_EQ(t.offset, expected_offset);
    EXPECT_EQ(t.data, f.file_data() + data_start + t.offset);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(t.data), t.n_bytes),
              Pattern(specs[i].n_bytes, uint8_t(i)));
    expected_offset += (t.n_bytes + 63) / 64 * 64;
  }
  EXPECT_EQ(bytes.size(), data_start + expected_offset);  // padded to the alignment
}

TEST(GgufWriterTest, ReplacesExistingKeyInPlace) {
  GgufWriter w;
  w.SetU32("first.key", 1);
  w.SetString("second.key", "x");
  w.SetU32("first.key", 3);
  std::string bytes = w.Serialize();
  EXPECT_LT(bytes.find("first.key"), bytes.find("second.key"));
  EXPECT_EQ(bytes.find("first.key"), bytes.rfind("first.key"));
  auto r = GgufFile::Parse(U8(bytes), bytes.size(), "rt.gguf");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value()->metadata().size(), 2u);
  EXPECT_EQ(r.value()->GetInt("first.key").value(), 3);
}

TEST(GgufWriterTest, AddTensorRejectsWrongByteSize) {
  GgufWriter w;
  Status s = w.AddTensor("w", DType::kQ8_0, {64, 2}, std::string(135, '\0'));
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("'w'"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("135 bytes, expected 136"), std::string::npos) << s.ToString();
}

TEST(GgufWriterTest, AddTensorRejectsBadShapesAndNames) {
  GgufWriter w;
  EXPECT_EQ(w.AddTensor("r", DType::kQ8_0, {16}, std::string(17, '\0')).code(),
            Code::kInvalidArgument);  // 16 is not a multiple of 32
  EXPECT_EQ(w.AddTensor("z", DType::kF32, {4, 0}, "").code(), Code::kInvalidArgument);
  EXPECT_EQ(w.AddTensor("d5", DType::kF32, {1, 1, 1, 1, 1}, "abcd").code(),
            Code::kInvalidArgument);
  EXPECT_EQ(w.AddTensor(std::string(64, 'n'), DType::kF32, {1}, "abcd").code(),
            Code::kInvalidArgument);
  EXPECT_TRUE(w.AddTensor("ok", DType::kF32, {1}, "abcd").ok());
  EXPECT_EQ(w.AddTensor("ok", DType::kF32, {1}, "abcd").code(), Code::kInvalidArgument);
}

TEST(GgufWriterTest, SetValueRejectsOutOfRangeAndNested) {
  GgufWriter w;
  Value v;
  v.type = ValueType::kU8;
  v.i = 300;
  EXPECT_EQ(w.SetValue("big", v).code(), Code::kInvalidArgument);
  v.type = ValueType::kArray;
  v.array_type = ValueType::kArray;
  EXPECT_EQ(w.SetValue("nested", v).code(), Code::kInvalidArgument);
}

TEST(GgufWriterTest, WriteToThenOpenMapsTheFile) {
  const std::string path = JoinPath(testing::TempDir(), "gguf_test_write_open.gguf");
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  ASSERT_TRUE(w.AddTensor("t", DType::kF32, {8}, Pattern(32, 9)).ok());
  ASSERT_TRUE(w.WriteTo(Env::Default(), path).ok());
  auto r = GgufFile::Open(Env::Default(), path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.value()->path(), path);
  const TensorInfo* t = r.value()->FindTensor("t");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(t->data), 32), Pattern(32, 9));
  EXPECT_TRUE(Env::Default()->RemoveFile(path).ok());
}

// A file is what its header and tensors declare, padded to the alignment:
// bytes beyond that (a valid model followed by a huge hole) are refused with
// both sizes, so that nothing ever reads (or hashes) a tail no tensor uses.
TEST(GgufFileTest, BytesPastTheLastTensorAreRefused) {
  GgufWriter w;
  w.SetU32Alignment(64);
  ASSERT_TRUE(w.AddTensor("t", DType::kF32, {3}, Pattern(12, 1)).ok());
  const std::string bytes = w.Serialize();
  ASSERT_EQ(bytes.size() % 64, 0u);
  // As written (the last tensor padded), and unpadded: accepted.
  EXPECT_TRUE(GgufFile::Parse(U8(bytes), bytes.size(), "ok.gguf").ok());
  const size_t unpadded = bytes.size() - 64 + 12;
  EXPECT_TRUE(GgufFile::Parse(U8(bytes), unpadded, "unpadded.gguf").ok());
  for (size_t extra : {size_t{1}, size_t{64}, size_t{4096}}) {
    const std::string longer = bytes + std::string(extra, '\0');
    auto r = GgufFile::Parse(U8(longer), longer.size(), "long.gguf");
    ASSERT_FALSE(r.ok()) << extra;
    EXPECT_EQ(r.status().code(), Code::kCorruption);
    EXPECT_EQ(r.status().message(),
              "long.gguf: the file is " + std::to_string(longer.size()) +
                  " bytes, but its header and tensors end at byte " + std::to_string(bytes.size()) +
                  " (alignment 64): " + std::to_string(extra) +
                  " bytes follow the last tensor's data");
  }
}

TEST(GgufFileTest, BytesPastTheHeaderOfAFileWithoutTensorsAreRefused) {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  const std::string bytes = w.Serialize();
  EXPECT_TRUE(GgufFile::Parse(U8(bytes), bytes.size(), "vocab.gguf").ok());
  const std::string longer = bytes + std::string(1000, 'x');
  auto r = GgufFile::Parse(U8(longer), longer.size(), "vocab.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("bytes follow the header"), std::string::npos)
      << r.status().ToString();
}

TEST(GgufFileTest, OpenMissingFileIsNotFound) {
  auto r = GgufFile::Open(Env::Default(), JoinPath(testing::TempDir(), "no-such-file.gguf"));
  EXPECT_EQ(r.status().code(), Code::kNotFound);
}

// --- typed getters ----------------------------------------------------------------

std::unique_ptr<GgufFile> ParseOwned(const std::string& bytes) {
  auto r = GgufFile::Parse(U8(bytes), bytes.size(), "get.gguf");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

class GgufGetterTest : public testing::Test {
 protected:
  void SetUp() override {
    GgufWriter w;
    w.SetU8("u8", 7);
    w.SetI16("i16", -3);
    w.SetU64("u64.huge", ~0ull);
    w.SetBool("flag", true);
    w.SetF32("eps", 0.5f);
    w.SetString("name", "x");
    w.SetU32("layers", 4);
    w.SetI32Array("per_layer", {1, 2, 3});
    w.SetStringArray("strs", {"a"});
    bytes_ = w.Serialize();
    f_ = ParseOwned(bytes_);
    ASSERT_NE(f_, nullptr);
  }
  std::string bytes_;
  std::unique_ptr<GgufFile> f_;
};

TEST_F(GgufGetterTest, GetIntAcceptsEveryIntegerWidth) {
  EXPECT_EQ(f_->GetInt("u8").value(), 7);
  EXPECT_EQ(f_->GetInt("i16").value(), -3);
  EXPECT_EQ(f_->GetInt("layers").value(), 4);
}

TEST_F(GgufGetterTest, GetIntRejectsBoolFloatAndString) {
  for (const char* key : {"flag", "eps", "name", "per_layer"}) {
    auto r = f_->GetInt(key);
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << key;
    EXPECT_NE(r.status().message().find(std::string("'") + key + "'"), std::string::npos);
    EXPECT_NE(r.status().message().find("expected an integer"), std::string::npos);
  }
}

TEST_F(GgufGetterTest, GetIntRejectsU64AboveInt64Max) {
  EXPECT_EQ(f_->GetInt("u64.huge").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(f_->Find("u64.huge")->u, ~0ull);
  EXPECT_EQ(f_->GetFloat("u64.huge").value(), 18446744073709551615.0);
}

TEST_F(GgufGetterTest, GetFloatAcceptsFloatsAndIntegers) {
  EXPECT_EQ(f_->GetFloat("eps").value(), 0.5);
  EXPECT_EQ(f_->GetFloat("i16").value(), -3.0);
  EXPECT_EQ(f_->GetFloat("flag").status().code(), Code::kInvalidArgument);
}

TEST_F(GgufGetterTest, MissingKeyIsNotFound) {
  auto r = f_->GetString("absent.key");
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_NE(r.status().message().find("'absent.key'"), std::string::npos);
  EXPECT_EQ(f_->Find("absent.key"), nullptr);
}

TEST_F(GgufGetterTest, GetBoolAndStringCheckTheType) {
  EXPECT_TRUE(f_->GetBool("flag").value());
  EXPECT_EQ(f_->GetBool("u8").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(f_->GetString("name").value(), "x");
  EXPECT_EQ(f_->GetStringArray("per_layer").status().code(), Code::kInvalidArgument);
}

TEST_F(GgufGetterTest, IntArrayOrScalarRepeatsAScalar) {
  EXPECT_EQ(f_->GetIntArrayOrScalar("layers", 3).value(), (std::vector<int64_t>{4, 4, 4}));
  EXPECT_EQ(f_->GetIntArrayOrScalar("per_layer", 3).value(), (std::vector<int64_t>{1, 2, 3}));
}

TEST_F(GgufGetterTest, IntArrayOrScalarRequiresOneElementPerLayer) {
  auto r = f_->GetIntArrayOrScalar("per_layer", 4);
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("'per_layer' has 3 elements, expected 4"), std::string::npos)
      << r.status().ToString();
  EXPECT_EQ(f_->GetIntArrayOrScalar("strs", 1).status().code(), Code::kInvalidArgument);
}

TEST_F(GgufGetterTest, GetFloatArrayConvertsIntegers) {
  EXPECT_EQ(f_->GetFloatArray("per_layer").value(), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(f_->GetFloatArray("strs").status().code(), Code::kInvalidArgument);
}

// A file written tensor by tensor (declared tensors filled on demand) is the
// same bytes as the one Serialize writes from the same tensors; any failure
// leaves nothing at the path and no temporary beside it.
TEST(GgufWriterTest, StreamingWritesTheSameBytesAndLeavesNothingOnFailure) {
  char tmpl[] = "/tmp/gguf_stream_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl, path = dir + "/m.gguf";
  auto fill = [](size_t index, std::string* bytes) {
    *bytes = Pattern(index == 1 ? 136 : 24, static_cast<uint8_t>(index));
    return Status::Ok();
  };
  GgufWriter whole, streamed;
  for (GgufWriter* w : {&whole, &streamed}) w->SetString("general.architecture", "llama");
  ASSERT_TRUE(whole.AddTensor("a", DType::kF32, {3, 2}, Pattern(24, 0)).ok());
  ASSERT_TRUE(whole.AddTensor("b", DType::kQ8_0, {64, 2}, Pattern(136, 1)).ok());
  ASSERT_TRUE(whole.AddTensor("c", DType::kF32, {6}, Pattern(24, 2)).ok());
  ASSERT_TRUE(streamed.AddTensor("a", DType::kF32, {3, 2}, Pattern(24, 0)).ok());
  ASSERT_TRUE(streamed.DeclareTensor("b", DType::kQ8_0, {64, 2}).ok());
  ASSERT_TRUE(streamed.DeclareTensor("c", DType::kF32, {6}).ok());
  const Status declared = streamed.WriteTo(Env::Default(), path);
  EXPECT_EQ(declared.code(), Code::kInvalidArgument);
  EXPECT_NE(declared.message().find("'b' was declared without bytes"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(path));
  ASSERT_TRUE(streamed.WriteStreaming(Env::Default(), path, fill).ok());
  auto bytes = Env::Default()->ReadFile(path);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, whole.Serialize());

  auto only_the_file = [&] {
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) n += e.path() != path ? 1 : 0;
    return n == 0;
  };
  std::filesystem::remove(path);
  const auto short_fill = [](size_t, std::string* b) {
    *b = "x";
    return Status::Ok();
  };
  const Status short_st = streamed.WriteStreaming(Env::Default(), path, short_fill);
  EXPECT_EQ(short_st.code(), Code::kInternal);
  EXPECT_NE(short_st.message().find("'b' came with 1 bytes, expected 136"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(path));
  const auto failing_fill = [](size_t, std::string*) { return Status::IOError("no weights"); };
  EXPECT_EQ(streamed.WriteStreaming(Env::Default(), path, failing_fill).message(), "no weights");
  EXPECT_FALSE(std::filesystem::exists(path));
  FaultEnv full(Env::Default());
  full.FailNth(FaultEnv::kAppend, 2, ENOSPC);
  EXPECT_FALSE(streamed.WriteStreaming(&full, path, fill).ok());
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(only_the_file()) << "a temporary was left in " << dir;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mx::gguf
