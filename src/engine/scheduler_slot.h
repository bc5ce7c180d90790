// The compute loop's view of one running sequence (Scheduler::Slot),
// shared by scheduler.cc and scheduler_choices.cc. Internal to the
// scheduler: not part of its interface.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/text_stream.h"
#include "engine/token_constraint.h"

namespace mx::engine {

struct Scheduler::Slot {
  GenRequest request;
  std::shared_ptr<GenStream> stream;
  CacheTicket ticket;                    // the state, from the prompt cache
  models::SequenceState* seq = nullptr;  // = &ticket.state() once started
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<TextStream> text;
  std::unique_ptr<TokenConstraint> constraint;  // a clone of request.constraint
  int choice = 0;                               // which of the request's n replies this slot makes
  int forks = 0;                 // choices still to copy from this one (n - 1 until forked)
  std::vector<int32_t> history;  // prompt + generated tokens
  size_t n_read = 0;             // prompt tokens the state holds
  int64_t cached = 0;
  int64_t generated = 0;
  int32_t next_token = -1;  // sampled, still to be fed (decode phase)
  bool done = false;
  std::vector<int64_t> snapshots;              // positions of the snapshots this request asked for
  std::vector<std::vector<float>> image_embd;  // per request.images; empty until encoded
  std::vector<std::shared_ptr<EncodeJob>> image_jobs;  // per request.images: being encoded
  RequestTimings timings;
  int64_t step_prompt = 0;  // entries of this step's batch: prompt tokens read
  int64_t step_decode = 0;  // ... and the generated token fed
  // Its prompt waits for a refresh of the saved-cache index (StartSlot
  // left it unstarted); when its first StartSlot began (NowMicros).
  IndexWait index_wait;
  uint64_t start_us = 0;
  // Of the scheduler's choice_bytes_, what this slot gives back when it
  // ends (requests with n > 1).
  uint64_t charged_bytes = 0;
  bool reading() const { return n_read < request.prompt.size(); }
};

}  // namespace mx::engine
