// Scheduler: the compute loop of one loaded model, with continuous batching.
//
// One thread owns the model's Runner. Each step builds ONE Runner::Forward
// batch holding the next token of every sequence that is generating, plus a
// chunk (up to `prompt_chunk` tokens in total) of the prompts still being
// read. Up to `n_parallel` sequences run at once; more requests wait in a
// FIFO queue. A request ends at EOG, a stop string, max_tokens, a full
// context, or cancellation (GenStream::Cancel, e.g. the client went away);
// its slot is freed at once for the next request.
//
// A request starts from the state the model's prompt cache picks (the
// cached chat sharing the longest start, SPEC §2) and reads only the rest of
// its prompt; when it ends, its state goes back to the pool. States that
// leave the pool are written to disk by this same loop, one at a time, only
// while no request is active, so disk work never overlaps a reply.
//
// A request may ask for n > 1 replies to one prompt (OpenAI's `n`): the
// prompt is read once, then its state is copied for every further choice at
// the first generated token; each choice is a sequence of its own from there
// (its own sampler, seeded seed + choice when a seed is given, its own
// constraint and stop filter, its own final event).
//
//   auto stream = scheduler->Submit(std::move(request));
//   GenEvent ev;
//   while (stream->Next(&ev)) send(ev.choice, ev.text);  // false after the last final event
//
// Thread-safety: Submit, n_ctx, active and queued may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "engine/cache_events.h"
#include "engine/image_encoder.h"
#include "engine/loaded_model.h"
#include "engine/prompt_cache.h"
#include "engine/prompt_images.h"
#include "engine/sampler.h"
#include "engine/token_constraint.h"
#include "models/runner.h"

