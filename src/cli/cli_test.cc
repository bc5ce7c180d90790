// Integration tests of the matricxon binary: make-model and chat, run as a
// real process with real files.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "cache/crypto/key_store.h"
#include "cache/disk_store/disk_store.h"
#include "core/env.h"
#include "engine/loaded_model.h"
#include "engine/sampler.h"
#include "fifo_trap.h"
#include "gguf/gguf_file.h"
#include "kernels/kernels.h"
#include "models/runner.h"
#include "version/build_info.h"

namespace mx::cli {
namespace {

const std::string kBinary = std::string(MATRICXON_BINARY_DIR) + "/matricxon";

// One folder per test: ctest runs the tests of this binary as parallel processes.
std::string TempDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string dir = ::testing::TempDir() + "/mx_cli_test/" + info->test_suite_name() + "." + info->name();
  EXPECT_TRUE(Env::Default()->CreateDirs(dir).ok());
  return dir;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct RunResult {
  int exit_code;
  std::string out, err;
};

// Runs `matricxon <args>` with `input` on stdin.
RunResult RunMatricxon(const std::string& args, const std::string& input = "") {
  const std::string dir = TempDir();
  const std::string in = dir + "/stdin.txt", out = dir + "/stdout.txt", err = dir + "/stderr.txt";
  std::ofstream(in) << input;
  int rc = std::system((kBinary + " " + args + " < " + in + " > " + out + " 2> " + err).c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, ReadAll(out), ReadAll(err)};
}

// --version (and `version`, -V) names the release, the commit, the build type
// and the kernels' path with its CPU features; MATRICXON_KERNELS changes the path shown.
TEST(VersionTest, NamesTheBuildAndTheKernelsPath) {
  RunResult r = RunMatricxon("--version");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const version::BuildInfo& b = version::Build();
  EXPECT_EQ(r.out.rfind("matricxon " + std::string(b.version) + " (commit ", 0), 0u) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(^matricxon \d+\.\d+\.\d+ \(commit ([0-9a-f]{7,40}(-dirty)?|unknown), \w+\)\n)")))
      << r.out;
  const std::string best = kernels::IsaName(kernels::AvailableIsas().back());
  EXPECT_NE(r.out.find("\nkernels: " + best), std::string::npos) << r.out;
  if (best == "avx2") {
    EXPECT_NE(r.out.find("kernels: avx2 (avx2 fma f16c)"), std::string::npos) << r.out;
  }
  if (best == "avx512") {
    EXPECT_NE(r.out.find("avx512vnni"), std::string::npos) << r.out;
  }
  EXPECT_NE(r.out.find("built with "), std::string::npos) << r.out;
  EXPECT_EQ(RunMatricxon("version").out, r.out);
  EXPECT_EQ(RunMatricxon("-V").out, r.out);

  const std::string dir = TempDir();
  const int rc = std::system(("MATRICXON_KERNELS=scalar " + kBinary + " --version > " + dir + "/scalar.txt").c_str());
  ASSERT_EQ(rc, 0);
  const std::string scalar = ReadAll(dir + "/scalar.txt");
  EXPECT_NE(scalar.find("\nkernels: scalar; this CPU runs: scalar"), std::string::npos) << scalar;
}

TEST(MakeModelTest, WritesALoadableModelWithATokenizer) {
  const std::string path = TempDir() + "/small.gguf";
  RunResult r = RunMatricxon("make-model --quiet --out " + path +
                    " --arch qwen3 --layers 2 --dim 64 --heads 4 --kv-heads 2 --head-dim 32 --ffn 128"
                    " --vocab 1024 --type q8_0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lm = engine::LoadedModel::Load(Env::Default(), path, {});
  ASSERT_TRUE(lm.ok()) << lm.status().ToString();
  const auto& c = (*lm)->model->config();
  EXPECT_EQ(c.arch, models::Arch::kQwen3);
  EXPECT_EQ(c.n_layer, 2);
  EXPECT_EQ(c.n_embd, 64);
  EXPECT_EQ(c.head_dim_k, 32);
  EXPECT_EQ(c.n_vocab, 1024);
  EXPECT_TRUE(c.tied_output == false);
  EXPECT_EQ((*lm)->model->layer(0).wq.type, DType::kQ8_0);
  EXPECT_EQ((*lm)->family, templates::TemplateFamily::kChatml);
  const std::string text = "The prompt cache keeps every chat fast. ünïcode ✓";
  auto ids = (*lm)->tokenizer->Encode(text, false, false);
  EXPECT_LT(ids.size(), text.size());  // merges were learned
  EXPECT_EQ((*lm)->tokenizer->Decode(ids), text);
}

TEST(MakeModelTest, WritesLowBitTypesAndRefusesTheGridTypesByName) {
  for (const char* type : {"q3_k", "q2_k", "iq4_xs", "iq4_nl", "tq1_0", "q1_0", "mxfp4"}) {
    SCOPED_TRACE(type);
    const std::string path = TempDir() + "/lowbit.gguf";
    RunResult r = RunMatricxon("make-model --quiet --out " + path +
                               " --layers 1 --dim 256 --heads 4 --kv-heads 2 --ffn 512 --vocab 512"
                               " --type " + type);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto lm = engine::LoadedModel::Load(Env::Default(), path, {});
    ASSERT_TRUE(lm.ok()) << lm.status().ToString();
    EXPECT_EQ(DTypeLowerName((*lm)->model->layer(0).wq.type), type);
  }
  RunResult r = RunMatricxon("make-model --quiet --out " + TempDir() + "/iq2.gguf --layers 1"
                             " --dim 256 --heads 4 --kv-heads 2 --ffn 512 --vocab 512 --type iq2_xxs");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("IQ2_XXS cannot be written"), std::string::npos) << r.err;
}

TEST(MakeModelTest, SameSpecSameBytesOtherSeedOtherBytes) {
  const std::string dir = TempDir();
  const std::string args = " --quiet --layers 1 --dim 64 --heads 2 --kv-heads 1 --ffn 64 --vocab 512";
  ASSERT_EQ(RunMatricxon("make-model --out " + dir + "/a.gguf" + args).exit_code, 0);
  ASSERT_EQ(RunMatricxon("make-model --out " + dir + "/b.gguf" + args).exit_code, 0);
  ASSERT_EQ(RunMatricxon("make-model --out " + dir + "/c.gguf --seed 2" + args).exit_code, 0);
  EXPECT_EQ(ReadAll(dir + "/a.gguf"), ReadAll(dir + "/b.gguf"));
  EXPECT_NE(ReadAll(dir + "/a.gguf"), ReadAll(dir + "/c.gguf"));
}

TEST(MakeModelTest, BadShapeIsAnErrorNamingTheField) {
  RunResult r = RunMatricxon("make-model --quiet --out " + TempDir() + "/bad.gguf --dim 128 --heads 5 --kv-heads 5");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("heads"), std::string::npos) << r.err;
  r = RunMatricxon("make-model --quiet --out " + TempDir() + "/bad.gguf --type q4_z");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--type"), std::string::npos) << r.err;
  r = RunMatricxon("make-model --frobnicate 1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--frobnicate"), std::string::npos) << r.err;
}

