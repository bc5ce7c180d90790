// Test support: the qwen35 vision reference (../shared/ref/README.md
// "qwen35 vision"): llama.cpp's prompt layouts, row positions, image
// embeddings, logits and greedy tokens for tiny-qwen35 with pictures.
// Test-only.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace mx::testing {

struct RefVisionRun {
  std::string name;       // "image-a", ..., "no-image"
  std::string image;      // "a", "b", "c" or "" (no picture)
  std::string text;       // the rendered prompt, with the media marker
  std::string user_text;  // the user message, with the marker "<__media__>"
  std::string system_text;
  // Every row of the prompt: its token (-1 for image rows) and its
  // position (t, h, w, e).
  std::vector<int32_t> tokens;
  std::vector<std::array<int64_t, 4>> pos_thwe;
  // The image chunk (when image != ""): its first row and merged grid.
  int64_t image_first_row = 0, nx = 0, ny = 0, n_pos = 0;
  std::string embeddings_file;      // [nx * ny][n_embd] float32, absolute path
  int64_t n_past_after_prompt = 0;  // the position generation continues at
  std::string logits_file;          // [n_rows][n_vocab], absolute path
  std::vector<int32_t> greedy;
  std::vector<float> greedy_margins;
};

struct RefVisionImage {
  std::string png;                          // absolute path
  std::string pixels;                       // preprocessed pixels [3][h][w], absolute path
  int64_t width = 0, height = 0;            // the picture's size
  int64_t prep_width = 0, prep_height = 0;  // the ViT input's
};

std::vector<RefVisionRun> LoadVisionRuns();
RefVisionImage LoadVisionImage(const std::string& name);  // "a", "b", "c"
std::string VisionLmPath();                               // models/tiny-qwen35.gguf
std::string VisionMmprojPath();                           // models/tiny-qwen35-mmproj.gguf
// A little-endian float32 file.
std::vector<float> ReadF32File(const std::string& path);

}  // namespace mx::testing
