// Batch invariance and the state operations the prompt cache is built on:
// truncate, copy a prefix, serialize, remove a span (context shift).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "models/model.h"
#include "models/runner.h"
#include "ref_data.h"

namespace mx::models {
namespace {

std::string RefModelPath(const std::string& name) {
  return mx::testing::RefDir() + "/models/" + name + ".gguf";
}

std::vector<int32_t> RandomTokens(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng() % 4093);
  return t;
}

// A reference model and the KV types its state uses.
struct StateCase {
  std::string model;
  DType k_type = DType::kF16;
  DType v_type = DType::kF16;
};

class StateTest : public ::testing::TestWithParam<StateCase> {
 protected:
  void SetUp() override { Open(GetParam().k_type, GetParam().v_type); }
  void Open(DType k_type, DType v_type) {
    auto model = Model::Load(Env::Default(), RefModelPath(GetParam().model),
                             {.progress = nullptr, .prefault = false});
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    model_ = std::move(model).value();
    auto runner = Runner::Create(
        *model_, {.n_threads = 2, .kv_type = k_type, .n_ctx = 1024, .v_type = v_type});
    ASSERT_TRUE(runner.ok()) << runner.status().ToString();
    runner_ = std::move(runner).value();
  }

  // Reads tokens [begin, end) into seq in chunks of `chunk`; returns the
  // logits of every position read, [end - begin][n_vocab].
  std::vector<float> Read(SequenceState* seq, const std::vector<int32_t>& tokens, size_t begin,
                          size_t end, size_t chunk) {
    std::vector<float> all, logits;
    for (size_t i = begin; i < end; i += chunk) {
      std::vector<BatchEntry> batch;
      for (size_t j = i; j < std::min(end, i + chunk); ++j) batch.push_back({seq, tokens[j], true});
      Status st = runner_->Forward(batch, &logits);
      EXPECT_TRUE(st.ok()) << st.ToString();
      all.insert(all.end(), logits.begin(), logits.end());
    }
    return all;
  }

  bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  }

  std::unique_ptr<Model> model_;
  std::unique_ptr<Runner> runner_;
};

TEST_P(StateTest, ChunkingNeverChangesLogits) {
  auto tokens = RandomTokens(150, 1);
  auto one = runner_->NewSequence();
  std::vector<float> want = Read(one.get(), tokens, 0, tokens.size(), tokens.size());
  for (size_t chunk : {1, 2, 7, 64, 149}) {
    auto seq = runner_->NewSequence();
    EXPECT_TRUE(BitEqual(Read(seq.get(), tokens, 0, tokens.size(), chunk), want)) << "chunk " << chunk;
  }
}

TEST_P(StateTest, NeighboursInTheBatchNeverChangeLogits) {
  auto a = RandomTokens(60, 2), b = RandomTokens(45, 3);
  auto sa = runner_->NewSequence(), sb = runner_->NewSequence();
  std::vector<float> want_a = Read(sa.get(), a, 0, a.size(), a.size());
  std::vector<float> want_b = Read(sb.get(), b, 0, b.size(), b.size());

  // Interleave the two sequences in one batch, a few tokens of each at a time.
  auto ia = runner_->NewSequence(), ib = runner_->NewSequence();
  std::vector<BatchEntry> batch;
  std::vector<int> owner;
  size_t pa = 0, pb = 0;
  while (pa < a.size() || pb < b.size()) {
    for (int k = 0; k < 3 && pa < a.size(); ++k) batch.push_back({ia.get(), a[pa++], true}), owner.push_back(0);
    for (int k = 0; k < 2 && pb < b.size(); ++k) batch.push_back({ib.get(), b[pb++], true}), owner.push_back(1);
  }
  std::vector<float> logits;
  ASSERT_TRUE(runner_->Forward(batch, &logits).ok());
  const size_t v = static_cast<size_t>(runner_->n_vocab());
  std::vector<float> got_a, got_b;
  for (size_t i = 0; i < owner.size(); ++i) {
    auto& dst = owner[i] == 0 ? got_a : got_b;
    dst.insert(dst.end(), logits.begin() + i * v, logits.begin() + (i + 1) * v);
  }
  EXPECT_TRUE(BitEqual(got_a, want_a));
  EXPECT_TRUE(BitEqual(got_b, want_b));
}