// The qwen35 shape flags reach the file's keys and tensors; a bad one is an
// error naming it.
TEST(MakeModelTest, Qwen35ShapeFlagsSetTheFile) {
  const std::string path = TempDir() + "/q35.gguf";
  RunResult r =
      RunMatricxon("make-model --quiet --preset tiny-qwen35 --out " + path +
                   " --layers 4 --full-attention-interval 2 --linear-key-heads 1"
                   " --linear-value-heads 2 --linear-head-dim 16 --ssm-conv 3 --rope-dims 8"
                   " --rope-sections 2,1,1,0 --rope-theta 5e6 --vocab 512 --type q8_0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto f = gguf::GgufFile::Open(Env::Default(), path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto key = [&](const std::string& k) {
    Result<int64_t> v = (*f)->GetInt("qwen35." + k);
    EXPECT_TRUE(v.ok()) << k;
    return v.ok() ? *v : -1;
  };
  EXPECT_EQ(key("full_attention_interval"), 2);
  EXPECT_EQ(key("ssm.group_count"), 1);
  EXPECT_EQ(key("ssm.time_step_rank"), 2);
  EXPECT_EQ(key("ssm.state_size"), 16);
  EXPECT_EQ(key("ssm.inner_size"), 32);
  EXPECT_EQ(key("ssm.conv_kernel"), 3);
  EXPECT_EQ(key("rope.dimension_count"), 8);
  Result<std::vector<int64_t>> sections = (*f)->GetIntArray("qwen35.rope.dimension_sections");
  ASSERT_TRUE(sections.ok());
  EXPECT_EQ(*sections, (std::vector<int64_t>{2, 1, 1, 0}));
  Result<double> theta = (*f)->GetFloat("qwen35.rope.freq_base");
  ASSERT_TRUE(theta.ok());
  EXPECT_EQ(*theta, 5e6);
  const gguf::TensorInfo* conv = (*f)->FindTensor("blk.0.ssm_conv1d.weight");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->shape, (std::vector<int64_t>{3, 64}));  // q 16 | k 16 | v 2 x 16
  EXPECT_NE((*f)->FindTensor("blk.1.attn_q.weight"), nullptr);
  EXPECT_EQ((*f)->FindTensor("blk.1.attn_q.weight")->type, DType::kQ8_0);

  // --rope-dims alone deals the preset's sections anew over the new count.
  r = RunMatricxon("make-model --quiet --preset tiny-qwen35 --vocab 512 --rope-dims 32 --out " +
                   path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  f = gguf::GgufFile::Open(Env::Default(), path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  sections = (*f)->GetIntArray("qwen35.rope.dimension_sections");
  ASSERT_TRUE(sections.ok());
  EXPECT_EQ(*sections, (std::vector<int64_t>{6, 5, 5, 0}));

  r = RunMatricxon("make-model --quiet --preset tiny-qwen35 --out " + TempDir() +
                   "/bad.gguf --linear-value-heads 3");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("linear-value-heads"), std::string::npos) << r.err;
  r = RunMatricxon("make-model --quiet --preset tiny-qwen35 --out " + TempDir() +
                   "/bad.gguf --rope-sections 3,3,2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--rope-sections"), std::string::npos) << r.err;
}

