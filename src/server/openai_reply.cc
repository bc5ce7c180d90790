#include "server/openai_reply.h"

#include <algorithm>
#include <cstdio>

#include "server/api_types.h"
#include "server/http_util.h"
#include "server/chat_choice.h"

namespace mx::server {
namespace {

Json Bytes(const std::string& s) {
  Json b = Json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

// One entry of chat `logprobs.content`.
Json ChatLogprob(const Reply& r, const engine::GenEvent& ev) {
  Json top = Json::array();
  for (const auto& [id, lp] : ev.top) {
    std::string p = r.Piece(id);
    top.push_back({{"token", p}, {"logprob", lp}, {"bytes", Bytes(p)}});
  }
  std::string p = r.Piece(ev.token);
  return {{"token", p}, {"logprob", ev.logprob}, {"bytes", Bytes(p)}, {"top_logprobs", top}};
}

// Accumulates legacy completions `logprobs` ({tokens, token_logprobs, top_logprobs, text_offset}).
void AddTextLogprob(const Reply& r, const engine::GenEvent& ev, size_t offset, Json* lp) {
  (*lp)["tokens"].push_back(r.Piece(ev.token));
  (*lp)["token_logprobs"].push_back(ev.logprob);
  Json top = Json::object();
  for (const auto& [id, v] : ev.top) top[r.Piece(id)] = v;
  (*lp)["top_logprobs"].push_back(top);
  (*lp)["text_offset"].push_back(offset);
}

Json EmptyTextLogprobs() {
  return {{"tokens", Json::array()},
          {"token_logprobs", Json::array()},
          {"top_logprobs", Json::array()},
          {"text_offset", Json::array()}};
}

Json FinishReason(const engine::GenEvent& ev) {
  if (ev.finish_reason == "stop" || ev.finish_reason == "length") return ev.finish_reason;
  return nullptr;
}

// The request's usage over its choices (OpenAI: the prompt once, the
// completion tokens of every choice) and the timings of the choice that
// ended last.
struct Totals {
  engine::GenEvent usage;  // prompt/cached of choice 0, completion summed
  engine::GenEvent last;   // the last final event
  bool any = false;
  void Add(const engine::GenEvent& ev) {
    if (!any || ev.choice == 0) {
      usage.prompt_tokens = ev.prompt_tokens;
      usage.cached_tokens = ev.cached_tokens;
    }
    usage.completion_tokens += ev.completion_tokens;
    last = ev;
    any = true;
  }
  Json UsageJson() const { return server::UsageJson(usage); }
};

ChatChoiceOptions ChoiceOptions(const Reply& r) {
  return {.split_reasoning = r.split_reasoning,
          .reasoning_starts_inside = r.reasoning_starts_inside,
          .tool_format = r.tool_format,
          .parse_calls = r.parse_calls,
          .tool_schemas = r.tool_schemas.get(),
          .env = r.ctx->env};
}

// finish_reason: "tool_calls" when a chat choice that ended by itself
// called a tool.
Json ChoiceFinish(const engine::GenEvent& ev, const ChatChoice* choice) {
  if (choice != nullptr && choice->called() && ev.finish_reason == "stop") return "tool_calls";
  return FinishReason(ev);
}

std::string Sse(const Json& j) { return "data: " + Dump(j) + "\n\n"; }

}  // namespace

void Reply::Observe(const engine::GenEvent& ev) {
  if (ev.has_token && !first_token_seen) {
    first_token_seen = true;
    ctx->metrics->ObserveTtft(static_cast<double>(ctx->env->NowMicros() - start_us) / 1e6);
  }
  if (ev.final) {
    // The prompt counts once per request, the generated tokens per choice.
    if (ev.choice == 0) {
      ctx->metrics->CountPromptTokens(ev.prompt_tokens - ev.cached_tokens);
      ctx->metrics->CountReusedTokens(ev.cached_tokens);
    }
    ctx->metrics->CountGenerated(ev.completion_tokens);
  }
}

std::string Reply::Piece(int32_t token) const {
  return model->model->tokenizer->TokenToPiece(token);
}

std::shared_ptr<Reply> NewReply(ServerContext* ctx, ReplyKind kind,
                                std::shared_ptr<ServedModel> model) {
  auto r = std::make_shared<Reply>();
  r->kind = kind;
  r->ctx = ctx;
  r->model = std::move(model);
  uint64_t rnd = 0;
  (void)ctx->env->RandomBytes(&rnd, sizeof(rnd));
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(rnd));
  r->id = std::string(kind == ReplyKind::kChat ? "chatcmpl-" : "cmpl-") + buf;
  r->created = static_cast<int64_t>(ctx->env->WallMicros() / 1000000);
  return r;
}

void AnswerWhole(Reply& r, HttpResponse& res) {
  struct Whole {
    std::string text;
    Json chat_lp = Json::array();
    Json text_lp = EmptyTextLogprobs();
    engine::GenEvent last;
  };
  std::vector<Whole> choices(static_cast<size_t>(r.n));
  for (Whole& w : choices) w.text = r.echo;
  Totals totals;
  Status failed;
  engine::GenEvent ev;
  while (r.stream->Next(&ev)) {
    r.Observe(ev);
    if (ev.choice < 0 || ev.choice >= r.n) continue;
    Whole& w = choices[static_cast<size_t>(ev.choice)];
    if (ev.has_token && r.logprobs) {
      if (r.kind == ReplyKind::kChat) {
        w.chat_lp.push_back(ChatLogprob(r, ev));
      } else {
        AddTextLogprob(r, ev, w.text.size(), &w.text_lp);
      }
    }
    w.text += ev.text;
    if (ev.final) {
      w.last = ev;
      totals.Add(ev);
      if (!ev.status.ok() && failed.ok()) failed = ev.status;
    }
  }
  if (!failed.ok()) return SendError(res, failed);
  Json out = Json::array();
  for (int c = 0; c < r.n; ++c) {
    Whole& w = choices[static_cast<size_t>(c)];
    if (r.kind == ReplyKind::kChat) {
      ChatChoice pipe(ChoiceOptions(r));
      out.push_back({{"index", c},
                     {"message", pipe.Message(w.text)},
                     {"logprobs", r.logprobs ? Json{{"content", w.chat_lp}} : Json(nullptr)},
                     {"finish_reason", ChoiceFinish(w.last, &pipe)}});
    } else {
      out.push_back({{"index", c},
                     {"text", w.text},
                     {"logprobs", r.logprobs ? w.text_lp : Json(nullptr)},
                     {"finish_reason", FinishReason(w.last)}});
    }
  }
  SendJson(res, {{"id", r.id},
                 {"object", r.kind == ReplyKind::kChat ? "chat.completion" : "text_completion"},
                 {"created", r.created},
                 {"model", r.model->name},
                 {"choices", std::move(out)},
                 {"usage", totals.UsageJson()},
                 {"timings", TimingsJson(totals.last)}});
}

void AnswerStream(std::shared_ptr<Reply> r, HttpResponse& res) {
  res.set_header("Cache-Control", "no-cache");
  res.set_stream("text/event-stream", [r](BodyWriter& sink) {
    const bool chat = r->kind == ReplyKind::kChat;
    auto chunk = [&](Json choice) {
      return Json{{"id", r->id},
                  {"object", chat ? "chat.completion.chunk" : "text_completion"},
                  {"created", r->created},
                  {"model", r->model->name},
                  {"choices", Json::array({std::move(choice)})}};
    };
    auto chat_chunk = [&](int c, Json delta, Json lp = nullptr, Json finish = nullptr) {
      return Sse(chunk({{"index", c},
                        {"delta", std::move(delta)},
                        {"logprobs", std::move(lp)},
                        {"finish_reason", std::move(finish)}}));
    };
    auto text_chunk = [&](int c, const std::string& text, Json lp = nullptr,
                          Json finish = nullptr) {
      return Sse(chunk({{"index", c},
                        {"text", text},
                        {"logprobs", std::move(lp)},
                        {"finish_reason", std::move(finish)}}));
    };
    std::vector<ChatChoice> pipes;
    std::string out;
    for (int c = 0; c < r->n; ++c) {
      if (chat) {
        pipes.emplace_back(ChoiceOptions(*r));
        out += chat_chunk(c, {{"role", "assistant"}, {"content", ""}});
      } else if (!r->echo.empty()) {
        out += text_chunk(c, r->echo);
      }
    }
    Totals totals;
    int open = r->n;
    bool done = false;
    engine::GenEvent ev;
    while (r->stream->Next(&ev)) {
      r->Observe(ev);
      const int c = ev.choice;
      if (c < 0 || c >= r->n) continue;
      if (ev.final && !ev.status.ok()) {
        out += Sse(ErrorJson(ev.status));
      } else if (!ev.text.empty() || (ev.has_token && r->logprobs)) {
        Json lp = nullptr;
        if (ev.has_token && r->logprobs) {
          if (chat) {
            lp = {{"content", Json::array({ChatLogprob(*r, ev)})}};
          } else {
            lp = EmptyTextLogprobs();
            AddTextLogprob(*r, ev, 0, &lp);
          }
        }
        if (chat) {
          std::vector<Json> deltas = pipes[static_cast<size_t>(c)].Deltas(ev.text);
          // A token whose text is held back still carries its logprobs.
          if (deltas.empty() && !lp.is_null()) deltas.push_back({{"content", ""}});
          for (Json& d : deltas) {
            out += chat_chunk(c, std::move(d), std::move(lp));
            lp = nullptr;  // on the first of them
          }
        } else {
          out += text_chunk(c, ev.text, std::move(lp));
        }
      }
      if (ev.final && ev.status.ok()) {
        if (chat) {
          for (Json& d : pipes[static_cast<size_t>(c)].Rest()) out += chat_chunk(c, std::move(d));
        }
        totals.Add(ev);
        // As llama.cpp's server does: `timings` rides on the last chunk
        // (the usage chunk when asked, else the last finish_reason one).
        const bool last_choice = open == 1;
        Json fin = chat ? Json{{"index", c},
                               {"delta", Json::object()},
                               {"logprobs", nullptr},
                               {"finish_reason", ChoiceFinish(ev, &pipes[static_cast<size_t>(c)])}}
                        : Json{{"index", c},
                               {"text", ""},
                               {"logprobs", nullptr},
                               {"finish_reason", FinishReason(ev)}};
        Json fin_chunk = chunk(std::move(fin));
        if (last_choice && !r->include_usage) fin_chunk["timings"] = TimingsJson(totals.last);
        out += Sse(fin_chunk);
      } else if (ev.final) {
        totals.Add(ev);
      }
      if (ev.final && --open == 0) {
        if (r->include_usage && totals.last.status.ok()) {
          Json u = chunk(nullptr);
          u["choices"] = Json::array();
          u["usage"] = totals.UsageJson();
          u["timings"] = TimingsJson(totals.last);
          out += Sse(u);
        }
        out += "data: [DONE]\n\n";
        done = true;
      }
      if (!out.empty() && !sink.Write(out)) break;  // the client went away
      out.clear();
      if (done) break;
    }
    if (!done) r->stream->Cancel();  // free the slots now
  });
}

}  // namespace mx::server
