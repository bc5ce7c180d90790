// The scheduler with pictures, on tiny-qwen35 and llama.cpp's image
// embeddings (../shared/ref, "qwen35 vision"): image rows are fed at their
// positions and the reply is llama.cpp's greedy text; in the fresh mode
// nothing is reused; in the hash mode the same picture reuses its chat
// without encoding it again and another picture reuses only the text before
// it, each reply equal to reading everything.
#include <gtest/gtest.h>

#include <atomic>

#include "engine/scheduler.h"
#include "ref_vision.h"

namespace mx::engine {
namespace {

using mx::testing::RefVisionRun;

class SchedulerImagesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto lm = LoadedModel::Load(Env::Default(), mx::testing::VisionLmPath(), {});
    ASSERT_TRUE(lm.ok()) << lm.status().ToString();
    model_ = std::move(lm).value().release();
    runs_ = new std::vector<RefVisionRun>(mx::testing::LoadVisionRuns());
  }
  static void TearDownTestSuite() {
    delete model_;
    delete runs_;
  }

  static std::unique_ptr<Scheduler> Make(int64_t chunk = 256) {
    auto s = Scheduler::Create(*model_,
                               {.n_threads = 2,
                                .n_ctx = 512,
                                .n_parallel = 2,
                                .kv_type = DType::kF32,
                                .prompt_chunk = chunk,
                                .model_name = "vision",
                                .cache = {}},
                               Env::Default());
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(s).value();
  }

  // The reference run `name` as a request: its rows, the picture's rows as
  // image row tokens of `mode`, its encoder counting its calls in *encodes.
  GenRequest Request(const std::string& name, ImageCacheMode mode, std::atomic<int>* encodes,
                     uint64_t hash = 0xa11ce) {
    const RefVisionRun* run = nullptr;
    for (const RefVisionRun& r : *runs_) {
      if (r.name == name) run = &r;
    }
    EXPECT_NE(run, nullptr) << name;
    GenRequest g;
    g.sampling.temperature = 0;
    g.max_tokens = 16;
    g.ignore_eos = true;
    g.prompt = run->tokens;
    if (!run->image.empty()) {
      PromptImage im;
      im.first_row = run->image_first_row, im.nx = run->nx, im.ny = run->ny, im.pixel_hash = hash;
      auto embd =
          std::make_shared<std::vector<float>>(mx::testing::ReadF32File(run->embeddings_file));
      im.encode = [embd, encodes](ThreadPool*) -> Result<std::vector<float>> {
        ++*encodes;
        return *embd;
      };
      for (int64_t i = 0; i < im.n_rows(); ++i) {
        g.prompt[static_cast<size_t>(im.first_row + i)] =
            ImageRowToken(mode, hash, im.nx, im.ny, i);
      }
      g.images.push_back(std::move(im));
      g.has_images = mode == ImageCacheMode::kFresh;
    }
    return g;
  }
  static const RefVisionRun& Run(const std::string& name) {
    for (const RefVisionRun& r : *runs_) {
      if (r.name == name) return r;
    }
    ADD_FAILURE() << name;
    return runs_->front();
  }

  struct Reply {
    std::vector<int32_t> tokens;
    GenEvent last;
  };
  static Reply Collect(GenStream& stream) {
    Reply r;
    GenEvent ev;
    while (stream.Next(&ev)) {
      if (ev.has_token) r.tokens.push_back(ev.token);
      if (ev.final) r.last = ev;
    }
    return r;
  }
  // The reference's greedy tokens up to the first step whose margin is
  // below our error, against `got`.
  static void ExpectGreedy(const RefVisionRun& run, const std::vector<int32_t>& got) {
    ASSERT_EQ(got.size(), run.greedy.size());
    for (size_t i = 0; i < run.greedy.size() && run.greedy_margins[i] >= 1e-2f; ++i) {
      EXPECT_EQ(got[i], run.greedy[i]) << run.name << " step " << i;
    }
  }

  static LoadedModel* model_;
  static std::vector<RefVisionRun>* runs_;
};
LoadedModel* SchedulerImagesTest::model_ = nullptr;
std::vector<RefVisionRun>* SchedulerImagesTest::runs_ = nullptr;

TEST_F(SchedulerImagesTest, RepliesAreLlamaCppsGreedyTokens) {
  for (int64_t chunk : {256, 7}) {
    auto s = Make(chunk);
    for (const char* name : {"image-a", "image-b", "image-c", "no-image"}) {
      std::atomic<int> encodes{0};
      Reply r = Collect(*s->Submit(Request(name, ImageCacheMode::kFresh, &encodes)));
      ASSERT_TRUE(r.last.status.ok()) << r.last.status.ToString();
      ExpectGreedy(Run(name), r.tokens);
      EXPECT_EQ(encodes.load(), Run(name).image.empty() ? 0 : 1) << name;
    }
  }
}