// --with-projector writes NAME.mmproj.gguf beside NAME.gguf, projecting to the
// LM's width and named after it; --projector picks the path and
// --projector-type the matrices' type.
TEST(MakeModelTest, ProjectorIsWrittenBesideTheModel) {
  const std::string dir = TempDir();
  RunResult r =
      RunMatricxon("make-model --quiet --preset tiny-qwen35 --vocab 512 --dim 256 --out " + dir +
                   "/q35.gguf --with-projector");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto f = gguf::GgufFile::Open(Env::Default(), dir + "/q35.mmproj.gguf");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  Result<std::string> type = (*f)->GetString("general.type");
  Result<std::string> name = (*f)->GetString("general.name");
  Result<int64_t> projection = (*f)->GetInt("clip.vision.projection_dim");
  ASSERT_TRUE(type.ok() && name.ok() && projection.ok());
  EXPECT_EQ(*type, "mmproj");
  EXPECT_EQ(*name, "tiny-qwen35-mmproj");
  EXPECT_EQ(*projection, 256);
  EXPECT_EQ((*f)->FindTensor("mm.2.weight")->shape, (std::vector<int64_t>{256, 256}));
  EXPECT_EQ((*f)->FindTensor("mm.2.weight")->type, DType::kF32);

  r = RunMatricxon("make-model --quiet --preset tiny-qwen35 --vocab 512 --out " + dir +
                   "/m.gguf --projector " + dir + "/mmproj-m.gguf --projector-type f16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  f = gguf::GgufFile::Open(Env::Default(), dir + "/mmproj-m.gguf");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->FindTensor("mm.0.weight")->type, DType::kF16);
  EXPECT_FALSE(Env::Default()->FileExists(dir + "/m.mmproj.gguf"));
}

// A projector that cannot be written fails before the model is written.
TEST(MakeModelTest, BadProjectorIsAnErrorBeforeAnyFile) {
  const std::string dir = TempDir();
  RunResult r =
      RunMatricxon("make-model --quiet --preset tiny --out " + dir + "/a.gguf --with-projector");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("projector"), std::string::npos) << r.err;
  r = RunMatricxon("make-model --quiet --preset tiny-qwen35 --out " + dir +
                   "/a.gguf --with-projector --projector-type q8_0");  // FFN rows of 176
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("Q8_0"), std::string::npos) << r.err;
  r = RunMatricxon("make-model --quiet --preset tiny-qwen35 --out " + dir +
                   "/a.gguf --projector-type f16");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--projector-type"), std::string::npos) << r.err;
  EXPECT_FALSE(Env::Default()->FileExists(dir + "/a.gguf"));
}

