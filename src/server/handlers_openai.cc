// OpenAI-compatible generation routes: POST /v1/chat/completions and
// POST /v1/completions, streaming (SSE, ending with `data: [DONE]`) or not.
#include <memory>
#include <string>

#include "core/logging.h"
#include "engine/scheduler.h"
#include "server/reasoning.h"
#include "server/api_types.h"
#include "server/http_util.h"
#include "server/image_input.h"
#include "server/server.h"

namespace mx::server {
namespace {

enum class Kind { kChat, kText };

// Everything one reply needs, shared by the handler and the stream provider.
struct Reply {
  Kind kind = Kind::kChat;
  ServerContext* ctx = nullptr;
  std::shared_ptr<ServedModel> model;  // held until the reply is done
  std::shared_ptr<engine::GenStream> stream;
  std::string id;
  int64_t created = 0;
  bool logprobs = false;
  bool include_usage = false;
  std::string echo;  // text completions: prompt text sent first
  // Chats with a thinking model: splits reasoning_content from content.
  std::unique_ptr<ReasoningSplitter> reasoning;
  uint64_t start_us = 0;
  bool first_token_seen = false;
  bool done = false;

  // Metrics bookkeeping for one event.
  void Observe(const engine::GenEvent& ev) {
    if (ev.has_token && !first_token_seen) {
      first_token_seen = true;
      ctx->metrics->ObserveTtft(static_cast<double>(ctx->env->NowMicros() - start_us) / 1e6);
    }
    if (ev.final) {
      ctx->metrics->CountPromptTokens(ev.prompt_tokens - ev.cached_tokens);
      ctx->metrics->CountReusedTokens(ev.cached_tokens);
      ctx->metrics->CountGenerated(ev.completion_tokens);
    }
  }
  std::string Piece(int32_t token) const { return model->model->tokenizer->TokenToPiece(token); }
};

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
  return {{"tokens", Json::array()}, {"token_logprobs", Json::array()}, {"top_logprobs", Json::array()},
          {"text_offset", Json::array()}};
}

Json FinishReason(const engine::GenEvent& ev) {
  if (ev.finish_reason == "stop" || ev.finish_reason == "length") return ev.finish_reason;
  return nullptr;
}

// Non-streaming: reads every event, answers one JSON object.
void AnswerWhole(Reply& r, HttpResponse& res) {
  std::string text = r.echo;
  Json chat_lp = Json::array();
  Json text_lp = EmptyTextLogprobs();
  engine::GenEvent ev, last;
  while (r.stream->Next(&ev)) {
    r.Observe(ev);
    if (ev.has_token && r.logprobs) {
      if (r.kind == Kind::kChat) {
        chat_lp.push_back(ChatLogprob(r, ev));
      } else {
        AddTextLogprob(r, ev, text.size(), &text_lp);
      }
    }
    text += ev.text;
    if (ev.final) last = ev;
  }
  if (!last.status.ok()) {
    SendError(res, last.status);
    return;
  }
  Json choice;
  if (r.kind == Kind::kChat) {
    Json message = {{"role", "assistant"}, {"content", text}};
    if (r.reasoning) {
      std::string reasoning, content;
      r.reasoning->Feed(text, &reasoning, &content);
      r.reasoning->Finish(&reasoning, &content);
      message["content"] = content;
      if (!reasoning.empty()) message["reasoning_content"] = reasoning;
    }
    choice = {{"index", 0},
              {"message", std::move(message)},
              {"logprobs", r.logprobs ? Json{{"content", chat_lp}} : Json(nullptr)},
              {"finish_reason", FinishReason(last)}};
  } else {
    choice = {{"index", 0},
              {"text", text},
              {"logprobs", r.logprobs ? text_lp : Json(nullptr)},
              {"finish_reason", FinishReason(last)}};
  }
  SendJson(res, {{"id", r.id},
                 {"object", r.kind == Kind::kChat ? "chat.completion" : "text_completion"},
                 {"created", r.created},
                 {"model", r.model->name},
                 {"choices", Json::array({choice})},
                 {"usage", UsageJson(last)},
                 {"timings", TimingsJson(last)}});
}

std::string Sse(const Json& j) { return "data: " + Dump(j) + "\n\n"; }

// Streaming: one SSE event per released piece of text, then the finish
// reason, the usage (when asked), with `timings` on the last of them, and
// `data: [DONE]`. Writing waits while the client reads slowly
// (back-pressure); a client gone ends the request at the engine's next step.
void AnswerStream(std::shared_ptr<Reply> r, HttpResponse& res) {
  res.set_header("Cache-Control", "no-cache");
  res.set_stream("text/event-stream", [r](BodyWriter& sink) {
    const bool chat = r->kind == Kind::kChat;
    auto chunk = [&](Json choice) {
      return Json{{"id", r->id},
                  {"object", chat ? "chat.completion.chunk" : "text_completion"},
                  {"created", r->created},
                  {"model", r->model->name},
                  {"choices", Json::array({std::move(choice)})}};
    };
    std::string out;
    if (chat) {
      out += Sse(chunk({{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}},
                        {"logprobs", nullptr}, {"finish_reason", nullptr}}));
    } else if (!r->echo.empty()) {
      out += Sse(chunk({{"index", 0}, {"text", r->echo}, {"logprobs", nullptr}, {"finish_reason", nullptr}}));
    }
    engine::GenEvent ev;
    while (r->stream->Next(&ev)) {
      r->Observe(ev);
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
          Json delta = {{"content", ev.text}};
          if (r->reasoning) {
            std::string reasoning, content;
            r->reasoning->Feed(ev.text, &reasoning, &content);
            delta = {{"content", content}};
            if (!reasoning.empty()) delta["reasoning_content"] = reasoning;
          }
          out += Sse(chunk({{"index", 0}, {"delta", std::move(delta)}, {"logprobs", lp},
                            {"finish_reason", nullptr}}));
        } else {
          out += Sse(chunk({{"index", 0}, {"text", ev.text}, {"logprobs", lp}, {"finish_reason", nullptr}}));
        }
      }
      if (ev.final && ev.status.ok() && chat && r->reasoning) {
        std::string reasoning, content;  // what the splitter still held back
        r->reasoning->Finish(&reasoning, &content);
        if (!reasoning.empty() || !content.empty()) {
          Json delta = {{"content", content}};
          if (!reasoning.empty()) delta["reasoning_content"] = reasoning;
          out += Sse(chunk({{"index", 0}, {"delta", std::move(delta)}, {"logprobs", nullptr},
                            {"finish_reason", nullptr}}));
        }
      }
      if (ev.final && ev.status.ok()) {
        Json fin = chat ? Json{{"index", 0}, {"delta", Json::object()}, {"logprobs", nullptr},
                               {"finish_reason", FinishReason(ev)}}
                        : Json{{"index", 0}, {"text", ""}, {"logprobs", nullptr},
                               {"finish_reason", FinishReason(ev)}};
        // As llama.cpp's server does: `timings` rides on the last chunk
        // (the usage chunk when asked, else the one with finish_reason).
        Json last = chunk(fin);
        if (r->include_usage) {
          out += Sse(last);
          last = chunk(nullptr);
          last["choices"] = Json::array();
          last["usage"] = UsageJson(ev);
        }
        last["timings"] = TimingsJson(ev);
        out += Sse(last);
      }
      if (ev.final) out += "data: [DONE]\n\n";
      if (!out.empty() && !sink.Write(out)) break;  // the client went away
      out.clear();
      if (ev.final) {
        r->done = true;
        break;
      }
    }
    if (!r->done) r->stream->Cancel();  // free the slot now
  });
}