TEST_F(SchedulerImagesTest, FreshModeNeverReuses) {
  auto s = Make();
  std::atomic<int> encodes{0};
  Reply first = Collect(*s->Submit(Request("image-a", ImageCacheMode::kFresh, &encodes)));
  Reply again = Collect(*s->Submit(Request("image-a", ImageCacheMode::kFresh, &encodes)));
  ASSERT_TRUE(again.last.status.ok());
  EXPECT_EQ(again.last.cached_tokens, 0);
  EXPECT_EQ(encodes.load(), 2);
  EXPECT_EQ(again.tokens, first.tokens);
  EXPECT_EQ(s->prompt_cache().pool().Stats().size(), 0u);  // the pool never saw them
}

// The next turn of a chat with a picture: prompt + reply + new text. From
// the cache it reads only the new rows and never encodes the picture again;
// read from nothing it gives the same reply.
TEST_F(SchedulerImagesTest, HashModeReusesTheSamePicture) {
  std::atomic<int> encodes{0};
  auto s = Make();
  GenRequest turn1 = Request("image-a", ImageCacheMode::kHash, &encodes);
  Reply r1 = Collect(*s->Submit(turn1));
  ASSERT_TRUE(r1.last.status.ok());
  EXPECT_EQ(encodes.load(), 1);
  GenRequest turn2 = Request("image-a", ImageCacheMode::kHash, &encodes);
  turn2.prompt.insert(turn2.prompt.end(), r1.tokens.begin(), r1.tokens.end());
  const std::vector<int32_t> more = model_->tokenizer->Encode("\nAnd the corners?", false, false);
  turn2.prompt.insert(turn2.prompt.end(), more.begin(), more.end());
  Reply r2 = Collect(*s->Submit(turn2));
  ASSERT_TRUE(r2.last.status.ok());
  EXPECT_EQ(encodes.load(), 1);  // the picture's rows came from the cache
  EXPECT_GT(r2.last.cached_tokens, Run("image-a").image_first_row + 15);

  auto cold = Make();
  GenRequest again = turn2;
  again.cache_prompt = false;
  Reply r3 = Collect(*cold->Submit(again));
  ASSERT_TRUE(r3.last.status.ok());
  EXPECT_EQ(r3.last.cached_tokens, 0);
  EXPECT_EQ(encodes.load(), 2);
  EXPECT_EQ(r2.tokens, r3.tokens);
}

// Another picture in the same place (C instead of A, same size and text):
// only the text before the picture may be reused, and the reply is C's.
TEST_F(SchedulerImagesTest, HashModeNeverReusesPastAnotherPicture) {
  std::atomic<int> encodes{0};
  auto s = Make();
  ASSERT_TRUE(
      Collect(*s->Submit(Request("image-a", ImageCacheMode::kHash, &encodes))).last.status.ok());
  Reply c = Collect(*s->Submit(Request("image-c", ImageCacheMode::kHash, &encodes, 0xc0ffee)));
  ASSERT_TRUE(c.last.status.ok());
  EXPECT_LE(c.last.cached_tokens, Run("image-c").image_first_row);
  EXPECT_EQ(encodes.load(), 2);
  ExpectGreedy(Run("image-c"), c.tokens);
}

TEST_F(SchedulerImagesTest, AFailingEncoderFailsOnlyItsRequest) {
  auto s = Make();
  std::atomic<int> encodes{0};
  GenRequest bad = Request("image-a", ImageCacheMode::kFresh, &encodes);
  bad.images[0].encode = [](ThreadPool*) -> Result<std::vector<float>> {
    return Status::InvalidArgument("picture too odd");
  };
  Reply r = Collect(*s->Submit(bad));
  EXPECT_FALSE(r.last.status.ok());
  EXPECT_NE(r.last.status.message().find("picture too odd"), std::string::npos);
  GenRequest wrong = Request("image-a", ImageCacheMode::kFresh, &encodes);
  wrong.images[0].encode = [](ThreadPool*) -> Result<std::vector<float>> {
    return std::vector<float>(3);
  };
  r = Collect(*s->Submit(wrong));
  EXPECT_FALSE(r.last.status.ok());
  EXPECT_NE(r.last.status.message().find("floats for 15 rows"), std::string::npos);
  Reply ok = Collect(*s->Submit(Request("image-a", ImageCacheMode::kFresh, &encodes)));
  ASSERT_TRUE(ok.last.status.ok());
  ExpectGreedy(Run("image-a"), ok.tokens);
}

}  // namespace
}  // namespace mx::engine
