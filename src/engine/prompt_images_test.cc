// Picture rows in a prompt: their tokens, positions and validation
// (prompt_images.h).
#include "engine/prompt_images.h"

#include <gtest/gtest.h>

#include <set>

namespace mx::engine {
namespace {

PromptImage Image(int64_t first_row, int64_t nx, int64_t ny, uint64_t hash = 1) {
  PromptImage im;
  im.first_row = first_row, im.nx = nx, im.ny = ny, im.pixel_hash = hash;
  im.encode = [](ThreadPool*) -> Result<std::vector<float>> { return std::vector<float>(); };
  return im;
}

// The reference layout of picture A (README "qwen35 vision", runs): 34 text
// rows, 5x3 image rows at t 34, h 34-36, w 34-38, then text from 39.
TEST(PromptImagesTest, PositionsFollowTheReferenceLayout) {
  const std::vector<PromptImage> images = {Image(34, 5, 3)};
  EXPECT_EQ(RowPosition(images, 0), kernels::RopePos::Text(0));
  EXPECT_EQ(RowPosition(images, 33), kernels::RopePos::Text(33));
  EXPECT_EQ(RowPosition(images, 34), (kernels::RopePos{34, 34, 34, 0}));
  EXPECT_EQ(RowPosition(images, 38), (kernels::RopePos{34, 34, 38, 0}));
  EXPECT_EQ(RowPosition(images, 39), (kernels::RopePos{34, 35, 34, 0}));
  EXPECT_EQ(RowPosition(images, 48), (kernels::RopePos{34, 36, 38, 0}));
  EXPECT_EQ(RowPosition(images, 49), kernels::RopePos::Text(39));  // p0 + max(5, 3)
  EXPECT_EQ(RowPosition(images, 72), kernels::RopePos::Text(62));
  EXPECT_EQ(RowPosition(images, 73), kernels::RopePos::Text(63));  // the first reply token
}

TEST(PromptImagesTest, TwoPicturesEachFallBehind) {
  // 2 text rows, a 2x4 picture (8 rows, 4 positions), 1 text row, a 3x1
  // picture (3 rows, 3 positions), text.
  const std::vector<PromptImage> images = {Image(2, 2, 4), Image(11, 3, 1)};
  EXPECT_EQ(RowPosition(images, 9), (kernels::RopePos{2, 5, 3, 0}));
  EXPECT_EQ(RowPosition(images, 10), kernels::RopePos::Text(6));
  EXPECT_EQ(RowPosition(images, 11), (kernels::RopePos{7, 7, 7, 0}));
  EXPECT_EQ(RowPosition(images, 13), (kernels::RopePos{7, 7, 9, 0}));
  EXPECT_EQ(RowPosition(images, 14), kernels::RopePos::Text(10));
  EXPECT_EQ(ImageAtRow(images, 1), -1);
  EXPECT_EQ(ImageAtRow(images, 2), 0);
  EXPECT_EQ(ImageAtRow(images, 9), 0);
  EXPECT_EQ(ImageAtRow(images, 10), -1);
  EXPECT_EQ(ImageAtRow(images, 13), 1);
  EXPECT_EQ(ImageAtRow(images, 14), -1);
}

TEST(PromptImagesTest, HashTokensTellPicturesApartFromTheFirstRow) {
  std::set<int32_t> seen;
  for (int64_t i = 0; i < 15; ++i) {
    const int32_t t = ImageRowToken(ImageCacheMode::kHash, 0x1234, 5, 3, i);
    EXPECT_TRUE(IsImageRowToken(t));
    EXPECT_NE(t, kImagePlaceholderToken);
    EXPECT_EQ(t, ImageRowToken(ImageCacheMode::kHash, 0x1234, 5, 3, i));  // deterministic
    seen.insert(t);
  }
  EXPECT_EQ(seen.size(), 15u);
  EXPECT_NE(ImageRowToken(ImageCacheMode::kHash, 0x1235, 5, 3, 0),
            ImageRowToken(ImageCacheMode::kHash, 0x1234, 5, 3, 0));
  EXPECT_NE(ImageRowToken(ImageCacheMode::kHash, 0x1234, 3, 5, 0),
            ImageRowToken(ImageCacheMode::kHash, 0x1234, 5, 3, 0));
  EXPECT_EQ(ImageRowToken(ImageCacheMode::kFresh, 0x1234, 5, 3, 0), kImagePlaceholderToken);
  EXPECT_EQ(ImageRowToken(ImageCacheMode::kFresh, 0x9999, 5, 3, 7), kImagePlaceholderToken);
}

Status Check(std::vector<int32_t> prompt, std::vector<PromptImage> images) {
  return ValidatePromptImages(prompt, images, 10);
}

TEST(PromptImagesTest, ValidationNamesTheProblem) {
  std::vector<int32_t> prompt = {1, 2, -5, -6, 3};
  EXPECT_TRUE(Check(prompt, {Image(2, 2, 1)}).ok());
  EXPECT_NE(Check(prompt, {}).message().find("token id -5"), std::string::npos);
  EXPECT_NE(Check(prompt, {Image(1, 2, 1)}).message().find("row 1 holds a text token"),
            std::string::npos);
  EXPECT_NE(Check(prompt, {Image(4, 2, 1)}).message().find("leave the 5-row prompt"),
            std::string::npos);
  EXPECT_NE(Check(prompt, {Image(2, 1, 1)}).message().find("token id -6"), std::string::npos);
  EXPECT_NE(Check(prompt, {Image(2, 0, 1)}).message().find("empty grid"), std::string::npos);
  PromptImage no_encoder = Image(2, 2, 1);
  no_encoder.encode = nullptr;
  EXPECT_NE(Check(prompt, {no_encoder}).message().find("no encoder"), std::string::npos);
  EXPECT_NE(Check({1, 2, 11}, {}).message().find("token id 11"), std::string::npos);
  EXPECT_TRUE(ParseImageCacheMode("hash").ok());
  EXPECT_FALSE(ParseImageCacheMode("sometimes").ok());
}

}  // namespace
}  // namespace mx::engine