namespace mx::engine {

// For the cache's log line: when a prompt left the cached chat it came from
// inside an earlier message than the last reply (token `diverged_at`), says
// where and that an earlier message changed; "" otherwise.
std::string DivergenceNote(std::span<const int64_t> message_starts, int64_t diverged_at);

struct SchedulerOptions {
  int n_threads = 1;
  int64_t n_ctx = 0;           // 0: the model's, capped at 8192
  int n_parallel = 4;          // sequences decoded at once
  DType kv_type = DType::kF16;  // attention KV rows: F16, F32, Q8_0 or Q4_0 (models::RunnerOptions)
  std::optional<DType> k_type = std::nullopt;  // keys only, overriding kv_type
  std::optional<DType> v_type = std::nullopt;  // values only, overriding kv_type
  int64_t prompt_chunk = 256;  // prompt tokens read per step (all sequences together)
  std::string model_name;      // for log lines
  // The RAM pool of cached conversations and, through cache.saved, the
  // server's saved caches: states leaving the pool are queued there and
  // written by this loop only while it has no request (never during a
  // reply); unload flushes the pool.
  PromptCacheOptions cache;
  // Optional, must outlive the scheduler: each request's cache log line is
  // also pushed here (counts and the line, never prompt text).
  CacheEventLog* events = nullptr;
  // When set and true, Create gives up (ResourceExhausted "... cancelled"),
  // also in the middle of hashing the model file for the saved caches.
  // Must outlive Create.
  const std::atomic<bool>* cancel_start = nullptr;
};

// Where one request's time went, in milliseconds of Env::NowMicros (a
// steady clock) on the compute loop; filled in the final event. A step's
// forward pass is shared by every request in its batch: each request is
// charged the step's time times the share of the batch's tokens it put in
// (all of it when alone), so the figures of concurrent requests add up to
// the loop's forward time instead of counting a step once per request.
struct RequestTimings {
  double queue_ms = 0;      // Submit -> a slot (waiting behind n_parallel others)
  double cache_ms = 0;      // prompt cache work for this request: lookup, truncate or copy of a
                            // shared start, snapshot restore, saved-cache load, growing the state
                            // for the prompt, commit and evictions it caused (never a forward pass),
                            // and any wait for a refresh of the saved-cache index (docs/cluster.md)
  double prompt_ms = 0;     // share of the forward passes that read its prompt tokens
  double predicted_ms = 0;  // share of the forward passes that fed its generated tokens, plus
                            // sampling and streaming them
};

// One generated token, or the end of the reply (final = true).
struct GenEvent {
  bool has_token = false;
  int32_t token = -1;
  std::string text;  // text released with this event (may be empty: held back)
  float logprob = 0.0f;                           // of `token`, when logprobs asked
  std::vector<std::pair<int32_t, float>> top;     // top logprobs, when asked
  int choice = 0;  // which of the request's n replies this event belongs to
  bool final = false;         // the last event of this choice
  std::string finish_reason;  // final: "stop", "length" or "cancelled"
  Status status;              // final: not OK when the request failed
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t completion_tokens = 0;
  RequestTimings timings;  // final: where the request's time went
  uint64_t time_us = 0;  // when the compute loop queued it (Env::NowMicros; 0 for early errors)
};

struct GenRequest {
  std::vector<int32_t> prompt;  // REQUIRES: not empty
  SamplingParams sampling;      // REQUIRES: ValidateSamplingParams ok
  int64_t max_tokens = 256;     // >= 1
  std::vector<std::string> stop;
  int n = 1;  // replies to generate from the one prompt read (1..kMaxChoices)
  // Constrained decoding (structured output, grammars, forced tool calls):
  // every choice follows a clone of this prototype; null = unconstrained.
  std::shared_ptr<const TokenConstraint> constraint;
  bool logprobs = false;
  int top_logprobs = 0;
  bool cache_prompt = true;  // false: read the whole prompt, leave the pool untouched
  // The prompt's pictures (sorted by first_row; their rows hold image row
  // tokens, see prompt_images.h). Encoded on the compute loop, only when a
  // row of theirs has to be read.
  std::vector<PromptImage> images;
  bool has_images = false;   // never match a cached chat (pictures in the fresh mode)
  // Where each chat message begins in `prompt` (token positions, ascending;
  // empty when unknown, e.g. text completions): hybrid models keep
  // recurrent snapshots at these boundaries.
  std::vector<int64_t> message_starts;
  // Where the reply's own message begins (the generation prompt's marker);
  // 0 when unknown. Hybrid models keep a snapshot there too.
  int64_t reply_start = 0;
  bool ignore_eos = false;   // end-of-generation tokens are never sampled (benchmarks)
  // Who the request is for (SPEC §13): the tenant that owns the state it
  // leaves in the cache ("" when the server has no API keys). With
  // tenant_isolated (MATRICXON_PROMPT_CACHE_SHARING=tenant) it only ever
  // continues that tenant's cached chats, in RAM and on disk.
  std::string tenant;
  bool tenant_isolated = false;
};

// The most choices one request may ask for (each holds a copy of the state).
inline constexpr int kMaxChoices = 16;

// The most bytes of events a request's stream holds unread before the
// compute loop stops generating for it (the client reads slower than the
// model writes); it goes on once the reader has caught up. Counted as each
// event's text plus 8 bytes per top logprob plus 32.
inline constexpr size_t kStreamBacklogBytes = 64 << 10;

// The receiving end of one request. Events are queued by the compute loop and
// read by the caller; each choice's final event is its last one.
class GenStream {
 public:
  // Blocks until the next event. False once every choice's final event has
  // been read.
  bool Next(GenEvent* event);
  // Asks the compute loop to end this request at its next step (idempotent).
  void Cancel();
  bool cancelled() const;
  // Bytes of events queued and not read yet (see kStreamBacklogBytes).
  size_t backlog_bytes() const;

