// KV cache types in the state: row sizes from the block layout, the layout
// fingerprint naming both types, the check at model load, and the context
// shift on quantized keys (dequantize, rotate, quantize again: close to a
// fresh read, not bit-exact). The state operations themselves run under
// every type in sequence_state_test.cc (StateTest, KvTypes).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>

#include "core/fp16.h"
#include "models/model.h"
#include "models/runner.h"
#include "models/synthetic_model.h"
#include "ref_data.h"

namespace mx::models {
namespace {

constexpr DType kKvTypes[] = {DType::kF16, DType::kF32, DType::kQ8_0, DType::kQ4_0};

std::unique_ptr<Model> LoadRef(const std::string& name) {
  auto model = Model::Load(Env::Default(), mx::testing::RefDir() + "/models/" + name + ".gguf",
                           {.progress = nullptr, .prefault = false});
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  return model.ok() ? std::move(model).value() : nullptr;
}

std::vector<int32_t> RandomTokens(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng() % 4093);
  return t;
}

// Reads `tokens` into seq in one batch; the logits of the positions from
// `from` on ([n - from][n_vocab]).
std::vector<float> Read(Runner& r, SequenceState* seq, const std::vector<int32_t>& tokens,
                        size_t from = 0) {
  std::vector<BatchEntry> batch;
  for (size_t i = 0; i < tokens.size(); ++i) batch.push_back({seq, tokens[i], i >= from});
  std::vector<float> logits;
  EXPECT_TRUE(r.Forward(batch, &logits).ok());
  return logits;
}

TEST(KvTypeLayoutTest, RowsAndSizesFollowTheBlockLayout) {
  auto model = LoadRef("tiny-llama");  // 4 layers, 2 kv heads of 32: 64 values a row
  ASSERT_NE(model, nullptr);
  auto runner = Runner::Create(
      *model, {.n_threads = 1, .kv_type = DType::kQ8_0, .n_ctx = 512, .v_type = DType::kQ4_0});
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  const StateLayout& l = *(*runner)->layout();
  EXPECT_EQ(l.k_row_bytes(0), 68u);  // 2 blocks of 34
  EXPECT_EQ(l.v_row_bytes(0), 36u);  // 2 blocks of 18
  EXPECT_EQ(l.kv_bytes_per_token(), 4u * (68 + 36));
  EXPECT_EQ(l.KvTypesText(), "K q8_0, V q4_0");
  auto seq = (*runner)->NewSequence();
  Read(**runner, seq.get(), RandomTokens(300, 1), 299);
  EXPECT_EQ(seq->SizeBytes(), 300u * 416);
  EXPECT_EQ(seq->Serialize().size(), 24 + seq->SizeBytes() + 4);  // header, rows, no snapshots
  // The pool's budget counts the pages the rows occupy, per layer, K and V.
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  auto pages = [&](size_t bytes) { return (bytes + page - 1) / page * page; };
  EXPECT_EQ(seq->MemoryBytes(), 4 * (pages(300 * 68) + pages(300 * 36)));
  // Against F16 rows (128 bytes): about half for Q8_0, about a quarter for Q4_0.
  EXPECT_EQ(StateLayout::ForModel(model->config(), DType::kF16, 512).kv_bytes_per_token(), 1024u);
  EXPECT_EQ(StateLayout::ForModel(model->config(), DType::kQ4_0, 512).kv_bytes_per_token(), 288u);
}

TEST(KvTypeLayoutTest, FingerprintNamesBothKvTypes) {
  auto model = LoadRef("tiny-qwen3");
  ASSERT_NE(model, nullptr);
  std::set<uint64_t> seen;
  for (DType k : kKvTypes) {
    for (DType v : kKvTypes) {
      const StateLayout l = StateLayout::ForModel(model->config(), k, v, 1024);
      EXPECT_TRUE(seen.insert(l.Fingerprint()).second) << l.KvTypesText();
      // Any other layout of the model finds which types made it.
      const StateLayout f16 = StateLayout::ForModel(model->config(), DType::kF16, 1024);
      DType got_k = DType::kF32, got_v = DType::kF32;
      ASSERT_TRUE(f16.KvTypesOf(l.Fingerprint(), &got_k, &got_v)) << l.KvTypesText();
      EXPECT_EQ(got_k, k);
      EXPECT_EQ(got_v, v);
    }
  }
  DType k, v;
  EXPECT_FALSE(StateLayout::ForModel(model->config(), DType::kF16, 1024).KvTypesOf(12345, &k, &v));
  // States of one type keep the fingerprint they had before K and V could
  // differ, so saved caches written by earlier builds stay loadable.
  EXPECT_EQ(StateLayout::ForModel(model->config(), DType::kF16, 1024).Fingerprint(),
            13142723618663486558ull);
  EXPECT_EQ(StateLayout::ForModel(model->config(), DType::kF32, 1024).Fingerprint(),
            10891298043532611989ull);
  auto llama = LoadRef("tiny-llama");
  ASSERT_NE(llama, nullptr);
  EXPECT_EQ(StateLayout::ForModel(llama->config(), DType::kF16, 1024).Fingerprint(),
            16834555484953006853ull);
}

// The RoPE variants a context shift depends on are part of the fingerprint:
// frequency tables (by value), YaRN and the attention factor; LongRoPE's
// table is the one the context size chose.
TEST(KvTypeLayoutTest, FingerprintNamesTheRopeVariants) {
  auto llama31 = LoadRef("tiny-llama31");
  ASSERT_NE(llama31, nullptr);
  const StateLayout l = StateLayout::ForModel(llama31->config(), DType::kF16, 1024);
  ASSERT_EQ(l.rope_freq_factors.size(), 32u);
  EXPECT_NEAR(l.rope_freq_factors[15], 1.55341f, 1e-5f);  // ref/README-dense.md
  StateLayout no_factors = l;
  no_factors.rope_freq_factors.clear();
  EXPECT_NE(no_factors.Fingerprint(), l.Fingerprint());
  StateLayout other_factors = l;
  other_factors.rope_freq_factors[20] = 7.0f;
  EXPECT_NE(other_factors.Fingerprint(), l.Fingerprint());

  auto yarn = LoadRef("tiny-qwen3-yarn");
  ASSERT_NE(yarn, nullptr);
  const StateLayout y = StateLayout::ForModel(yarn->config(), DType::kF16, 1024);
  EXPECT_EQ(y.rope.ext_factor, 1.0f);
  EXPECT_EQ(y.rope.n_ctx_orig, 512);
  StateLayout no_yarn = y;
  no_yarn.rope.ext_factor = 0.0f;
  EXPECT_NE(no_yarn.Fingerprint(), y.Fingerprint());

  auto phi3 = LoadRef("tiny-phi3");
  ASSERT_NE(phi3, nullptr);
  const StateLayout long_ctx = StateLayout::ForModel(phi3->config(), DType::kF16, 2048);
  const StateLayout short_ctx = StateLayout::ForModel(phi3->config(), DType::kF16, 512);
  EXPECT_EQ(long_ctx.rope_freq_factors, phi3->config().rope_factors_long);
  EXPECT_EQ(short_ctx.rope_freq_factors, phi3->config().rope_factors_short);
  EXPECT_NE(long_ctx.Fingerprint(), short_ctx.Fingerprint());
  StateLayout no_attn_factor = long_ctx;
  no_attn_factor.rope.attn_factor = 1.0f;
  EXPECT_NE(no_attn_factor.Fingerprint(), long_ctx.Fingerprint());
}

TEST(KvTypeLayoutTest, QuantizedTypesNeedHeadsOfWholeBlocks) {
  SyntheticSpec spec;
  spec.head_dim = 40;  // 4 heads of 40: no whole 32-value blocks
  spec.n_layer = 1;
  const std::string path =
      std::string(::testing::TempDir()) + "/kv_head40_" + std::to_string(getpid()) + ".gguf";
  ASSERT_TRUE(WriteSyntheticModel(Env::Default(), spec, path).ok());
  auto model = Model::Load(Env::Default(), path, {.progress = nullptr, .prefault = false});
  std::remove(path.c_str());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto q8 = Runner::Create(**model, {.n_threads = 1, .kv_type = DType::kQ8_0, .n_ctx = 64});
  ASSERT_FALSE(q8.ok());
  EXPECT_EQ(q8.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(q8.status().message().find("K cache type Q8_0 stores blocks of 32 values, but this "
                                       "model's attention heads have 40 dims"),
            std::string::npos)
      << q8.status().ToString();
  auto v4 = Runner::Create(
      **model, {.n_threads = 1, .kv_type = DType::kF16, .n_ctx = 64, .v_type = DType::kQ4_0});
  ASSERT_FALSE(v4.ok());
  EXPECT_NE(v4.status().message().find("V cache type Q4_0"), std::string::npos);
  EXPECT_TRUE(Runner::Create(**model, {.n_threads = 1, .kv_type = DType::kF32, .n_ctx = 64}).ok());
  auto other = Runner::Create(**model, {.n_threads = 1, .kv_type = DType::kQ4_1, .n_ctx = 64});
  EXPECT_NE(other.status().message().find("not supported (F16, F32, Q8_0 or Q4_0)"),
            std::string::npos);
}

// Dequantized rows of layer 0 of a state, [n_tokens][dims].
std::vector<float> Layer0(const SequenceState& s, bool keys) {
  const StateLayout& l = s.layout();
  const int64_t dims = l.kv_dims[0];
  std::vector<float> out(static_cast<size_t>(s.n_tokens() * dims));
  const DType t = keys ? l.k_type : l.v_type;
  const size_t rb = keys ? l.k_row_bytes(0) : l.v_row_bytes(0);
  const uint8_t* base = keys ? s.k_data(0) : s.v_data(0);
  for (int64_t p = 0; p < s.n_tokens(); ++p) {
    kernels::LoadKvRow(t, base + static_cast<size_t>(p) * rb, dims,
                       &out[static_cast<size_t>(p * dims)]);
  }
  return out;
}

// Removing a span re-rotates the later quantized keys: dequantized, rotated,
// quantized again. In layer 0 a key depends only on its token and position,
// so the shifted keys must equal a fresh read's within the rounding of two
// quantizations (the fresh key's and the requantized one's, plus the first
// one carried through the rotation): per 32-value block, 1.5 levels of
// Q8_0 (block max / 127 each) or of Q4_0 (max / 8). Values move untouched.
TEST(KvTypeShiftTest, QuantizedKeysAreRequantizedAfterTheRotation) {
  for (const std::string name : {"tiny-llama", "tiny-qwen3"}) {
    for (DType kt : {DType::kQ8_0, DType::kQ4_0}) {
      SCOPED_TRACE(name + " K " + DTypeName(kt));
      auto model = LoadRef(name);
      ASSERT_NE(model, nullptr);
      auto runner = Runner::Create(
          *model, {.n_threads = 1, .kv_type = kt, .n_ctx = 512, .v_type = DType::kQ8_0});
      ASSERT_TRUE(runner.ok());
      Runner& r = **runner;
      const std::vector<int32_t> tokens = RandomTokens(200, 9);
      auto seq = r.NewSequence();
      Read(r, seq.get(), tokens, 200);
      ASSERT_TRUE(seq->RemoveSpan(10, 150).ok());
      std::vector<int32_t> kept(tokens.begin(), tokens.begin() + 10);
      kept.insert(kept.end(), tokens.begin() + 150, tokens.end());
      auto fresh = r.NewSequence();
      Read(r, fresh.get(), kept, kept.size());
      const std::vector<float> a = Layer0(*seq, true), b = Layer0(*fresh, true);
      const float levels = kt == DType::kQ8_0 ? 127.0f : 8.0f;
      float worst = 0.0f;  // in levels of the block
      bool differs = false;
      for (size_t blk = 0; blk < a.size() / 32; ++blk) {
        float amax = 0.0f;
        for (size_t j = 32 * blk; j < 32 * blk + 32; ++j) amax = std::max(amax, std::fabs(b[j]));
        for (size_t j = 32 * blk; j < 32 * blk + 32; ++j) {
          worst = std::max(worst, std::fabs(a[j] - b[j]) / (amax / levels));
          differs |= a[j] != b[j];
        }
      }
      std::printf("%s K %s: shifted layer-0 keys within %.2f levels of a fresh read\n",
                  name.c_str(), DTypeName(kt).c_str(), worst);
      EXPECT_LE(worst, 1.5f);
      EXPECT_TRUE(differs);  // not bit-exact: the rotation happened on rounded keys
      const size_t vb = r.layout()->v_row_bytes(0);
      for (int64_t p = 0; p < seq->n_tokens(); ++p) {
        ASSERT_EQ(std::memcmp(seq->v_data(0) + p * vb, fresh->v_data(0) + p * vb, vb), 0) << p;
      }
    }
  }
}

// End to end on a one-layer model, where a kept token's keys and values
// depend only on the token and its position, so a shift must reproduce a
// fresh read of the trimmed prompt up to rounding: the logits of 16
// follow-up tokens after the shift against the fresh read's, per KV type,
// held to the type's own error (a fresh read against F32 rows). Measured
// (max |dlogit|, shift / type): f16 6.9e-4 / 5.3e-4, q8_0 1.6e-2 / 1.4e-2,
// q4_0 0.28 / 0.22; greedy agrees at 16 of 16 positions except q4_0 (14 after
// the shift, 15 fresh: near-ties of this random-weight model).
TEST(KvTypeShiftTest, ShiftOnAOneLayerModelStaysCloseToAFreshRead) {
  SyntheticSpec spec;
  spec.n_layer = 1;
  const std::string path = std::string(::testing::TempDir()) + "/kv_shift_one_layer_" +
                           std::to_string(getpid()) + ".gguf";
  ASSERT_TRUE(WriteSyntheticModel(Env::Default(), spec, path).ok());
  auto model = Model::Load(Env::Default(), path, {.progress = nullptr, .prefault = false});
  std::remove(path.c_str());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const std::vector<int32_t> chat = RandomTokens(220, 3), next = RandomTokens(16, 4);
  std::vector<int32_t> trimmed(chat.begin(), chat.begin() + 12);
  trimmed.insert(trimmed.end(), chat.begin() + 92, chat.end());
  trimmed.insert(trimmed.end(), next.begin(), next.end());
  // Max |dlogit| between two [16][n_vocab] logit blocks, and at how many of
  // the 16 positions their greedy tokens agree.
  auto gap = [](const std::vector<float>& a, const std::vector<float>& b, size_t n_vocab) {
    std::pair<float, int> out{0.0f, 0};
    for (size_t i = 0; i < a.size() / n_vocab; ++i) {
      const float* x = &a[i * n_vocab];
      const float* y = &b[i * n_vocab];
      for (size_t j = 0; j < n_vocab; ++j) out.first = std::max(out.first, std::fabs(x[j] - y[j]));
      out.second += std::max_element(x, x + n_vocab) - x == std::max_element(y, y + n_vocab) - y;
    }
    return out;
  };
  std::vector<float> exact;  // a fresh read with F32 KV rows
  {
    auto runner = Runner::Create(**model, {.n_threads = 2, .kv_type = DType::kF32, .n_ctx = 512});
    ASSERT_TRUE(runner.ok());
    auto fresh = (*runner)->NewSequence();
    exact = Read(**runner, fresh.get(), trimmed, trimmed.size() - next.size());
  }
  for (DType t : {DType::kF16, DType::kQ8_0, DType::kQ4_0}) {
    SCOPED_TRACE(DTypeName(t));
    auto runner = Runner::Create(**model, {.n_threads = 2, .kv_type = t, .n_ctx = 512});
    ASSERT_TRUE(runner.ok());
    Runner& r = **runner;
    auto shifted = r.NewSequence();
    Read(r, shifted.get(), chat, chat.size());
    ASSERT_TRUE(shifted->RemoveSpan(12, 92).ok());
    const std::vector<float> got = Read(r, shifted.get(), next);
    auto fresh = r.NewSequence();
    const std::vector<float> want = Read(r, fresh.get(), trimmed, trimmed.size() - next.size());
    ASSERT_EQ(got.size(), want.size());
    const size_t n_vocab = static_cast<size_t>(r.n_vocab());
    const auto [shift_diff, shift_agree] = gap(got, want, n_vocab);
    const auto [type_diff, type_agree] = gap(want, exact, n_vocab);
    std::printf(
        "one-layer shift, KV %s: max |dlogit| %.2e against a fresh read (greedy agrees at %d of "
        "%zu); the type itself costs %.2e against F32 rows (agrees at %d)\n",
        DTypeName(t).c_str(), shift_diff, shift_agree, next.size(), type_diff, type_agree);
    // The shift adds about one more rounding of the keys: no more than the
    // type's own error.
    EXPECT_LT(shift_diff, t == DType::kF16 ? 0.01f : 1.5f * type_diff);
    if (t != DType::kQ4_0) {
      EXPECT_EQ(shift_agree, static_cast<int>(next.size()));
    }
  }
}

}  // namespace
}  // namespace mx::models