// The reply `matricxon chat` streams for one message, computed in-process.
std::string ExpectedGreedyReply(const std::string& model_path, const std::string& message, int max_tokens) {
  auto lm = engine::LoadedModel::Load(Env::Default(), model_path, {});
  EXPECT_TRUE(lm.ok());
  auto runner = models::Runner::Create(*(*lm)->model, {.n_threads = 1, .kv_type = DType::kF16, .n_ctx = 0});
  EXPECT_TRUE(runner.ok());
  auto seq = (*runner)->NewSequence();
  auto prompt = (*lm)->EncodeChat({{"user", message, std::nullopt}}, {});
  EXPECT_TRUE(prompt.ok());
  std::vector<models::BatchEntry> batch;
  for (size_t i = 0; i < prompt->size(); ++i) batch.push_back({seq.get(), (*prompt)[i], i + 1 == prompt->size()});
  std::vector<float> logits;
  EXPECT_TRUE((*runner)->Forward(batch, &logits).ok());
  engine::SamplingParams sp;
  sp.temperature = 0;
  engine::Sampler sampler(sp);
  std::vector<int32_t> history = *prompt;
  tokenizer::Utf8StreamDecoder decoder;
  std::string reply;
  for (int i = 0; i < max_tokens; ++i) {
    int32_t tok = sampler.Sample(logits, history);
    if ((*lm)->tokenizer->IsEog(tok)) break;
    reply += decoder.Push((*lm)->tokenizer->TokenToPiece(tok));
    models::BatchEntry e{seq.get(), tok, true};
    EXPECT_TRUE((*runner)->Forward({&e, 1}, &logits).ok());
    history.push_back(tok);
  }
  return reply + decoder.Flush();
}