 private:
  friend class Scheduler;
  void Push(GenEvent event);
  // Pushes a copy of `event` for each choice in [first, last).
  void PushToChoices(int first, int last, const GenEvent& event);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<GenEvent> events_;
  size_t backlog_ = 0;  // bytes of events_ as kStreamBacklogBytes counts them
  bool cancelled_ = false;
  int open_ = 1;  // choices whose final event has not been read

};

class Scheduler {
 public:
  // Creates the Runner and starts the compute thread. `model` must outlive
  // the scheduler.
  static Result<std::unique_ptr<Scheduler>> Create(const LoadedModel& model, const SchedulerOptions& options,
                                                   Env* env);
  // Ends every request (final event with an error), stops the thread, then
  // flushes the RAM pool to the saved caches (bounded by their flush timeout).
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. Invalid requests (empty prompt, prompt not leaving room
  // for one generated token in the context, token ids out of range) get a
  // final event with InvalidArgument at once.
  std::shared_ptr<GenStream> Submit(GenRequest request);

  int64_t n_ctx() const { return runner_->n_ctx(); }
  // Requests decoding or reading now / waiting for a slot.
  int active() const;
  int queued() const;
  // The model's RAM pool (stats and counters are thread-safe).
  const PromptCache& prompt_cache() const { return *cache_; }
  // Forgets `tenant`'s cached chats in this model's RAM pool (SPEC §13):
  // idle ones now, ones in use when their request ends. Thread-safe.
  SequencePool::Forgotten ForgetTenant(const std::string& tenant) { return cache_->ForgetTenant(tenant); }

 private:
  struct Slot;
  Scheduler(const LoadedModel& model, const SchedulerOptions& options, Env* env,
            std::unique_ptr<models::Runner> runner);
  void Loop();
  // Picks the slot's starting state from the prompt cache and logs what the
  // cache did (SPEC §8).
  Status StartSlot(Slot& s);
  // Handles the logits for slot `s` (its next token): samples, streams, ends.
  void OnLogits(Slot& s, std::span<const float> logits);
  // n > 1: the slot has just read its whole prompt; adds a slot for each
  // further choice to `out`, starting from a copy of its state. A choice
  // whose copy fails ends at once with the error.
  void ForkChoices(Slot& s, std::vector<std::unique_ptr<Slot>>* out);
  // A fresh slot state for choice `choice` of `request` (sampler, stop
  // filter, constraint).
  void ArmSlot(Slot& s, int choice);
  void Finish(Slot& s, std::string reason, Status status);
  // The pictures with rows among the next `take` prompt rows: encoded
  // (kReady), being encoded on the image encoder's thread (kWaiting: asked
  // for now if not yet), or one failed (kFailed: the slot is finished).
  enum class ImagesReady { kReady, kWaiting, kFailed };
  ImagesReady EncodeImages(Slot& s, int64_t take);
  // The batch entry of the slot's next prompt row (a token, or an image's
  // embedding row), at its position.
  models::BatchEntry PromptEntry(Slot& s, bool want_logits);
  // Charges the forward pass of the step just run (`step_us`, over a batch
  // of `n_batch` entries) to the slots in proportion to their entries.
  void ChargeStep(std::vector<std::unique_ptr<Slot>>& slots, uint64_t step_us, size_t n_batch);
  // The most state memory a request's choices hold together (n > 1: n
  // states of its prompt plus max_tokens, capped at the context).
  uint64_t ChoicesStateBytes(const GenRequest& r) const;

  // A request waiting for a slot, with when it was submitted.
  struct Queued {
    GenRequest request;
    std::shared_ptr<GenStream> stream;
    uint64_t submitted_us = 0;  // Env::NowMicros
  };

  const LoadedModel& model_;
  SchedulerOptions options_;
  Env* env_;
  std::unique_ptr<models::Runner> runner_;
  std::unique_ptr<PromptCache> cache_;  // used by the compute thread only (stats: any thread)
  bool forward_failed_ = false;         // compute thread only
  uint64_t choice_bytes_ = 0;           // compute thread only: ChoicesStateBytes of running requests
  ComputeGate* gate_ = nullptr;         // the saved-cache store's, when there is one
  std::vector<float> masked_;           // compute thread only: logits without EOG (ignore_eos)
  // Pictures are encoded here, off the compute loop (made on first use;
  // compute thread only). Declared after runner_: destroyed before it.
  std::unique_ptr<ImageEncoder> encoder_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Queued> queue_;  // guarded by mu_
  int active_count_ = 0;      // guarded by mu_
  bool stop_ = false;         // guarded by mu_
  std::thread thread_;
};

}  // namespace mx::engine