// Shared tail of both routes: checks the prompt, submits, answers.
void Generate(ServerContext* ctx, std::shared_ptr<Reply> r, engine::GenRequest gr, bool stream,
              const HttpRequest& req, HttpResponse& res) {
  const int64_t n_ctx = r->model->scheduler->n_ctx();
  const int64_t n = static_cast<int64_t>(gr.prompt.size());
  if (n + 1 > n_ctx) {
    SendError(res, 400,
              "the prompt has " + std::to_string(n) + " tokens but the context holds " + std::to_string(n_ctx) +
                  " (including at least one generated token)",
              "context_length_exceeded");
    return;
  }
  if (n == 0) {
    SendError(res, 400, "the prompt is empty");
    return;
  }
  gr.max_tokens = std::min(gr.max_tokens, n_ctx - n);
  r->start_us = ctx->env->NowMicros();
  r->stream = r->model->scheduler->Submit(std::move(gr));
  // A client that leaves (in the queue, while its prompt is read, while it
  // generates) ends the request at the engine's next step, freeing its slot.
  req.OnDisconnect([stream = r->stream] { stream->Cancel(); });
  if (stream) {
    AnswerStream(r, res);
  } else {
    AnswerWhole(*r, res);
  }
}

std::shared_ptr<Reply> NewReply(ServerContext* ctx, Kind kind, std::shared_ptr<ServedModel> model) {
  auto r = std::make_shared<Reply>();
  r->kind = kind;
  r->ctx = ctx;
  r->model = std::move(model);
  uint64_t rnd = 0;
  (void)ctx->env->RandomBytes(&rnd, sizeof(rnd));
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(rnd));
  r->id = std::string(kind == Kind::kChat ? "chatcmpl-" : "cmpl-") + buf;
  r->created = static_cast<int64_t>(ctx->env->WallMicros() / 1000000);
  return r;
}

// The request's tenant (api_keys.h RequestTenant), noted in its log line.
// A trusted key's bad `user` is the client's error (400 naming 'user').
Result<std::string> TenantOf(const HttpRequest& req, const GenerationFields& g, HttpResponse& res) {
  Result<std::string> tenant = RequestTenant(req.caller, g.user);
  if (tenant.ok() && !tenant->empty()) res.log_note = "tenant " + *tenant;
  return tenant;
}