TEST_P(StateTest, ClonedPrefixContinuesExactly) {
  auto tokens = RandomTokens(120, 4);
  auto full = runner_->NewSequence();
  std::vector<float> want = Read(full.get(), tokens, 0, tokens.size(), 32);
  if (full->has_recurrent()) {
    // A hybrid state describes its last position only: copy it whole and continue.
    auto part = runner_->NewSequence();
    Read(part.get(), tokens, 0, 80, 80);
    auto copy = part->ClonePrefix(80);
    ASSERT_TRUE(copy.ok());
    std::vector<float> rest = Read(copy->get(), tokens, 80, tokens.size(), 40);
    EXPECT_TRUE(BitEqual(rest, std::vector<float>(want.begin() + 80 * runner_->n_vocab(), want.end())));
    EXPECT_FALSE(full->ClonePrefix(80).ok());
    return;
  }
  auto copy = full->ClonePrefix(70);
  ASSERT_TRUE(copy.ok());
  EXPECT_EQ((*copy)->n_tokens(), 70);
  EXPECT_EQ((*copy)->SizeBytes(), 70 * runner_->layout()->kv_bytes_per_token());
  std::vector<float> rest = Read(copy->get(), tokens, 70, tokens.size(), 50);
  EXPECT_TRUE(BitEqual(rest, std::vector<float>(want.begin() + 70 * runner_->n_vocab(), want.end())));
  // The original is untouched by the copy's growth.
  EXPECT_EQ(full->n_tokens(), 120);
}

TEST_P(StateTest, AStateMovesAtMostOnceWhateverItGrowsTo) {
  // A chat's state grows every turn; moving it copies every row, so it gets
  // room for the whole context the first time it grows (lazily backed).
  if (runner_->layout()->kv_dims.empty()) GTEST_SKIP() << "no KV rows";
  auto tokens = RandomTokens(300, 5);
  auto seq = runner_->NewSequence();
  Read(seq.get(), tokens, 0, 10, 10);
  const uint8_t* k0 = seq->k_data(0);
  Read(seq.get(), tokens, 10, tokens.size(), 64);
  EXPECT_EQ(seq->k_data(0), k0);
  // Memory follows the rows written, not the context.
  EXPECT_LT(seq->CapacityBytes(), 2 * runner_->layout()->n_ctx * runner_->layout()->kv_bytes_per_token() / 3);
  if (seq->has_recurrent()) return;
  // A copy of a shared start continues in place too.
  auto copy = seq->ClonePrefix(200);
  ASSERT_TRUE(copy.ok());
  const uint8_t* c0 = (*copy)->k_data(0);
  std::vector<float> a = Read(copy->get(), tokens, 200, tokens.size(), 30);
  EXPECT_EQ((*copy)->k_data(0), c0);
  ASSERT_TRUE(seq->Truncate(200).ok());
  std::vector<float> b = Read(seq.get(), tokens, 200, tokens.size(), 100);
  EXPECT_TRUE(BitEqual(a, b));
}

TEST_P(StateTest, WithoutLazyAddressSpaceStatesStillGrowAndCopy) {
  // Strict overcommit refuses the lazy room: states fall back to growing in
  // real memory and every result stays the same.
  auto tokens = RandomTokens(300, 6);
  auto lazy = runner_->NewSequence();
  std::vector<float> want = Read(lazy.get(), tokens, 0, tokens.size(), 64);
  LargeBuffer::RefuseLazyForTesting(true);
  auto plain = runner_->NewSequence();
  std::vector<float> got = Read(plain.get(), tokens, 0, tokens.size(), 64);
  const bool copied = !plain->has_recurrent();
  std::vector<float> again;
  if (copied) {
    auto copy = plain->ClonePrefix(150);
    ASSERT_TRUE(copy.ok());
    again = Read(copy->get(), tokens, 150, tokens.size(), 40);
  }
  LargeBuffer::RefuseLazyForTesting(false);
  EXPECT_TRUE(BitEqual(want, got));
  EXPECT_EQ(plain->CapacityBytes() >= plain->SizeBytes(), true);
  if (copied) {
    EXPECT_TRUE(BitEqual(again, std::vector<float>(want.begin() + 150 * runner_->n_vocab(), want.end())));
  }
}

TEST_P(StateTest, TruncateThenRereadIsExact) {
  auto tokens = RandomTokens(100, 5);
  auto seq = runner_->NewSequence();
  std::vector<float> want = Read(seq.get(), tokens, 0, tokens.size(), 100);
  if (seq->has_recurrent()) {
    EXPECT_EQ(seq->Truncate(50).code(), Status::Code::kInvalidArgument);
    EXPECT_TRUE(seq->Truncate(0).ok());
    EXPECT_TRUE(BitEqual(Read(seq.get(), tokens, 0, tokens.size(), 100), want));
    return;
  }
  ASSERT_TRUE(seq->Truncate(40).ok());
  EXPECT_EQ(seq->n_tokens(), 40);
  std::vector<float> rest = Read(seq.get(), tokens, 40, tokens.size(), 60);
  EXPECT_TRUE(BitEqual(rest, std::vector<float>(want.begin() + 40 * runner_->n_vocab(), want.end())));
  EXPECT_EQ(seq->Truncate(101).code(), Status::Code::kInvalidArgument);
}

