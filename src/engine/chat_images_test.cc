// Chats with pictures become llama.cpp's prompt rows (chat_images.cc): the
// reference prompt of ../shared/ref "qwen35 vision", several pictures,
// marker text typed by a user, control text next to a picture, and
// templates that do not print every picture.
#include <gtest/gtest.h>

#include "engine/loaded_model.h"
#include "ref_vision.h"
#include "templates/jinja/json.h"

namespace mx::engine {
namespace {

using jinja::Value;

class ChatImagesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto lm = LoadedModel::Load(Env::Default(), mx::testing::VisionLmPath(), {});
    ASSERT_TRUE(lm.ok()) << lm.status().ToString();
    model_ = std::move(lm).value().release();
  }
  static void TearDownTestSuite() { delete model_; }

  static ChatPrompt Chat(const std::string& messages_json) {
    auto v = jinja::ParseJson(messages_json);
    EXPECT_TRUE(v.ok()) << messages_json;
    ChatPrompt p;
    p.messages = *v;
    return p;
  }
  static PromptImage Picture(int64_t nx, int64_t ny, uint64_t hash) {
    PromptImage im;
    im.nx = nx, im.ny = ny, im.pixel_hash = hash;
    im.encode = [](ThreadPool*) -> Result<std::vector<float>> { return std::vector<float>(); };
    return im;
  }
  static std::vector<int32_t> Text(const std::string& s) {
    return model_->tokenizer->Encode(s, /*add_special=*/false, /*parse_special=*/false);
  }

  static LoadedModel* model_;
};
LoadedModel* ChatImagesTest::model_ = nullptr;

// The system message and a user message of three parts (text, picture,
// text) give exactly llama.cpp's rows: 34 text tokens (the begin marker's
// included), the 5x3 picture, the end marker and the rest.
TEST_F(ChatImagesTest, TheReferencePromptGivesLlamaCppsRows) {
  const auto runs = mx::testing::LoadVisionRuns();
  ASSERT_FALSE(runs.empty());
  const mx::testing::RefVisionRun& run = runs[0];
  ChatPrompt p = Chat(R"([{"role":"system","content":"You are a helpful assistant."},
    {"role":"user","content":[{"type":"text","text":"Describe this picture:\n"},
      {"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},
      {"type":"text","text":"\nWhat is in the middle?"}]}])");
  ASSERT_EQ(LoadedModel::ImageParts(p.messages).size(), 1u);
  auto enc = model_->EncodeChatWithImages(p, {Picture(run.nx, run.ny, 42)}, ImageCacheMode::kHash);
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  ASSERT_EQ(enc->tokens.size(), run.tokens.size());
  ASSERT_EQ(enc->images.size(), 1u);
  EXPECT_EQ(enc->images[0].first_row, run.image_first_row);
  for (size_t r = 0; r < run.tokens.size(); ++r) {
    if (run.tokens[r] < 0) {
      const auto i = static_cast<int64_t>(r) - run.image_first_row;
      EXPECT_EQ(enc->tokens[r], ImageRowToken(ImageCacheMode::kHash, 42, run.nx, run.ny, i));
    } else {
      EXPECT_EQ(enc->tokens[r], run.tokens[r]) << "row " << r;
    }
  }
  EXPECT_TRUE(ValidatePromptImages(enc->tokens, enc->images, model_->tokenizer->n_vocab()).ok());
  // In the fresh mode the rows are the placeholder.
  auto fresh =
      model_->EncodeChatWithImages(p, {Picture(run.nx, run.ny, 42)}, ImageCacheMode::kFresh);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->tokens[static_cast<size_t>(run.image_first_row)], kImagePlaceholderToken);
}

TEST_F(ChatImagesTest, PicturesInSeveralMessagesKeepTheirOrder) {
  ChatPrompt p = Chat(R"([{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}},
      {"type":"text","text":"and"},{"type":"input_image","image_url":"y"}]},
    {"role":"assistant","content":"two"},
    {"role":"user","content":[{"type":"text","text":"now"},{"type":"image","image":"z"}]}])");
  auto enc = model_->EncodeChatWithImages(p, {Picture(2, 1, 1), Picture(1, 3, 2), Picture(2, 2, 3)},
                                          ImageCacheMode::kHash);
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  ASSERT_EQ(enc->images.size(), 3u);
  EXPECT_LT(enc->images[0].end_row(), enc->images[1].first_row);
  EXPECT_LT(enc->images[1].end_row(), enc->images[2].first_row);
  EXPECT_EQ(enc->images[2].n_rows(), 4);
  EXPECT_TRUE(ValidatePromptImages(enc->tokens, enc->images, model_->tokenizer->n_vocab()).ok());
  // "and" sits between the first picture's end marker and the second's
  // begin marker, tokenized on its own.
  const std::vector<int32_t> end = Text("<|vision_end|>"), begin = Text("<|vision_start|>");
  const std::vector<int32_t> and_ = Text("and");
  std::vector<int32_t> between(enc->tokens.begin() + enc->images[0].end_row(),
                               enc->tokens.begin() + enc->images[1].first_row);
  std::vector<int32_t> want = end;
  want.insert(want.end(), and_.begin(), and_.end());
  want.insert(want.end(), begin.begin(), begin.end());
  EXPECT_EQ(between, want);
}

TEST_F(ChatImagesTest, MarkerAndControlTextTypedByAUserStayText) {
  ChatPrompt p =
      Chat(R"([{"role":"user","content":[{"type":"text","text":"<__mx_media__> <|im_end|>"},
      {"type":"image_url","image_url":{"url":"x"}}]}])");
  auto enc = model_->EncodeChatWithImages(p, {Picture(1, 1, 9)}, ImageCacheMode::kHash);
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  ASSERT_EQ(enc->images.size(), 1u);
  const int32_t im_end = model_->tokenizer->Encode("<|im_end|>", false, true).at(0);
  // The only <|im_end|> tokens are the template's (after the user turn),
  // none from the user's text.
  const auto n_im_end =
      std::count(enc->tokens.begin(), enc->tokens.begin() + enc->images[0].first_row, im_end);
  EXPECT_EQ(n_im_end, 0);
}

TEST_F(ChatImagesTest, CountsThatDisagreeAreErrors) {
  ChatPrompt p =
      Chat(R"([{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}])");
  auto two =
      model_->EncodeChatWithImages(p, {Picture(1, 1, 1), Picture(1, 1, 2)}, ImageCacheMode::kHash);
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("hold 1 pictures, 2 were given"), std::string::npos);
  // A template that prints only the first message's first part's text.
  auto t =
      jinja::Template::Parse("{{ messages[0].content[0].text }}{{ messages[0].content[1].text }}");
  ASSERT_TRUE(t.ok());
  auto own = LoadedModel::Load(Env::Default(), mx::testing::VisionLmPath(), {});
  ASSERT_TRUE(own.ok());
  LoadedModel* m = own->get();
  m->chat_template = std::move(t).value();
  m->template_takes_content_parts = true;
  ChatPrompt once = Chat(R"([{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}},
      {"type":"image_url","image_url":{"url":"y"}}, {"type":"image_url","image_url":{"url":"z"}}]}])");
  auto printed = m->EncodeChatWithImages(once, {Picture(1, 1, 1), Picture(1, 1, 2), Picture(1, 1, 3)},
                                         ImageCacheMode::kHash);
  ASSERT_FALSE(printed.ok());
  EXPECT_NE(printed.status().message().find("printed 2 of the 3 pictures"), std::string::npos)
      << printed.status().ToString();
}

}  // namespace
}  // namespace mx::engine
