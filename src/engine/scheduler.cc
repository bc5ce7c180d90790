#include "engine/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <new>

#include "core/logging.h"
#include "engine/scheduler_slot.h"
#include "engine/text_stream.h"

namespace mx::engine {

// ---- GenStream ----

namespace {

size_t EventBytes(const GenEvent& e) { return e.text.size() + e.top.size() * 8 + 32; }

}  // namespace

bool GenStream::Next(GenEvent* event) {
  std::unique_lock<std::mutex> lock(mu_);
  if (open_ == 0) return false;
  cv_.wait(lock, [&] { return !events_.empty(); });
  *event = std::move(events_.front());
  events_.pop_front();
  backlog_ -= EventBytes(*event);
  if (event->final) --open_;
  return true;
}

size_t GenStream::backlog_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return backlog_;
}

void GenStream::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
}

bool GenStream::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

void GenStream::PushToChoices(int first, int last, const GenEvent& event) {
  for (int c = first; c < last; ++c) {
    GenEvent e = event;
    e.choice = c;
    Push(std::move(e));
  }
}

void GenStream::Push(GenEvent event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    backlog_ += EventBytes(event);
    events_.push_back(std::move(event));
  }
  cv_.notify_all();
}

// ---- Scheduler ----

uint64_t Scheduler::ChoicesStateBytes(const GenRequest& r) const {
  const models::StateLayout& l = *runner_->layout();
  const int64_t tokens = std::min<int64_t>(static_cast<int64_t>(r.prompt.size()) + r.max_tokens, l.n_ctx);
  return static_cast<uint64_t>(r.n) *
         (static_cast<uint64_t>(tokens) * l.kv_bytes_per_token() + l.recurrent_bytes());
}


std::string DivergenceNote(std::span<const int64_t> message_starts, int64_t diverged_at) {
  // A chat that goes on leaves its cached self in its last reply (message
  // n-2 of n: the reply, then the new message). Leaving it earlier means an
  // earlier message changed: the client edited it, or the chat template
  // rewrites past turns (dropped reasoning, dates, tool results).
  if (diverged_at <= 0 || message_starts.size() < 3) return "";
  const auto k = static_cast<size_t>(
      std::upper_bound(message_starts.begin(), message_starts.end(), diverged_at) -
      message_starts.begin());  // 1-based message holding the divergence
  if (k == 0 || k + 2 > message_starts.size()) return "";
  return "; the prompt left the cached chat at token " + std::to_string(diverged_at) +
         ", inside message " + std::to_string(k) + " of " + std::to_string(message_starts.size()) +
         " (an earlier message changed: edited by the client, or rewritten by the chat template)";
}

Result<std::unique_ptr<Scheduler>> Scheduler::Create(const LoadedModel& model, const SchedulerOptions& options,
                                                      Env* env) {
  if (options.n_parallel < 1) return Status::InvalidArgument("scheduler: n_parallel must be >= 1");
  MX_ASSIGN_OR_RETURN(auto runner,
                      models::Runner::Create(*model.model, {.n_threads = options.n_threads,
                                                            .kv_type = options.kv_type,
                                                            .n_ctx = options.n_ctx,
                                                            .k_type = options.k_type,
                                                            .v_type = options.v_type}));
  std::unique_ptr<Scheduler> scheduler(new Scheduler(model, options, env, std::move(runner)));
  if (options.cancel_start != nullptr && options.cancel_start->load()) {
    return Status::ResourceExhausted("starting model " + options.model_name +
                                     " was cancelled (the server is stopping)");
  }
  return scheduler;
}