TEST_P(StateTest, SerializedStateContinuesExactly) {
  auto tokens = RandomTokens(90, 6);
  auto full = runner_->NewSequence();
  std::vector<float> want = Read(full.get(), tokens, 0, tokens.size(), 90);
  auto part = runner_->NewSequence();
  Read(part.get(), tokens, 0, 60, 60);
  std::string bytes = part->Serialize();
  EXPECT_EQ(bytes.size(), 28 + part->SizeBytes() + 8 * part->SnapshotPositions().size());
  auto back = SequenceState::Deserialize(runner_->layout(), bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  std::vector<float> rest = Read(back->get(), tokens, 60, tokens.size(), 30);
  EXPECT_TRUE(BitEqual(rest, std::vector<float>(want.begin() + 60 * runner_->n_vocab(), want.end())));
}

TEST_P(StateTest, SerializeViewIsSerializeWithoutACopy) {
  auto seq = runner_->NewSequence();
  Read(seq.get(), RandomTokens(40, 3), 0, 40, 40);
  const std::string bytes = seq->Serialize();
  const SerializedView view = seq->SerializeView();
  std::string joined;
  for (const auto& part : view.parts) joined.append(reinterpret_cast<const char*>(part.data()), part.size());
  EXPECT_EQ(view.bytes, bytes.size());
  EXPECT_TRUE(joined == bytes);
  // The KV rows are views of the state's own memory.
  EXPECT_EQ(view.parts[1].data(), seq->k_data(0));
}

TEST_P(StateTest, StateLoaderFilledInPlaceContinuesExactly) {
  auto tokens = RandomTokens(70, 8);
  auto full = runner_->NewSequence();
  std::vector<float> want = Read(full.get(), tokens, 0, tokens.size(), 70);
  auto part = runner_->NewSequence();
  Read(part.get(), tokens, 0, 50, 50);
  const std::string bytes = part->Serialize();
  auto loader = StateLoader::Prepare(runner_->layout(), 50, bytes.size());
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  size_t at = 0;
  for (const auto& b : loader->buffers()) {
    std::memcpy(b.data(), bytes.data() + at, b.size());
    at += b.size();
  }
  EXPECT_EQ(at, bytes.size());
  auto back = loader->Finish();
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ((*back)->n_tokens(), 50);
  EXPECT_TRUE((*back)->Serialize() == bytes);
  std::vector<float> rest = Read(back->get(), tokens, 50, tokens.size(), 20);
  EXPECT_TRUE(BitEqual(rest, std::vector<float>(want.begin() + 50 * runner_->n_vocab(), want.end())));
}

TEST_P(StateTest, StateLoaderRejectsWrongSizesAndCounts) {
  auto seq = runner_->NewSequence();
  Read(seq.get(), RandomTokens(20, 9), 0, 20, 20);
  const std::string bytes = seq->Serialize();
  const auto& layout = runner_->layout();
  EXPECT_EQ(StateLoader::Prepare(layout, 20, bytes.size() - 1).status().code(), Status::Code::kCorruption);
  EXPECT_EQ(StateLoader::Prepare(layout, 20, bytes.size() + 1).status().code(), Status::Code::kCorruption);
  EXPECT_EQ(StateLoader::Prepare(layout, layout->n_ctx + 1, bytes.size()).status().code(),
            Status::Code::kInvalidArgument);
  // Filled with a state of another token count (same size is impossible
  // here, so: the right size but a header saying 21 tokens).
  std::string bad = bytes;
  bad[16] ^= 1;
  auto loader = StateLoader::Prepare(layout, 20, bad.size());
  ASSERT_TRUE(loader.ok());
  size_t at = 0;
  for (const auto& b : loader->buffers()) {
    std::memcpy(b.data(), bad.data() + at, b.size());
    at += b.size();
  }
  EXPECT_EQ(loader->Finish().status().code(), Status::Code::kCorruption);
}

TEST_P(StateTest, DamagedSerializedStateIsRejected) {
  auto seq = runner_->NewSequence();
  Read(seq.get(), RandomTokens(20, 7), 0, 20, 20);
  std::string bytes = seq->Serialize();
  const auto& layout = runner_->layout();
  EXPECT_EQ(SequenceState::Deserialize(layout, bytes.substr(0, 10)).status().code(), Status::Code::kCorruption);
  EXPECT_EQ(SequenceState::Deserialize(layout, bytes.substr(0, bytes.size() - 1)).status().code(),
            Status::Code::kCorruption);
  EXPECT_EQ(SequenceState::Deserialize(layout, bytes + "x").status().code(), Status::Code::kCorruption);
  std::string bad_magic = bytes;
  bad_magic[0] ^= 1;
  EXPECT_EQ(SequenceState::Deserialize(layout, bad_magic).status().code(), Status::Code::kCorruption);
  std::string bad_version = bytes;
  bad_version[4] ^= 1;
  EXPECT_EQ(SequenceState::Deserialize(layout, bad_version).status().code(), Status::Code::kNotSupported);
  std::string bad_count = bytes;
  bad_count[16] ^= 1;
  EXPECT_EQ(SequenceState::Deserialize(layout, bad_count).status().code(), Status::Code::kCorruption);
  // Another layout (other KV types) refuses the bytes and says why.
  const DType other_k = GetParam().k_type == DType::kF32 ? DType::kQ8_0 : DType::kF32;
  auto other = std::make_shared<const StateLayout>(
      StateLayout::ForModel(model_->config(), other_k, GetParam().v_type, 1024));
  auto st = SequenceState::Deserialize(other, bytes);
  EXPECT_EQ(st.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(
      st.status().message().find("state was made with KV cache type " + layout->KvTypesText() +
                                 ", this model runs " + other->KvTypesText()),
      std::string::npos)
      << st.status().ToString();
}

TEST_P(StateTest, ContextLimitIsAnErrorNotACrash) {
  auto seq = runner_->NewSequence();
  auto tokens = RandomTokens(1025, 8);
  std::vector<BatchEntry> batch;
  for (int32_t t : tokens) batch.push_back({seq.get(), t, false});
  std::vector<float> logits;
  Status st = runner_->Forward(batch, &logits);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("1024"), std::string::npos);
  EXPECT_EQ(seq->n_tokens(), 0);
  BatchEntry bad{seq.get(), 4096, true};
  EXPECT_EQ(runner_->Forward({&bad, 1}, &logits).code(), Status::Code::kInvalidArgument);
}

// A state made by one runner continues on a second runner of the same model
// file (a reload) once adopted, exactly as on its own; a runner whose
// layout differs (another KV type, a context too small for it) refuses it
// and leaves it untouched.
TEST_P(StateTest, AnotherRunnerOfTheFileAdoptsAState) {
  auto tokens = RandomTokens(100, 12);
  auto full = runner_->NewSequence();
  std::vector<float> want = Read(full.get(), tokens, 0, tokens.size(), 100);
  auto part = runner_->NewSequence();
  Read(part.get(), tokens, 0, 60, 60);
  // The same context size: phi3's rope factors depend on it (another size
  // is another layout, refused below).
  auto second = Runner::Create(*model_, {.n_threads = 1, .kv_type = GetParam().k_type, .n_ctx = 1024,
                                         .v_type = GetParam().v_type});
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  std::vector<BatchEntry> one = {{part.get(), tokens[60], true}};
  std::vector<float> logits;
  EXPECT_EQ((*second)->Forward(one, &logits).code(), Status::Code::kInvalidArgument);  // not its state yet
  ASSERT_TRUE((*second)->Adopt(part.get()).ok());
  for (size_t i = 60; i < tokens.size(); i += 20) {
    std::vector<BatchEntry> batch;
    for (size_t j = i; j < i + 20; ++j) batch.push_back({part.get(), tokens[j], true});
    ASSERT_TRUE((*second)->Forward(batch, &logits).ok());
    EXPECT_TRUE(BitEqual(logits, std::vector<float>(want.begin() + static_cast<int64_t>(i) * runner_->n_vocab(),
                                                    want.begin() + static_cast<int64_t>(i + 20) * runner_->n_vocab())));
  }
  // Another KV type lays rows out differently; a context of 64 cannot hold 100 tokens.
  const DType other = GetParam().k_type == DType::kQ8_0 ? DType::kF32 : DType::kQ8_0;
  auto other_kv = Runner::Create(*model_, {.n_threads = 1, .kv_type = other, .n_ctx = 512});
  auto small = Runner::Create(*model_, {.n_threads = 1, .kv_type = GetParam().k_type, .n_ctx = 64,
                                        .v_type = GetParam().v_type});
  ASSERT_TRUE(small.ok());
  if (other_kv.ok() && !part->layout().kv_dims.empty()) {
    Status st = (*other_kv)->Adopt(part.get());
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
    EXPECT_NE(st.message().find("another model or KV type"), std::string::npos) << st.ToString();
  }
  Status st = (*small)->Adopt(part.get());
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  const bool same_layout = (*small)->layout()->Fingerprint() == runner_->layout()->Fingerprint();
  EXPECT_NE(st.message().find(same_layout ? "context size 64" : "another model or KV type"), std::string::npos)
      << st.ToString();
  EXPECT_EQ(&part->layout(), (*second)->layout().get());  // unchanged by the refusals
}

std::string StateCaseName(const ::testing::TestParamInfo<StateCase>& info) {
  std::string s = info.param.model;
  if (info.param.k_type != DType::kF16 || info.param.v_type != DType::kF16) {
    s += "_k" + DTypeLowerName(info.param.k_type) + "_v" + DTypeLowerName(info.param.v_type);
  }
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

INSTANTIATE_TEST_SUITE_P(Models, StateTest,
                         ::testing::Values(StateCase{"tiny-llama"}, StateCase{"tiny-llama-q8_0"},
                                           StateCase{"tiny-llama-f16"},
                                           StateCase{"tiny-qwen2-bf16"}, StateCase{"tiny-qwen3"},
                                           StateCase{"tiny-llama256-q4_k_m"},
                                           StateCase{"tiny-hybrid-nemotron_h"},
                                           StateCase{"tiny-qwen35"}, StateCase{"tiny-llama31"},
                                           StateCase{"tiny-qwen3-yarn"}, StateCase{"tiny-phi3"},
                                           StateCase{"tiny-smollm3"}, StateCase{"tiny-granite"},
                                           StateCase{"tiny-gemma3"}),
                         StateCaseName);

// Every state operation under the quantized KV types (and K and V of
// different types, so their rows differ in size) on the models with
// attention: each stays exact (batch invariance holds per type).
INSTANTIATE_TEST_SUITE_P(KvTypes, StateTest,
                         ::testing::Values(StateCase{"tiny-llama", DType::kQ8_0, DType::kQ8_0},
                                           StateCase{"tiny-llama", DType::kQ4_0, DType::kQ4_0},
                                           StateCase{"tiny-llama", DType::kQ8_0, DType::kQ4_0},
                                           StateCase{"tiny-qwen3", DType::kQ8_0, DType::kQ8_0},
                                           StateCase{"tiny-qwen3", DType::kF16, DType::kQ4_0},
                                           StateCase{"tiny-hybrid-nemotron_h", DType::kQ8_0,
                                                     DType::kQ8_0},
                                           StateCase{"tiny-qwen35", DType::kQ4_0, DType::kQ8_0},
                                           StateCase{"tiny-llama", DType::kF32, DType::kF32}),
                         StateCaseName);

// Removing a span re-rotates the later keys to their new positions. In layer 0
// a key depends only on its own token and position, so after the shift the
// layer-0 keys must equal those of a fresh read of the remaining tokens (up to
// the extra f32 rotation), and the values must be byte-identical.
// A SmolLM2-sized state (30 layers, 3 KV heads of 64, F16: 23 KB a token)
// is large enough that copies and growth run on the copy pool's threads;
// every row must arrive intact, whichever thread moved it.
TEST(StateMemoryTest, LargeCopiesAndGrowthOnThreadsKeepEveryRow) {
  StateLayout l;
  l.k_type = l.v_type = DType::kF16;
  l.kv_dims.assign(30, 3 * 64);
  l.n_ctx = 2048;
  l.head_dim = 64;
  auto layout = std::make_shared<const StateLayout>(l);
  ThreadPool pool(2);
  const int64_t n = 600;  // 13.8 MB of rows
  auto row_byte = [](size_t layer, int64_t p, size_t i, bool v) {
    return static_cast<uint8_t>(layer * 31 + static_cast<size_t>(p) * 7 + i * 3 + (v ? 1 : 0));
  };
  auto fill = [&](SequenceState& s, int64_t from, int64_t to) {
    for (size_t layer = 0; layer < l.kv_dims.size(); ++layer) {
      for (int64_t p = from; p < to; ++p) {
        for (size_t i = 0; i < layout->k_row_bytes(layer); ++i) {
          s.k_row(layer, p)[i] = row_byte(layer, p, i, false);
          s.v_row(layer, p)[i] = row_byte(layer, p, i, true);
        }
      }
    }
  };
  auto check = [&](const SequenceState& s, int64_t rows) {
    for (size_t layer = 0; layer < l.kv_dims.size(); ++layer) {
      const size_t rb = layout->k_row_bytes(layer);  // K and V rows are alike here
      for (int64_t p = 0; p < rows; ++p) {
        for (size_t i = 0; i < rb; ++i) {
          if (s.k_data(layer)[static_cast<size_t>(p) * rb + i] != row_byte(layer, p, i, false) ||
              s.v_data(layer)[static_cast<size_t>(p) * rb + i] != row_byte(layer, p, i, true)) {
            return ::testing::AssertionFailure() << "layer " << layer << " row " << p << " byte " << i;
          }
        }
      }
    }
    return ::testing::AssertionSuccess();
  };
  // A restored state (exact-size block) that then grows into lazy room.
  const std::string bytes = [&] {
    SequenceState src(layout);
    EXPECT_TRUE(src.Reserve(n).ok());
    fill(src, 0, n);
    src.CommitTokens(n);
    return src.Serialize();
  }();
  auto loader = StateLoader::Prepare(layout, n, bytes.size());
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  size_t at = 0;
  for (const auto& b : loader->buffers()) {
    std::memcpy(b.data(), bytes.data() + at, b.size());
    at += b.size();
  }
  auto restored = loader->Finish();
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  (*restored)->set_copy_pool(&pool);
  ASSERT_TRUE((*restored)->Reserve(n + 100).ok());
  EXPECT_TRUE(check(**restored, n));
  EXPECT_GE((*restored)->CapacityBytes(), static_cast<size_t>(n + 100) * layout->kv_bytes_per_token());
  // A copy of a shared start.
  auto copy = (*restored)->ClonePrefix(n - 50);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_TRUE(check(**copy, n - 50));
  EXPECT_EQ((*copy)->n_tokens(), n - 50);
}

// Layer 0's keys depend on their own token only, so after a shift they must
// be what a fresh read of the kept tokens computes: the re-rotation uses the
// same frequencies (Llama 3.1 factors, YaRN, LongRoPE's table, gemma3's local
// base on its local layer 0) and does not
// scale the keys again (YaRN's and phi3's attention factor).
TEST(RemoveSpanTest, Layer0KeysMatchAFreshReadAtTheNewPositions) {
  for (const std::string name : {"tiny-llama", "tiny-qwen3", "tiny-llama31", "tiny-qwen3-yarn",
                                 "tiny-phi3", "tiny-smollm3", "tiny-gemma3", "tiny-qwen3moe",
                                 "tiny-gpt-oss"}) {
    SCOPED_TRACE(name);
    auto model = Model::Load(Env::Default(), RefModelPath(name), {.progress = nullptr, .prefault = false});
    ASSERT_TRUE(model.ok());
    auto runner = Runner::Create(**model, {.n_threads = 1, .kv_type = DType::kF32, .n_ctx = 512});
    ASSERT_TRUE(runner.ok());
    Runner& r = **runner;
    auto tokens = RandomTokens(200, 9);
    auto seq = r.NewSequence();
    std::vector<BatchEntry> batch;
    for (int32_t t : tokens) batch.push_back({seq.get(), t, false});
    std::vector<float> logits;
    ASSERT_TRUE(r.Forward(batch, &logits).ok());
    ASSERT_TRUE(seq->RemoveSpan(10, 150).ok());
    ASSERT_EQ(seq->n_tokens(), 60);

    std::vector<int32_t> kept(tokens.begin(), tokens.begin() + 10);
    kept.insert(kept.end(), tokens.begin() + 150, tokens.end());
    auto fresh = r.NewSequence();
    batch.clear();
    for (int32_t t : kept) batch.push_back({fresh.get(), t, false});
    ASSERT_TRUE(r.Forward(batch, &logits).ok());

    const size_t rb = r.layout()->v_row_bytes(0);
    const int64_t dims = r.layout()->kv_dims[0];
    float max_diff = 0;
    for (int64_t p = 0; p < 60; ++p) {
      const float* a = reinterpret_cast<const float*>(seq->k_row(0, p));
      const float* b = reinterpret_cast<const float*>(fresh->k_row(0, p));
      for (int64_t i = 0; i < dims; ++i) max_diff = std::max(max_diff, std::fabs(a[i] - b[i]));
      EXPECT_EQ(std::memcmp(seq->v_row(0, p), fresh->v_row(0, p), rb), 0) << "value row " << p;
    }
    EXPECT_LT(max_diff, 1e-4f);
    EXPECT_GT(max_diff, 0.0f);  // rotated, not copied from the fresh read
  }
}

// smollm3's NoPE layers (3 of 0-3) keep their keys unrotated: a shift moves
// their rows as they are, while the RoPE layers' rows are re-rotated.
TEST(RemoveSpanTest, NoPeLayersKeysMoveWithoutARotation) {
  auto model = Model::Load(Env::Default(), RefModelPath("tiny-smollm3"),
                           {.progress = nullptr, .prefault = false});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto runner = Runner::Create(**model, {.n_threads = 1, .kv_type = DType::kF32, .n_ctx = 512});
  ASSERT_TRUE(runner.ok());
  Runner& r = **runner;
  const StateLayout& layout = *r.layout();
  ASSERT_EQ(layout.kv_dims.size(), 4u);
  EXPECT_TRUE(layout.rope_on(0) && layout.rope_on(1) && layout.rope_on(2));
  EXPECT_FALSE(layout.rope_on(3));
  auto tokens = RandomTokens(120, 21);
  auto seq = r.NewSequence();
  std::vector<BatchEntry> batch;
  for (int32_t t : tokens) batch.push_back({seq.get(), t, false});
  std::vector<float> logits;
  ASSERT_TRUE(r.Forward(batch, &logits).ok());
  const int64_t p0 = 20, p1 = 70, n_move = 120 - p1;
  std::vector<std::vector<uint8_t>> before(4);
  for (size_t l = 0; l < 4; ++l) {
    const size_t rb = layout.k_row_bytes(l);
    before[l].assign(seq->k_row(l, p1), seq->k_row(l, p1) + static_cast<size_t>(n_move) * rb);
  }
  ASSERT_TRUE(seq->RemoveSpan(p0, p1).ok());
  for (size_t l = 0; l < 4; ++l) {
    const size_t rb = layout.k_row_bytes(l);
    const bool same = std::memcmp(seq->k_row(l, p0), before[l].data(), static_cast<size_t>(n_move) * rb) == 0;
    EXPECT_EQ(same, l == 3) << "layer " << l;
  }
  // The NoPE layer shows up in the fingerprint (a layout rotating every layer differs).
  StateLayout all_rope = layout;
  all_rope.rope_layers.assign(4, 1);
  EXPECT_NE(all_rope.Fingerprint(), layout.Fingerprint());
}

// Hybrid models: snapshots of the recurrent state taken while reading let a
// state be cut back (or copied) to a snapshot position, and continuing from
// there gives exactly the logits of a fresh read.
TEST(SnapshotTest, HybridStateRestartsExactlyFromASnapshot) {
  auto model = Model::Load(Env::Default(), RefModelPath("tiny-hybrid-nemotron_h"), {.progress = nullptr, .prefault = false});
  ASSERT_TRUE(model.ok());
  auto runner = Runner::Create(**model, {.n_threads = 2, .kv_type = DType::kF16, .n_ctx = 512});
  ASSERT_TRUE(runner.ok());
  Runner& r = **runner;
  auto tokens = RandomTokens(120, 11);
  auto read = [&](SequenceState* seq, size_t begin, size_t end, size_t chunk) {
    std::vector<float> all, logits;
    for (size_t i = begin; i < end; i += chunk) {
      std::vector<BatchEntry> batch;
      for (size_t j = i; j < std::min(end, i + chunk); ++j) batch.push_back({seq, tokens[j], true});
      EXPECT_TRUE(r.Forward(batch, &logits).ok());
      all.insert(all.end(), logits.begin(), logits.end());
    }
    return all;
  };
  auto fresh = r.NewSequence();
  std::vector<float> want = read(fresh.get(), 0, 120, 120);

  auto seq = r.NewSequence();
  seq->RequestSnapshot(30);
  seq->RequestSnapshot(75);
  read(seq.get(), 0, 100, 64);  // the snapshots fall inside batches
  EXPECT_EQ(seq->SnapshotPositions(), (std::vector<int64_t>{30, 75}));
  EXPECT_EQ(seq->SizeBytes(), 100 * r.layout()->kv_bytes_per_token() + 3 * r.layout()->recurrent_bytes());
  EXPECT_FALSE(seq->CanCutAt(50));
  EXPECT_EQ(seq->Truncate(50).code(), Status::Code::kInvalidArgument);

  // A copy cut at the first snapshot continues exactly.
  auto copy = seq->ClonePrefix(30);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  std::vector<float> from30 = read(copy->get(), 30, 120, 17);
  const size_t v = static_cast<size_t>(r.n_vocab());
  EXPECT_EQ(std::memcmp(from30.data(), want.data() + 30 * v, from30.size() * sizeof(float)), 0);

  // Through serialization, then cut in place at the second snapshot.
  auto back = SequenceState::Deserialize(r.layout(), seq->Serialize());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_TRUE((*back)->Truncate(75).ok());
  EXPECT_EQ((*back)->SnapshotPositions(), (std::vector<int64_t>{30, 75}));
  std::vector<float> from75 = read(back->get(), 75, 120, 45);
  EXPECT_EQ(std::memcmp(from75.data(), want.data() + 75 * v, from75.size() * sizeof(float)), 0);
}

// A dropped snapshot is no longer a cut point and no longer counts in the
// state's memory; the others stay usable.
TEST(SnapshotTest, DroppedSnapshotFreesItsMemoryAndItsCut) {
  auto model = Model::Load(Env::Default(), RefModelPath("tiny-hybrid-nemotron_h"),
                           {.progress = nullptr, .prefault = false});
  ASSERT_TRUE(model.ok());
  auto runner = Runner::Create(**model, {.n_threads = 1, .kv_type = DType::kF16, .n_ctx = 256});
  ASSERT_TRUE(runner.ok());
  Runner& r = **runner;
  auto tokens = RandomTokens(60, 5);
  auto seq = r.NewSequence();
  for (int64_t p : {10, 20, 40, 50}) seq->RequestSnapshot(p);
  std::vector<BatchEntry> batch;
  for (size_t i = 0; i < 45; ++i) batch.push_back({seq.get(), tokens[i], i + 1 == 45});
  std::vector<float> logits;
  ASSERT_TRUE(r.Forward(batch, &logits).ok());
  ASSERT_EQ(seq->SnapshotPositions(), (std::vector<int64_t>{10, 20, 40}));
  const size_t before = seq->MemoryBytes();
  EXPECT_TRUE(seq->DropSnapshot(20));
  EXPECT_FALSE(seq->DropSnapshot(20));
  EXPECT_FALSE(seq->DropSnapshot(30));
  EXPECT_EQ(seq->MemoryBytes(), before - r.layout()->recurrent_bytes());
  EXPECT_EQ(seq->SnapshotPositions(), (std::vector<int64_t>{10, 40}));
  EXPECT_FALSE(seq->CanCutAt(20));
  EXPECT_EQ(seq->NewestCutAtOrBefore(30), 10);
  EXPECT_TRUE(seq->DropSnapshot(50));  // a pending one
  EXPECT_EQ(seq->MemoryBytes(), before - 2 * r.layout()->recurrent_bytes());
  EXPECT_TRUE(seq->Truncate(40).ok());
}

// A chat that keeps overflowing: five shifts in a row, each dropping the
// oldest 30-token turn after a kept 10-token start. Positions must stay
// consistent: layer-0 keys equal a fresh read of what remains at every step.
TEST(RemoveSpanTest, ManyShiftsKeepPositionsConsistent) {
  auto model = Model::Load(Env::Default(), RefModelPath("tiny-llama"), {.progress = nullptr, .prefault = false});
  ASSERT_TRUE(model.ok());
  auto runner = Runner::Create(**model, {.n_threads = 1, .kv_type = DType::kF32, .n_ctx = 512});
  ASSERT_TRUE(runner.ok());
  Runner& r = **runner;
  std::vector<int32_t> held = RandomTokens(190, 12);
  auto seq = r.NewSequence();
  std::vector<BatchEntry> batch;
  for (int32_t t : held) batch.push_back({seq.get(), t, false});
  std::vector<float> logits;
  ASSERT_TRUE(r.Forward(batch, &logits).ok());
  for (int round = 0; round < 5; ++round) {
    ASSERT_TRUE(seq->RemoveSpan(10, 40).ok());
    held.erase(held.begin() + 10, held.begin() + 40);
    auto more = RandomTokens(30, 100 + static_cast<uint32_t>(round));  // the next turn, read after the shift
    batch.clear();
    for (int32_t t : more) batch.push_back({seq.get(), t, false});
    ASSERT_TRUE(r.Forward(batch, &logits).ok());
    held.insert(held.end(), more.begin(), more.end());
    ASSERT_EQ(seq->n_tokens(), static_cast<int64_t>(held.size()));
  }
  auto fresh = r.NewSequence();
  batch.clear();
  for (int32_t t : held) batch.push_back({fresh.get(), t, false});
  ASSERT_TRUE(r.Forward(batch, &logits).ok());
  const int64_t dims = r.layout()->kv_dims[0];
  float max_diff = 0;
  for (int64_t p = 0; p < seq->n_tokens(); ++p) {
    const float* a = reinterpret_cast<const float*>(seq->k_row(0, p));
    const float* b = reinterpret_cast<const float*>(fresh->k_row(0, p));
    for (int64_t i = 0; i < dims; ++i) max_diff = std::max(max_diff, std::fabs(a[i] - b[i]));
  }
  EXPECT_LT(max_diff, 1e-3f);  // five extra rotations of the oldest kept keys
}

TEST(RemoveSpanTest, RejectsBadSpansAndRecurrentState) {
  auto model = Model::Load(Env::Default(), RefModelPath("tiny-hybrid-nemotron_h"), {.progress = nullptr, .prefault = false});
  ASSERT_TRUE(model.ok());
  auto runner = Runner::Create(**model, {.n_threads = 1, .kv_type = DType::kF16, .n_ctx = 256});
  ASSERT_TRUE(runner.ok());
  auto seq = (*runner)->NewSequence();
  std::vector<BatchEntry> batch;
  for (int32_t t : RandomTokens(20, 10)) batch.push_back({seq.get(), t, false});
  std::vector<float> logits;
  ASSERT_TRUE((*runner)->Forward(batch, &logits).ok());
  EXPECT_EQ(seq->RemoveSpan(2, 5).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(seq->RemoveSpan(5, 2).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(seq->RemoveSpan(0, 21).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(seq->SizeBytes(), 20 * (*runner)->layout()->kv_bytes_per_token() +
                                  (*runner)->layout()->recurrent_bytes());
}

}  // namespace
}  // namespace mx::models
