// ImageEncoder: encodes a model's pictures (PromptImage::encode, the vision
// tower) on a thread of its own, with threads of its own, so that the model's
// compute loop goes on with every other request while a picture is encoded
// (a large picture takes seconds); the request whose picture it is waits,
// outside the batches, until its embeddings are ready. One picture at a time,
// in the order asked.
//
// Thread-safety: Submit and the jobs' ready()/Take() from any thread; the
// destructor waits for the picture being encoded, drops the rest.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "engine/prompt_images.h"

namespace mx::engine {

// One picture's encoding: asked for, then ready with its result.
class EncodeJob {
 public:
  bool ready() const { return ready_.load(std::memory_order_acquire); }
  // The embeddings, or why there are none; how long the encoder took.
  // REQUIRES: ready(); called once.
  Result<std::vector<float>> Take() { return std::move(result_); }
  uint64_t encode_us() const { return encode_us_; }

 private:
  friend class ImageEncoder;
  explicit EncodeJob(PromptImage image) : image_(std::move(image)) {}
  PromptImage image_;
  Result<std::vector<float>> result_ = Status::Internal("not encoded");
  uint64_t encode_us_ = 0;
  std::atomic<bool> ready_{false};
};

class ImageEncoder {
 public:
  // `n_threads` for the vision tower; `now` gives the clock (Env::NowMicros).
  ImageEncoder(int n_threads, std::function<uint64_t()> now);
  ~ImageEncoder();
  ImageEncoder(const ImageEncoder&) = delete;
  ImageEncoder& operator=(const ImageEncoder&) = delete;

  // Queues `image` (a copy: its encode closure holds what it needs).
  std::shared_ptr<EncodeJob> Submit(const PromptImage& image);

 private:
  void Loop();

  std::function<uint64_t()> now_;
  ThreadPool pool_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<EncodeJob>> queue_;  // guarded by mu_
  bool stop_ = false;                             // guarded by mu_
  std::thread thread_;
};

}  // namespace mx::engine