Scheduler::Scheduler(const LoadedModel& model, const SchedulerOptions& options, Env* env,
                     std::unique_ptr<models::Runner> runner)
    : model_(model), options_(options), env_(env), runner_(std::move(runner)) {
  if (options_.prompt_chunk < 1) options_.prompt_chunk = 256;
  DiskLevel disk;
  if (options_.cache.saved != nullptr) {
    const uint64_t t0 = env_->NowMicros();
    disk.store = options_.cache.saved;
    disk.binding =
        ComputeModelBinding(*model.model, *runner_->layout(), &runner_->pool(), options_.cancel_start);
    disk.io_pool = &runner_->pool();
    // A refresh of the saved-cache index that a slot waits for has ended.
    disk.wake = [this] {
      std::lock_guard<std::mutex> lock(mu_);
      cv_.notify_all();
    };
    MX_LOG(kInfo) << "model " << options_.model_name << ": content fingerprint "
                  << disk.binding.model_fingerprint.substr(0, 23) << "... computed in "
                  << (env_->NowMicros() - t0) / 1000 << " ms";
  }
  if (options_.cache.saved != nullptr) gate_ = &options_.cache.saved->gate();
  cache_ = std::make_unique<PromptCache>(*runner_, options_.cache, env_, SequencePool::EvictFn{}, std::move(disk));
  thread_ = std::thread([this] { Loop(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  cache_->FlushToDisk();
  for (Queued& q : queue_) {
    GenEvent ev;
    ev.final = true;
    ev.status = Status::Internal("the model was unloaded before the request started");
    q.stream->PushToChoices(0, q.request.n, ev);
  }
}

int Scheduler::active() const {
  std::lock_guard<std::mutex> lock(mu_);
  return active_count_;
}

int Scheduler::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(queue_.size());
}

std::shared_ptr<GenStream> Scheduler::Submit(GenRequest request) {
  auto stream = std::make_shared<GenStream>();
  Status bad;
  const int64_t n = static_cast<int64_t>(request.prompt.size());
  if (n == 0) {
    bad = Status::InvalidArgument("the prompt is empty");
  } else if (n + 1 > n_ctx()) {
    bad = Status::InvalidArgument("the prompt has " + std::to_string(n) + " tokens, the context holds " +
                                  std::to_string(n_ctx()) + " (including at least one generated token)");
  } else if (request.max_tokens < 1) {
    bad = Status::InvalidArgument("max_tokens must be >= 1");
  } else if (request.n < 1 || request.n > kMaxChoices) {
    bad = Status::InvalidArgument("n must be in [1, " + std::to_string(kMaxChoices) + "], got " +
                                  std::to_string(request.n));
  } else if (request.n > 1 && ChoicesStateBytes(request) > options_.cache.budget_bytes) {
    // Every choice holds a state of its own: n of them must fit in the
    // prompt cache's budget (MATRICXON_PROMPT_CACHE_BUDGET_MB), which they
    // are charged to while they run.
    const uint64_t need = ChoicesStateBytes(request);
    const int64_t tokens = std::min<int64_t>(n + request.max_tokens, n_ctx());
    bad = Status::InvalidArgument(
        "n = " + std::to_string(request.n) + " choices of a " + std::to_string(n) + "-token prompt hold up to " +
        std::to_string(need >> 20) + " MiB of state (" + std::to_string(request.n) + " states of up to " +
        std::to_string(tokens) + " tokens at " + std::to_string(runner_->layout()->kv_bytes_per_token()) +
        " bytes a token), more than the prompt cache's budget of " +
        std::to_string(options_.cache.budget_bytes >> 20) +
        " MiB (MATRICXON_PROMPT_CACHE_BUDGET_MB): ask for fewer choices or a smaller max_tokens");
  } else {
    bad = ValidatePromptImages(request.prompt, request.images, runner_->n_vocab());
  }
  if (!bad.ok()) {
    GenEvent ev;
    ev.final = true;
    ev.status = bad;
    stream->Push(std::move(ev));
    return stream;
  }
  stream->open_ = request.n;  // not yet shared: no lock needed
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({std::move(request), stream, env_->NowMicros()});
  }
  cv_.notify_all();
  return stream;
}

Status Scheduler::StartSlot(Slot& s) {
  // A slot that waited for a refresh of the saved-cache index is charged
  // the wait too (cache_ms), from its first try on.
  if (s.start_us == 0) s.start_us = env_->NowMicros();
  const uint64_t t0 = s.start_us;
  auto ticket = cache_->Start(s.request.prompt, s.request.cache_prompt, s.request.has_images,
                              {s.request.tenant, s.request.tenant_isolated}, &s.index_wait);
  // Waiting for the refresh: the slot stays unstarted (the Loop keeps it
  // out of the batch) and is tried again once the refresh has ended.
  if (ticket.ok() && ticket->waiting()) return Status::Ok();
  if (!ticket.ok()) {
    s.timings.cache_ms += static_cast<double>(env_->NowMicros() - t0) / 1000.0;
    return ticket.status();
  }
  s.ticket = std::move(ticket).value();
  s.seq = &s.ticket.state();
  s.cached = s.ticket.n_reused();
  // What the state holds from here on, should the slot end early (Finish
  // hands back the first n_tokens() of it).
  s.history = s.request.prompt;
  // Room for the whole prompt now: growing a state reallocates it and copies
  // its KV rows, which is the cache's cost of continuing a chat in place,
  // not reading; left to the forward pass it would hide in prompt_ms.
  Status room = s.seq->Reserve(static_cast<int64_t>(s.request.prompt.size()));
  s.timings.cache_ms += static_cast<double>(env_->NowMicros() - t0) / 1000.0;
  MX_RETURN_IF_ERROR(room);
  // Hybrid models: keep snapshots of the recurrent state where later prompts
  // are likely to leave this one (cache/policy/snapshot_policy.h), within
  // the count and byte limits per chat.
  if (s.seq->has_recurrent()) {
    const uint64_t t1 = env_->NowMicros();
    cache::SnapshotRequest sr;
    sr.prompt_len = static_cast<int64_t>(s.request.prompt.size());
    sr.n_reused = s.cached;
    sr.message_starts = s.request.message_starts;
    sr.reply_start = s.request.reply_start;
    sr.diverged_at = s.ticket.diverged_at();
    s.snapshots =
        PlanStateSnapshots(*s.seq, sr, SnapshotLimitsFor(options_.cache, *runner_->layout()));
    s.timings.cache_ms += static_cast<double>(env_->NowMicros() - t1) / 1000.0;
  }
  const std::string line =
      s.ticket.log_line() + DivergenceNote(s.request.message_starts, s.ticket.diverged_at());
  MX_LOG(kInfo) << "model " << options_.model_name << ": " << line;
  if (options_.events != nullptr) {
    options_.events->Push({.time_unix_ms = env_->WallMicros() / 1000,
                           .model = options_.model_name,
                           .tenant = s.request.tenant,
                           .prompt_tokens = static_cast<int64_t>(s.request.prompt.size()),
                           .cached_tokens = s.cached,
                           .source = s.ticket.source(),
                           .line = line});
  }
  return Status::Ok();
}

void Scheduler::Finish(Slot& s, std::string reason, Status status) {
  GenEvent ev;
  ev.choice = s.choice;
  ev.final = true;
  ev.finish_reason = std::move(reason);
  ev.status = std::move(status);
  if (ev.status.ok() && s.text) ev.text = s.text->Flush();
  ev.prompt_tokens = static_cast<int64_t>(s.request.prompt.size());
  ev.cached_tokens = s.cached;
  ev.completion_tokens = s.generated;
  s.done = true;
  choice_bytes_ -= s.charged_bytes;
  s.charged_bytes = 0;
  // Hand the state back: it holds exactly the first n_tokens() of history
  // (the last sampled token is never read). A failed forward pass may have
  // left it half-written, so then it is dropped. This happens before the
  // final event, so a client that has its reply sees the pool updated.
  if (s.seq != nullptr) {
    const uint64_t t0 = env_->NowMicros();
    if (forward_failed_) {
      cache_->Abandon(std::move(s.ticket));
    } else {
      // A request that ended before reading its whole prompt leaves pending
      // snapshots past what the state holds: they would take room from the
      // ones the next turn keeps.
      for (int64_t p : s.snapshots) {
        if (p > s.seq->n_tokens()) s.seq->DropSnapshot(p);
      }
      std::vector<int32_t> held(s.history.begin(), s.history.begin() + s.seq->n_tokens());
      cache_->Finish(std::move(s.ticket), std::move(held), static_cast<int64_t>(s.request.prompt.size()));
    }
    s.seq = nullptr;
    s.timings.cache_ms += static_cast<double>(env_->NowMicros() - t0) / 1000.0;
  }
  ev.timings = s.timings;
  ev.time_us = env_->NowMicros();
  {
    // Counted out before the final event, so a client that has its reply
    // (or has just cancelled) already sees the exact active count.
    std::lock_guard<std::mutex> lock(mu_);
    --active_count_;
  }
  // Choices not copied yet (the request ended before its prompt was read)
  // end the same way, with nothing generated.
  if (s.forks > 0) {
    GenEvent rest = ev;
    rest.completion_tokens = 0;
    rest.text.clear();
    s.stream->PushToChoices(1, 1 + s.forks, rest);
    s.forks = 0;
  }
  s.stream->Push(std::move(ev));
}

void Scheduler::OnLogits(Slot& s, std::span<const float> logits) {
  const uint64_t t0 = env_->NowMicros();
  auto charge = [&] { s.timings.predicted_ms += static_cast<double>(env_->NowMicros() - t0) / 1000.0; };
  const auto& tok = *model_.tokenizer;
  if (s.request.ignore_eos) {
    masked_.assign(logits.begin(), logits.end());
    for (int32_t eog : tok.eog_ids()) masked_[static_cast<size_t>(eog)] = -INFINITY;
    logits = masked_;
  }
  const int32_t id = s.sampler->Sample(logits, s.history, s.constraint.get());
  if (id < 0) {  // the constraint allows no token here
    MX_LOG(kWarn) << "model " << options_.model_name << ": the reply's constraint allows no token after "
                     << s.generated << " generated tokens; ending the reply";
    charge();
    Finish(s, "stop", Status::Ok());
    return;
  }
  if (tok.IsEog(id)) {
    charge();
    Finish(s, "stop", Status::Ok());
    return;
  }
  if (s.constraint) s.constraint->Accept(id);
  GenEvent ev;
  ev.choice = s.choice;
  ev.has_token = true;
  ev.token = id;
  if (s.request.logprobs) {
    const double lse = Sampler::LogNormaliser(logits);
    ev.logprob = Sampler::Logprob(logits, id, lse);
    if (s.request.top_logprobs > 0)
      ev.top = Sampler::TopLogprobs(logits, s.request.top_logprobs, lse);
  }
  ev.text = s.text->Push(tok.TokenToPiece(id));
  s.history.push_back(id);
  ++s.generated;
  ev.time_us = env_->NowMicros();
  s.stream->Push(std::move(ev));
  charge();
  if (s.text->stopped() || (s.constraint && s.constraint->MustEnd())) {
    Finish(s, "stop", Status::Ok());
  } else if (s.generated >= s.request.max_tokens || s.seq->n_tokens() + 1 > runner_->n_ctx()) {
    Finish(s, "length", Status::Ok());
  } else {
    s.next_token = id;
  }
}

void Scheduler::ChargeStep(std::vector<std::unique_ptr<Slot>>& slots, uint64_t step_us, size_t n_batch) {
  if (n_batch == 0) return;
  const double ms_per_entry = static_cast<double>(step_us) / 1000.0 / static_cast<double>(n_batch);
  for (auto& s : slots) {
    s->timings.prompt_ms += ms_per_entry * static_cast<double>(s->step_prompt);
    s->timings.predicted_ms += ms_per_entry * static_cast<double>(s->step_decode);
  }
}

Scheduler::ImagesReady Scheduler::EncodeImages(Slot& s, int64_t take) {
  const std::vector<PromptImage>& images = s.request.images;
  s.image_embd.resize(images.size());
  s.image_jobs.resize(images.size());
  const auto begin = static_cast<int64_t>(s.n_read), end = begin + take;
  const auto n_embd = static_cast<size_t>(model_.model->config().n_embd);
  ImagesReady ready = ImagesReady::kReady;
  for (size_t k = 0; k < images.size(); ++k) {
    const PromptImage& im = images[k];
    if (im.end_row() <= begin || im.first_row >= end || !s.image_embd[k].empty()) continue;
    // Encoded on the encoder's thread: this slot sits out the batches until
    // its picture is ready, every other request goes on.
    if (s.image_jobs[k] == nullptr) {
      if (encoder_ == nullptr) {
        encoder_ = std::make_unique<ImageEncoder>(options_.n_threads, [env = env_] { return env->NowMicros(); });
      }
      s.image_jobs[k] = encoder_->Submit(im);
    }
    if (!s.image_jobs[k]->ready()) {
      ready = ImagesReady::kWaiting;
      continue;
    }
    const uint64_t us = s.image_jobs[k]->encode_us();
    Result<std::vector<float>> embd = s.image_jobs[k]->Take();
    s.image_jobs[k].reset();
    s.timings.prompt_ms += static_cast<double>(us) / 1000.0;
    if (embd.ok() && embd->size() != static_cast<size_t>(im.n_rows()) * n_embd) {
      embd = Status::Internal("the vision encoder gave " + std::to_string(embd->size()) + " floats for " +
                              std::to_string(im.n_rows()) + " rows of " + std::to_string(n_embd));
    }
    if (!embd.ok()) {
      MX_LOG(kError) << "model " << options_.model_name << ": image " << k + 1 << ": " << embd.status().ToString();
      Finish(s, "error", embd.status().WithContext("image " + std::to_string(k + 1)));
      return ImagesReady::kFailed;
    }
    MX_LOG(kInfo) << "model " << options_.model_name << ": image " << k + 1 << " of " << images.size() << " ("
                  << im.nx << "x" << im.ny << " rows) encoded in " << us / 1000 << " ms";
    s.image_embd[k] = std::move(embd).value();
  }
  return ready;
}

models::BatchEntry Scheduler::PromptEntry(Slot& s, bool want_logits) {
  const auto row = static_cast<int64_t>(s.n_read);
  const std::vector<PromptImage>& images = s.request.images;
  if (images.empty()) return {s.seq, s.request.prompt[s.n_read], want_logits};
  const kernels::RopePos pos = RowPosition(images, row);
  const int64_t k = ImageAtRow(images, row);
  if (k >= 0) {
    const auto n_embd = static_cast<size_t>(model_.model->config().n_embd);
    const float* embd = s.image_embd[static_cast<size_t>(k)].data() +
                        static_cast<size_t>(row - images[static_cast<size_t>(k)].first_row) * n_embd;
    return models::BatchEntry::Embedding(s.seq, embd, pos, want_logits);
  }
  models::BatchEntry e(s.seq, s.request.prompt[s.n_read], want_logits);
  e.has_pos = true;
  e.pos = pos;
  return e;
}

void Scheduler::Loop() {
  std::vector<std::unique_ptr<Slot>> slots;
  std::vector<models::BatchEntry> batch;
  std::vector<Slot*> wants;  // slot of each entry that asks for logits, in order
  std::vector<float> logits;
  std::vector<Queued> gone;  // cancelled while waiting for a slot
  std::vector<std::unique_ptr<Slot>> forked;  // this step's further choices (n > 1)
  // Deferral: slots whose prompt waits for a refresh of the saved-cache
  // index sit out the batches (StartSlot left them unstarted) until it
  // ends, its deadline passes or they are cancelled.
  std::vector<std::unique_ptr<Slot>> waiting;
  auto can_run = [&] {
    const uint64_t now = env_->NowMicros();
    return stop_ || !slots.empty() ||
           (!queue_.empty() && static_cast<int>(waiting.size()) < options_.n_parallel) ||
           std::any_of(waiting.begin(), waiting.end(), [&](const auto& s) {
             return s->index_wait.Ready(now) || s->stream->cancelled();
           });
  };
  // Whether this loop told the server-wide gate that it has requests (saved
  // caches are then written only in slices between forward passes).
  bool gate_active = false;
  auto set_active = [&](bool active) {
    if (gate_ != nullptr && active != gate_active) {
      gate_->SetLoopActive(active);
      gate_active = active;
    }
  };
  for (;;) {
    if (slots.empty()) set_active(false);
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (waiting.empty()) {
        cv_.wait(lock, can_run);
      } else {
        uint64_t until = UINT64_MAX;
        for (const auto& s : waiting) until = std::min(until, s->index_wait.deadline_us());
        const uint64_t now = env_->NowMicros();
        cv_.wait_for(lock, std::chrono::microseconds(until > now ? until - now : 0), can_run);
      }
      if (stop_) break;
      // Deferral: waiting slots rejoin; StartSlot below tries them again.
      for (auto& s : waiting) slots.push_back(std::move(s));
      waiting.clear();
      // A request cancelled in the queue ends at this step, not when a slot
      // frees (the queue is only non-empty while every slot is busy).
      for (auto it = queue_.begin(); it != queue_.end();) {
        if (it->stream->cancelled()) {
          gone.push_back(std::move(*it));
          it = queue_.erase(it);
        } else {
          ++it;
        }
      }
      while (static_cast<int>(slots.size()) < options_.n_parallel && !queue_.empty()) {
        Queued& q = queue_.front();
        // Requests with choices start only while the states of all of them
        // fit in the budget together (the first always may: Submit checked
        // that it fits alone); the others wait in the queue.
        const uint64_t charge = q.request.n > 1 ? ChoicesStateBytes(q.request) : 0;
        if (charge > 0 && choice_bytes_ > 0 && choice_bytes_ + charge > options_.cache.budget_bytes) break;
        choice_bytes_ += charge;
        auto slot = std::make_unique<Slot>();
        slot->charged_bytes = charge;
        slot->request = std::move(q.request);
        slot->stream = std::move(q.stream);
        slot->forks = slot->request.n - 1;
        slot->timings.queue_ms = static_cast<double>(env_->NowMicros() - q.submitted_us) / 1000.0;
        queue_.pop_front();
        slots.push_back(std::move(slot));
      }
      active_count_ = static_cast<int>(slots.size());
    }
    for (Queued& q : gone) {
      GenEvent ev;
      ev.final = true;
      ev.finish_reason = "cancelled";
      ev.prompt_tokens = static_cast<int64_t>(q.request.prompt.size());
      ev.timings.queue_ms = static_cast<double>(env_->NowMicros() - q.submitted_us) / 1000.0;
      ev.time_us = env_->NowMicros();
      q.stream->PushToChoices(0, q.request.n, ev);
    }
    gone.clear();
    if (slots.empty()) continue;
    set_active(true);
    // Start new slots, drop cancelled ones.
    for (auto& s : slots) {
      if (!s->seq && s->stream->cancelled()) {  // gone before it started (or while its refresh ran)
        MX_LOG(kInfo) << "model " << options_.model_name
                      << ": request cancelled after 0 generated tokens; slot freed";
        Finish(*s, "cancelled", Status::Ok());
        continue;
      }
      if (!s->seq) {
        Status st;
        try {
          st = StartSlot(*s);
        } catch (const std::bad_alloc&) {
          st = Status::ResourceExhausted("out of memory while preparing the prompt's state");
        }
        if (!st.ok()) {
          MX_LOG(kError) << "model " << options_.model_name << ": prompt cache: " << st.ToString();
          Finish(*s, "error", st);
          continue;
        }
        if (!s->seq) continue;  // waits for the saved-cache index (deferral below)
        s->n_read = static_cast<size_t>(s->cached);
        ArmSlot(*s, 0);
        s->history = s->request.prompt;
      }
      if (s->stream->cancelled()) {
        MX_LOG(kInfo) << "model " << options_.model_name << ": request cancelled after " << s->generated
                      << " generated tokens; slot freed";
        Finish(*s, "cancelled", Status::Ok());
      }
    }
    // Deferral: unstarted slots wait for their refresh outside the batch.
    for (auto& s : slots) {
      if (!s->done && !s->seq) waiting.push_back(std::move(s));
    }
    std::erase_if(slots, [](const auto& s) { return s == nullptr; });
    std::erase_if(slots, [](const auto& s) { return s->done; });
    if (slots.empty()) continue;

    // One batch: a token for every generating slot, then prompt chunks. Each
    // slot's room is reserved first, so a state whose memory cannot be had
    // fails its own request and no other.
    batch.clear();
    wants.clear();
    auto reserve = [&](Slot& s, int64_t n_more) {
      Status st = s.seq->Reserve(s.seq->n_tokens() + n_more);
      if (st.ok()) return true;
      MX_LOG(kError) << "model " << options_.model_name << ": " << st.ToString();
      Finish(s, "error", st);
      return false;
    };
    bool paused = false;  // a generating slot sat out: its reader is behind
    for (auto& s : slots) {
      s->step_prompt = 0;
      s->step_decode = 0;
      if (!s->reading() && s->next_token >= 0) {
        if (s->stream->backlog_bytes() > kStreamBacklogBytes) {
          paused = true;
          continue;
        }
        if (!reserve(*s, 1)) continue;
        batch.emplace_back(s->seq, s->next_token, true);
        if (!s->request.images.empty()) {
          batch.back().has_pos = true;
          batch.back().pos = RowPosition(s->request.images, s->seq->n_tokens());
        }
        wants.push_back(s.get());
        s->step_decode = 1;
      }
    }
    int64_t budget = options_.prompt_chunk;
    for (auto& s : slots) {
      if (s->done || !s->reading() || budget <= 0) continue;
      const int64_t take = std::min<int64_t>(budget, static_cast<int64_t>(s->request.prompt.size() - s->n_read));
      if (!s->request.images.empty()) {
        const ImagesReady images = EncodeImages(*s, take);
        if (images == ImagesReady::kFailed) continue;
        if (images == ImagesReady::kWaiting) {
          paused = true;  // its picture is being encoded
          continue;
        }
      }
      if (!reserve(*s, take)) continue;
      for (int64_t k = 0; k < take; ++k) {
        const bool last = s->n_read + 1 == s->request.prompt.size();
        batch.push_back(PromptEntry(*s, last));
        if (last) wants.push_back(s.get());
        ++s->n_read;
        ++s->step_prompt;
        --budget;
      }
    }
    std::erase_if(slots, [](const auto& s) { return s->done; });
    if (batch.empty()) {
      // Every slot waits for its reader (a client reading slowly; one that
      // stops reading is cut by the HTTP front's write deadline, which
      // cancels its request) or for its picture's encoding: look again
      // shortly, without spinning.
      if (paused) {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_for(lock, std::chrono::milliseconds(5), [&] { return stop_; });
      }
      continue;
    }
    const uint64_t step_t0 = env_->NowMicros();
    Status st;
    try {
      StepScope step(gate_);
      st = runner_->Forward(batch, &logits);
    } catch (const std::bad_alloc&) {
      st = Status::ResourceExhausted("out of memory in the forward pass");
    }
    ChargeStep(slots, env_->NowMicros() - step_t0, batch.size());
    if (!st.ok()) {
      MX_LOG(kError) << "model " << options_.model_name << ": forward pass failed: " << st.ToString();
      forward_failed_ = true;
      for (auto& s : slots) Finish(*s, "error", st.WithContext("forward pass"));
      forward_failed_ = false;
      slots.clear();
      continue;
    }
    const size_t n_vocab = static_cast<size_t>(runner_->n_vocab());
    for (size_t i = 0; i < wants.size(); ++i) {
      const std::span<const float> row(logits.data() + i * n_vocab, n_vocab);
      if (wants[i]->forks > 0) {
        // The prompt is read: further choices start from copies of its state
        // and draw their first token from the same logits.
        const size_t first = forked.size();
        ForkChoices(*wants[i], &forked);
        for (size_t k = first; k < forked.size(); ++k) OnLogits(*forked[k], row);
      }
      OnLogits(*wants[i], row);
    }
    for (auto& f : forked) slots.push_back(std::move(f));
    forked.clear();
    std::erase_if(slots, [](const auto& s) { return s->done; });
    cache_->Recharge();
    {
      std::lock_guard<std::mutex> lock(mu_);
      active_count_ = static_cast<int>(slots.size() + waiting.size());
    }
  }
  for (auto& s : slots) Finish(*s, "error", Status::Internal("the server is shutting down"));
  for (auto& s : waiting) Finish(*s, "error", Status::Internal("the server is shutting down"));
  set_active(false);
}

}  // namespace mx::engine