TEST(BenchEngineTest, ReportsPromptAndGenerationAtADepth) {
  const std::string path = TempDir() + "/tiny.gguf";
  ASSERT_EQ(RunMatricxon("make-model --quiet --preset tiny --out " + path).exit_code, 0);
  RunResult r = RunMatricxon("bench engine --quiet --model " + path +
                             " --threads 2 --prompt 24 --gen 4 --depth 40 --reps 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("pp24 @ d40"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tg4 @ d40"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("peak RSS"), std::string::npos) << r.out;
  // Without a depth the labels are plain.
  r = RunMatricxon("bench engine --quiet --model " + path + " --prompt 8 --gen 0 --reps 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("pp8 "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("tg"), std::string::npos) << r.out;
}

TEST(BenchEngineTest, CopiedDepthAndKvTypeAndTheirErrors) {
  const std::string path = TempDir() + "/tiny-depth.gguf";
  ASSERT_EQ(RunMatricxon("make-model --quiet --preset tiny --out " + path).exit_code, 0);
  RunResult r = RunMatricxon("bench engine --quiet --model " + path +
                             " --prompt 8 --gen 2 --depth 700 --depth-fill copy --kv-type f32 "
                             "--reps 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("tg2 @ d700"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("f32 KV"), std::string::npos) << r.out;
  r = RunMatricxon("bench engine --quiet --model " + path + " --kv-type q5_0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--kv-type 'q5_0'"), std::string::npos) << r.err;
  r = RunMatricxon("bench engine --quiet --model " + path + " --depth 8 --depth-fill fast");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--depth-fill 'fast'"), std::string::npos) << r.err;
}

TEST(ChatTest, StreamsTheGreedyReplyOfARefModel) {
  const std::string model = std::string(MATRICXON_REF_DIR) + "/models/tiny-qwen3.gguf";
  RunResult r = RunMatricxon("chat --model " + model + " --temperature 0 --max-tokens 24 --threads 2", "Hello, who are you?\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string want = ExpectedGreedyReply(model, "Hello, who are you?", 24);
  EXPECT_FALSE(want.empty());
  EXPECT_EQ(r.out, want + "\n");
  EXPECT_NE(r.err.find("template chatml"), std::string::npos) << r.err;
}

TEST(ChatTest, SecondTurnReusesTheFirstTurnsTokens) {
  const std::string path = TempDir() + "/chat.gguf";
  ASSERT_EQ(RunMatricxon("make-model --quiet --out " + path).exit_code, 0);
  RunResult r = RunMatricxon("chat --model " + path + " --temperature 0 --max-tokens 8 --stats", "Hi there\nAnd again\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Turn 1 reads everything; turn 2 keeps the whole first turn (prompt + reply).
  EXPECT_NE(r.err.find(", 0 reused"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[turn 1: prompt"), std::string::npos) << r.err;
  size_t second = r.err.find("[turn 2: prompt");
  ASSERT_NE(second, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(", 0 reused", second), std::string::npos) << r.err;
}

// A folder with one saved cache (and its generated key); returns its name.
std::string FolderWithOneSavedCache(const std::string& dir) {
  auto key = cache::KeyStore::Open(Env::Default(), dir, {});
  EXPECT_TRUE(key.ok()) << key.status().ToString();
  auto store = cache::DiskStore::Open(Env::Default(), dir, *key, {});
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  cache::SaveMeta meta;
  meta.model = {"gguf-test:a", 1};
  auto saved = (*store)->Save(meta, std::vector<int32_t>{1, 2, 3}, "payload");
  EXPECT_TRUE(saved.ok()) << saved.status().ToString();
  return cache::CacheFileName(saved->id);
}

TEST(CacheCommandTest, LsAndPurgeSkipAFifoAndASymlinkNamedLikeSavedCaches) {
  namespace fs = std::filesystem;
  const std::string dir = TempDir() + "/cache";
  fs::remove_all(dir);
  const std::string saved = FolderWithOneSavedCache(dir);
  testing_support::FifoTrap fifo(dir + "/" + cache::CacheFileName(std::string(32, '0')));
  ASSERT_TRUE(fifo.ok());
  const std::string link = dir + "/" + cache::CacheFileName(std::string(32, 'f'));
  fs::create_symlink(dir + "/" + saved, link);
  std::ofstream(dir + "/notes.mxpc") << "mine";

  RunResult ls = RunMatricxon("cache ls --dir " + dir + " --models-dir " + dir + "/no-models");
  EXPECT_FALSE(fifo.hung()) << "cache ls opened the FIFO";
  EXPECT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_NE(ls.out.find(std::string(32, '0') + ".mxpc  is a FIFO"), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find(std::string(32, 'f') + ".mxpc  is a symbolic link"), std::string::npos)
      << ls.out;
  EXPECT_NE(ls.out.find("1 saved caches"), std::string::npos) << ls.out;
  EXPECT_EQ(ls.out.find("FAILS ITS CHECK"), std::string::npos) << ls.out;

  RunResult purge = RunMatricxon("cache purge --dir " + dir);
  EXPECT_FALSE(fifo.hung());
  EXPECT_EQ(purge.exit_code, 0) << purge.err;
  EXPECT_NE(purge.out.find("deleted 1 saved caches"), std::string::npos) << purge.out;
  EXPECT_FALSE(fs::exists(dir + "/" + saved));
  EXPECT_TRUE(fs::is_fifo(fifo.path()));
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_TRUE(fs::exists(dir + "/notes.mxpc"));
  EXPECT_TRUE(fs::exists(dir + "/" + cache::kKeyFileName));
}

TEST(ChatTest, MissingModelIsAClearError) {
  RunResult r = RunMatricxon("chat --model /nonexistent/model.gguf", "hi\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/nonexistent/model.gguf"), std::string::npos) << r.err;
  r = RunMatricxon("chat --model " + std::string(MATRICXON_REF_DIR) + "/prompts.json", "hi\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("prompts.json"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace mx::cli
