#include "engine/image_encoder.h"

#include <new>

namespace mx::engine {

ImageEncoder::ImageEncoder(int n_threads, std::function<uint64_t()> now)
    : now_(std::move(now)), pool_(n_threads), thread_([this] { Loop(); }) {}

ImageEncoder::~ImageEncoder() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::shared_ptr<EncodeJob> ImageEncoder::Submit(const PromptImage& image) {
  auto job = std::shared_ptr<EncodeJob>(new EncodeJob(image));
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(job);
  }
  cv_.notify_all();
  return job;
}

void ImageEncoder::Loop() {
  for (;;) {
    std::shared_ptr<EncodeJob> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    // Nobody waits for it any more (its request ended): skip it.
    if (job.use_count() == 1) continue;
    const uint64_t t0 = now_();
    try {
      job->result_ = job->image_.encode(&pool_);
    } catch (const std::bad_alloc&) {
      job->result_ = Status::ResourceExhausted("out of memory while encoding the picture");
    }
    job->encode_us_ = now_() - t0;
    job->ready_.store(true, std::memory_order_release);
  }
}

}  // namespace mx::engine
