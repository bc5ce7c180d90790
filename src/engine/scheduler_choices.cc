// Scheduler: n > 1 choices of one request (the prompt read once, its state
// copied for each further choice) and the per-choice parts of a slot.
#include <new>

#include "core/logging.h"
#include "engine/scheduler.h"
#include "engine/scheduler_slot.h"

namespace mx::engine {

void Scheduler::ArmSlot(Slot& s, int choice) {
  s.choice = choice;
  SamplingParams sampling = s.request.sampling;
  if (choice > 0 && sampling.seed != 0) sampling.seed += static_cast<uint64_t>(choice);
  s.sampler = std::make_unique<Sampler>(sampling);
  s.text = std::make_unique<TextStream>(s.request.stop);
  s.constraint = s.request.constraint ? s.request.constraint->Clone() : nullptr;
}

void Scheduler::ForkChoices(Slot& s, std::vector<std::unique_ptr<Slot>>* out) {
  const int n = s.forks;
  s.forks = 0;
  const size_t first = out->size();
  const uint64_t t0 = env_->NowMicros();
  const auto held =
      std::span<const int32_t>(s.history.data(), static_cast<size_t>(s.seq->n_tokens()));
  // The request's charge (Scheduler::ChoicesStateBytes) is shared by its
  // choices, each giving its part back when it ends.
  const uint64_t share = s.charged_bytes / static_cast<uint64_t>(n + 1);
  for (int c = 1; c <= n; ++c) {
    auto f = std::make_unique<Slot>();
    f->charged_bytes = share;
    s.charged_bytes -= share;
    f->request = s.request;
    f->stream = s.stream;
    f->cached = s.cached;
    f->n_read = s.n_read;
    f->history = s.history;
    f->timings = s.timings;  // the prompt was read once, for every choice
    ArmSlot(*f, c);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++active_count_;  // Finish counts each slot out once
    }
    Result<CacheTicket> ticket =
        Status::ResourceExhausted("out of memory while copying the prompt's state");
    try {
      ticket = cache_->Fork(s.ticket, held, s.request.tenant);
    } catch (const std::bad_alloc&) {
    }
    if (!ticket.ok()) {
      MX_LOG(kError) << "model " << options_.model_name << ": choice " << c << ": "
                     << ticket.status().ToString();
      Finish(*f, "error", ticket.status().WithContext("choice " + std::to_string(c)));
      continue;
    }
    f->ticket = std::move(ticket).value();
    f->seq = &f->ticket.state();
    out->push_back(std::move(f));
  }
  const double ms = static_cast<double>(env_->NowMicros() - t0) / 1000.0;
  for (size_t k = first; k < out->size(); ++k) (*out)[k]->timings.cache_ms += ms;
  MX_LOG(kInfo) << "model " << options_.model_name << ": " << n << " further choice"
                << (n == 1 ? "" : "s") << " copied from the prompt's state (" << held.size()
                << " tokens) in " << ms << " ms";
}

}  // namespace mx::engine
