// matricxon chat: one chat in the terminal, streaming tokens. The chat keeps
// its state between turns, so each turn reads only the tokens the previous
// turns did not (the longest common start is kept, the rest re-read).
// On a terminal the input line is edited with libedit (line_reader.h);
// Ctrl-C stops a reply (or the reading of a prompt) and returns to the prompt.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/interrupt.h"
#include "cli/line_reader.h"
#include "cli/progress.h"
#include "core/env.h"
#include "core/logging.h"
#include "core/thread_pool.h"
#include "engine/loaded_model.h"
#include "engine/sampler.h"
#include "models/runner.h"

namespace mx::cli {
namespace {

const std::vector<FlagSpec> kFlags = {
    {"model", "", "GGUF model file (required)"},
    {"threads", "", "compute threads (default: physical cores)"},
    {"ctx", "0", "context size in tokens (0: the model's, capped at 8192)"},
    {"system", "", "system prompt"},
    {"template", "",
     "force a chat template family (chatml, qwen3, qwen3.5, llama3, mistral, gemma, phi3, "
     "harmony)"},
    {"max-tokens", "512", "most tokens per reply"},
    {"temperature", "0.8", "sampling temperature (0 = greedy)"},
    {"top-k", "40", "top-k (0 = off)"},
    {"top-p", "0.95", "top-p"},
    {"min-p", "0.05", "min-p"},
    {"repeat-penalty", "1.0", "repetition penalty (1 = off)"},
    {"seed", "0", "sampling seed (0 = random)"},
    {"kv-type", "f16", "KV cache type: f16, q8_0, q4_0 or f32"},
    {"stats", "",
     "after each reply: prompt tokens reused from the chat's state and read anew, speed", true},
    {"history", "", "keep the lines typed in this file (mode 0600; terminal only)"},
    {"ignore-eos", "", "never end a reply at an end-of-generation token (synthetic models, demos)",
     true},
};

constexpr char kHelp[] =
    "  /help    this list\n"
    "  /reset   start a new chat (the system prompt stays)\n"
    "  /stats   turn the per-turn token counts on or off\n"
    "  /quit    leave (also /exit, Ctrl-D)\n"
    "Ctrl-C stops a reply and returns to the prompt; Up/Down go through the lines typed;\n"
    "a line that starts with // sends it with one / less.\n";

size_t CommonPrefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

Status Run(const Flags& f) {
  if (f.Get("model").empty()) return Status::InvalidArgument("--model is required");
  Env* env = Env::Default();
  int64_t threads = PhysicalCoreCount();
  if (f.Has("threads")) {
    MX_ASSIGN_OR_RETURN(threads, f.GetInt("threads", 1, 1024));
  }
  MX_ASSIGN_OR_RETURN(int64_t ctx, f.GetInt("ctx", 0, int64_t{1} << 22));
  MX_ASSIGN_OR_RETURN(int64_t max_tokens, f.GetInt("max-tokens", 1, int64_t{1} << 22));
  engine::SamplingParams sp;
  MX_ASSIGN_OR_RETURN(double temperature, f.GetDouble("temperature", 0, 100));
  MX_ASSIGN_OR_RETURN(int64_t top_k, f.GetInt("top-k", 0, int64_t{1} << 30));
  MX_ASSIGN_OR_RETURN(double top_p, f.GetDouble("top-p", 0, 1));
  MX_ASSIGN_OR_RETURN(double min_p, f.GetDouble("min-p", 0, 1));
  MX_ASSIGN_OR_RETURN(double repeat_penalty, f.GetDouble("repeat-penalty", 0, 100));
  MX_ASSIGN_OR_RETURN(int64_t seed, f.GetInt("seed", 0, INT64_MAX));
  sp.temperature = static_cast<float>(temperature);
  sp.top_k = static_cast<int>(top_k);
  sp.top_p = static_cast<float>(top_p);
  sp.min_p = static_cast<float>(min_p);
  sp.repeat_penalty = static_cast<float>(repeat_penalty);
  sp.seed = static_cast<uint64_t>(seed);
  MX_RETURN_IF_ERROR(engine::ValidateSamplingParams(sp));
  const std::string kv_name = f.Get("kv-type");
  DType kv_type = DType::kF16;
  if ((kv_name != "f16" && kv_name != "f32" && kv_name != "q8_0" && kv_name != "q4_0") ||
      !DTypeFromName(kv_name, &kv_type)) {
    return Status::InvalidArgument("--kv-type '" + kv_name + "': expected f16, q8_0, q4_0 or f32");
  }

  Progress progress("loading " + f.Get("model"), true);
  engine::ModelLoadOptions lo;
  lo.load.progress = [&](uint64_t done, uint64_t total) { progress.Update(done, total); };
  lo.template_override = f.Get("template");
  MX_ASSIGN_OR_RETURN(auto lm, engine::LoadedModel::Load(env, f.Get("model"), lo));
  progress.Done();
  std::unique_ptr<models::Runner> runner;
  {
    // The runner's threads must never take a SIGINT meant for the chat loop.
    ScopedBlockInterrupt block;
    MX_ASSIGN_OR_RETURN(
        runner, models::Runner::Create(
                    *lm->model,
                    {.n_threads = static_cast<int>(threads), .kv_type = kv_type, .n_ctx = ctx}));
  }
  const auto& cfg = lm->model->config();
  std::fprintf(stderr,
               "model: %s (%s, %lld layers, dim %lld, vocab %lld), template %s, context %lld, %lld "
               "threads\n",
               f.Get("model").c_str(), models::ArchName(cfg.arch),
               static_cast<long long>(cfg.n_layer), static_cast<long long>(cfg.n_embd),
               static_cast<long long>(cfg.n_vocab),
               std::string(templates::FamilyName(lm->family)).c_str(),
               static_cast<long long>(runner->n_ctx()), static_cast<long long>(threads));
  const bool terminal = isatty(STDIN_FILENO) != 0 && isatty(STDOUT_FILENO) != 0;
  MX_ASSIGN_OR_RETURN(auto reader, LineReader::Open(terminal, f.Get("history")));
  std::fprintf(stderr,
               "type a message and press enter; /help lists the commands, Ctrl-C stops a reply, "
               "/quit or Ctrl-D leaves\n");

  std::vector<templates::ChatMessage> messages;
  if (f.Has("system")) messages.push_back({"system", f.Get("system"), std::nullopt});
  auto seq = runner->NewSequence();
  std::vector<int32_t> held;  // tokens whose state `seq` holds
  engine::Sampler sampler(sp);
  // --ignore-eos: the end-of-generation tokens can never be drawn.
  std::vector<int32_t> masked;
  if (f.GetBool("ignore-eos")) {
    for (int32_t id = 0; id < lm->tokenizer->n_vocab(); ++id) {
      if (lm->tokenizer->IsEog(id)) masked.push_back(id);
    }
  }
  bool stats = f.GetBool("stats");
  int turn = 0;
  InterruptCatcher interrupt;
  std::vector<float> logits;
  std::string line;
  for (;;) {
    interrupt.Clear();
    const LineReader::Outcome got = reader->Read("> ", &line);
    if (got == LineReader::Outcome::kEof) break;
    if (got == LineReader::Outcome::kInterrupted) continue;  // the line typed so far is dropped
    reader->AddHistory(line);
    if (line == "/quit" || line == "/exit") break;
    if (line == "/help") {
      std::fputs(kHelp, stderr);
      continue;
    }
    if (line == "/reset") {
      messages.resize(f.Has("system") ? 1 : 0);
      std::fputs("new chat\n", stderr);
      continue;
    }
    if (line == "/stats") {
      stats = !stats;
      std::fprintf(stderr, "stats %s\n", stats ? "on" : "off");
      continue;
    }
    if (line.rfind("//", 0) == 0) {
      line.erase(0, 1);
    } else if (!line.empty() && line[0] == '/') {
      std::fprintf(stderr, "unknown command %s; /help lists them\n", line.c_str());
      continue;
    }
    if (line.empty()) continue;
    messages.push_back({"user", line, std::nullopt});
    MX_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, lm->EncodeChat(messages, {}));
    if (static_cast<int64_t>(prompt.size()) + 1 > runner->n_ctx()) {
      std::fprintf(
          stderr, "the chat (%zu tokens) no longer fits the context (%lld); /reset to start over\n",
          prompt.size(), static_cast<long long>(runner->n_ctx()));
      messages.pop_back();
      continue;
    }
    ++turn;
    // Keep the longest common start; a recurrent state can only be kept whole.
    size_t keep = CommonPrefix(held, prompt);
    if (keep == prompt.size()) --keep;  // always read at least one token to get logits
    if (seq->has_recurrent() && keep != held.size()) keep = 0;
    MX_RETURN_IF_ERROR(seq->Truncate(static_cast<int64_t>(keep)));
    held.resize(keep);

    const uint64_t t0 = env->NowMicros();
    constexpr size_t kChunk = 512;
    bool stopped = false;
    for (size_t i = keep; i < prompt.size(); i += kChunk) {
      if (interrupt.pending()) {
        stopped = true;
        break;
      }
      std::vector<models::BatchEntry> batch;
      for (size_t j = i; j < std::min(prompt.size(), i + kChunk); ++j) {
        batch.push_back({seq.get(), prompt[j], j + 1 == prompt.size()});
      }
      MX_RETURN_IF_ERROR(runner->Forward(batch, &logits));
      held.insert(held.end(), prompt.begin() + static_cast<int64_t>(i),
                  prompt.begin() + static_cast<int64_t>(std::min(prompt.size(), i + kChunk)));
    }
    if (stopped) {
      // The state keeps the chunks read (the next turn reuses them); the
      // message was never answered, so it leaves the chat.
      messages.pop_back();
      std::fprintf(stderr, "[stopped while reading the prompt: %zu of %zu tokens read]\n",
                   held.size() - keep, prompt.size() - keep);
      continue;
    }
    const uint64_t t1 = env->NowMicros();

    tokenizer::Utf8StreamDecoder decoder;
    std::string reply;
    int64_t generated = 0;
    while (generated < max_tokens && seq->n_tokens() < runner->n_ctx()) {
      if (interrupt.pending()) {
        stopped = true;
        break;
      }
      for (int32_t id : masked) {
        if (static_cast<size_t>(id) < logits.size()) logits[static_cast<size_t>(id)] = -INFINITY;
      }
      int32_t tok = sampler.Sample(logits, held);
      if (lm->tokenizer->IsEog(tok)) break;
      std::string text = decoder.Push(lm->tokenizer->TokenToPiece(tok));
      reply += text;
      std::fputs(text.c_str(), stdout);
      std::fflush(stdout);
      models::BatchEntry e{seq.get(), tok, true};
      MX_RETURN_IF_ERROR(runner->Forward({&e, 1}, &logits));
      held.push_back(tok);
      ++generated;
    }
    std::string tail = decoder.Flush();
    reply += tail;
    std::fputs(tail.c_str(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    const uint64_t t2 = env->NowMicros();
    // A stopped reply stays in the chat as far as it got (it was shown).
    messages.push_back({"assistant", reply, std::nullopt});
    if (stopped) std::fprintf(stderr, "[stopped]\n");
    if (stats) {
      double pp_s = static_cast<double>(t1 - t0) / 1e6, tg_s = static_cast<double>(t2 - t1) / 1e6;
      std::fprintf(stderr,
                   "[turn %d: prompt %zu tokens, %zu reused, %zu read in %.3f s; %lld generated, "
                   "%.1f tokens/s]\n",
                   turn, prompt.size(), keep, prompt.size() - keep, pp_s,
                   static_cast<long long>(generated),
                   tg_s > 0 ? static_cast<double>(generated) / tg_s : 0.0);
    }
  }
  return Status::Ok();
}

}  // namespace

int ChatCommand(int argc, char** argv) {
  return RunCommand("chat", "Chats with a GGUF model in the terminal, streaming the reply.", kFlags,
                    argc, argv, 2, Run);
}

}  // namespace mx::cli