engine::GenRequest BaseRequest(ServerContext* ctx, const GenerationFields& g, std::string tenant) {
  engine::GenRequest gr;
  gr.tenant = std::move(tenant);
  gr.tenant_isolated = ctx->options.prompt_cache_sharing_tenant;
  gr.sampling = g.sampling;
  gr.max_tokens = g.max_tokens.value_or(INT64_MAX);
  gr.stop = g.stop;
  gr.cache_prompt = g.cache_prompt;
  gr.ignore_eos = g.ignore_eos;
  return gr;
}

void ChatCompletions(ServerContext* ctx, const HttpRequest& req, HttpResponse& res) {
  auto call = ParseChatCall(ctx, req);
  if (!call.ok()) return SendError(res, call.status());
  const ChatRequest& cr = call->request;
  auto tenant = TenantOf(req, cr.gen, res);
  if (!tenant.ok()) return SendJson(res, ErrorJson(tenant.status(), "user"), 400);
  const engine::LoadedModel& lm = *call->model->model;
  const ImageInputOptions image_options = ImageOptions(ctx->options);
  std::vector<engine::PromptImage> images;
  ImageError image_error;
  if (!PreparePictures(call->prompt, lm, call->model->name, image_options, &images, &image_error)) {
    return SendError(res, image_error.http, image_error.message);
  }
  auto encoded = lm.EncodeChatWithImages(call->prompt, std::move(images), image_options.mode);
  if (!encoded.ok()) return SendError(res, encoded.status());
  const std::vector<int32_t>* prompt = &encoded->tokens;
  auto r = NewReply(ctx, Kind::kChat, call->model);
  if (lm.thinks && cr.reasoning_format != "none") {
    // Inside a block from the start when the prompt opened one.
    const auto& p = *prompt;
    const size_t tail = std::min<size_t>(p.size(), 8);
    r->reasoning = std::make_unique<ReasoningSplitter>(PromptOpensThinkBlock(
        lm.tokenizer->Decode(std::span<const int32_t>(p.data() + p.size() - tail, tail))));
  }
  r->logprobs = cr.logprobs;
  r->include_usage = cr.gen.include_usage;
  engine::GenRequest gr = BaseRequest(ctx, cr.gen, std::move(*tenant));
  gr.prompt = std::move(encoded->tokens);
  gr.images = std::move(encoded->images);
  gr.has_images = !gr.images.empty() && image_options.mode == engine::ImageCacheMode::kFresh;
  gr.message_starts = lm.MessageStarts(gr.prompt, /*generation_prompt=*/true, &gr.reply_start);
  gr.logprobs = cr.logprobs;
  gr.top_logprobs = cr.top_logprobs;
  Generate(ctx, r, std::move(gr), cr.gen.stream, req, res);
}

void Completions(ServerContext* ctx, const HttpRequest& req, HttpResponse& res) {
  auto body = ParseJsonBody(req.body);
  if (!body.ok()) return SendError(res, body.status());
  auto cr = ParseCompletionRequest(*body);
  if (!cr.ok()) return SendError(res, cr.status());
  auto tenant = TenantOf(req, cr->gen, res);
  if (!tenant.ok()) return SendJson(res, ErrorJson(tenant.status(), "user"), 400);
  auto model = ResolveModel(ctx, cr->gen.model);
  if (!model.ok()) return SendError(res, model.status());
  const auto& tok = *(*model)->model->tokenizer;
  auto r = NewReply(ctx, Kind::kText, *model);
  r->logprobs = cr->logprobs >= 0;
  r->include_usage = cr->gen.include_usage;
  engine::GenRequest gr = BaseRequest(ctx, cr->gen, std::move(*tenant));
  if (cr->prompt_is_tokens) {
    for (int32_t t : cr->prompt_tokens) {
      if (t >= tok.n_vocab()) {
        return SendError(res, 400, "'prompt' token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                                       std::to_string(tok.n_vocab()) + ")");
      }
    }
    gr.prompt = cr->prompt_tokens;
    if (cr->echo) r->echo = tok.Decode(gr.prompt);
  } else {
    gr.prompt = tok.Encode(cr->prompt_text, /*add_special=*/true, /*parse_special=*/true);
    if (cr->echo) r->echo = cr->prompt_text;
  }
  gr.logprobs = r->logprobs;
  gr.top_logprobs = std::max(cr->logprobs, 0);
  Generate(ctx, r, std::move(gr), cr->gen.stream, req, res);
}

}  // namespace

void AddOpenAiRoutes(ServerContext* ctx, std::vector<Route>* routes) {
  routes->push_back({"POST", "/v1/chat/completions", "OpenAI chat completion (stream with \"stream\": true)", false,
                     [ctx](const HttpRequest& req, HttpResponse& res) { ChatCompletions(ctx, req, res); }});
  routes->push_back({"POST", "/v1/completions", "OpenAI text completion (prompt string or token ids)", false,
                     [ctx](const HttpRequest& req, HttpResponse& res) { Completions(ctx, req, res); }});
}

}  // namespace mx::server
