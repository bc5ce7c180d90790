// OpenAI-compatible generation routes: POST /v1/chat/completions and
// POST /v1/completions: the request is checked and turned into the engine's
// GenRequest here; openai_reply.h answers it, streaming or not.
#include <memory>
#include <string>

#include "core/logging.h"
#include "engine/scheduler.h"
#include "server/api_types.h"
#include "server/http_util.h"
#include "server/image_input.h"
#include "server/openai_reply.h"
#include "server/output_constraint.h"
#include "server/reasoning.h"
#include "server/server.h"

namespace mx::server {
namespace {

// The most logprob entries (tokens, and their top alternatives, of every
// choice) a reply that is not streamed may ask for.
constexpr int64_t kMaxWholeReplyLogprobs = int64_t{1} << 19;

// Shared tail of both routes: checks the prompt, submits, answers.
void Generate(ServerContext* ctx, std::shared_ptr<Reply> r, engine::GenRequest gr, bool stream,
              const HttpRequest& req, HttpResponse& res) {
  const int64_t n_ctx = r->model->scheduler->n_ctx();
  const int64_t n = static_cast<int64_t>(gr.prompt.size());
  if (n + 1 > n_ctx) {
    SendError(res, 400,
              "the prompt has " + std::to_string(n) + " tokens but the context holds " +
                  std::to_string(n_ctx) + " (including at least one generated token)",
              "context_length_exceeded");
    return;
  }
  if (n == 0) {
    SendError(res, 400, "the prompt is empty");
    return;
  }
  gr.max_tokens = std::min(gr.max_tokens, n_ctx - n);
  if (!stream && gr.logprobs) {
    // A whole reply holds every token's logprobs until it is sent: bounded
    // (a stream sends them as they come, paced by its reader).
    const int64_t entries = static_cast<int64_t>(gr.n) * gr.max_tokens * (1 + gr.top_logprobs);
    if (entries > kMaxWholeReplyLogprobs) {
      return SendError(res, 400,
                       "a reply that is not streamed holds at most " + std::to_string(kMaxWholeReplyLogprobs) +
                           " logprobs (n x max_tokens x (1 + top_logprobs)); this request asks for up to " +
                           std::to_string(entries) + " (n " + std::to_string(gr.n) + ", max_tokens " +
                           std::to_string(gr.max_tokens) + ", top_logprobs " + std::to_string(gr.top_logprobs) +
                           "): set a smaller max_tokens, fewer choices or top_logprobs, or \"stream\": true");
    }
  }
  const int32_t n_vocab = r->model->model->tokenizer->n_vocab();
  for (const auto& [id, bias] : gr.sampling.logit_bias) {
    if (id >= n_vocab) {
      return SendError(res, 400,
                       "'logit_bias' token id " + std::to_string(id) +
                           " is outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
    }
  }
  r->n = gr.n;
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
  gr.n = g.n;
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
  auto r = NewReply(ctx, ReplyKind::kChat, call->model);
  // A thinking model whose prompt opened a think block replies inside it.
  const auto& p = *prompt;
  const size_t tail = std::min<size_t>(p.size(), 8);
  const bool think_open =
      lm.thinks && PromptOpensThinkBlock(lm.tokenizer->Decode(
                       std::span<const int32_t>(p.data() + p.size() - tail, tail)));
  const bool split_reasoning = cr.reasoning_format != "none";
  if (lm.thinks && split_reasoning) {
    r->split_reasoning = true;
    r->reasoning_starts_inside = think_open;
  }
  r->logprobs = cr.logprobs;
  r->include_usage = cr.gen.include_usage;
  // The model's reply syntax: its tool calls and, for a syntax that carries
  // the reasoning itself (gpt-oss's harmony channels), the reasoning too.
  const toolcalls::ToolCallFormat syntax = toolcalls::DetectToolCallFormat(lm.chat_template_text);
  if (cr.tools.active()) {
    r->tool_format = syntax;
    Json tools = Json::array();
    for (const ToolSpec& t : cr.tools.tools) {
      tools.push_back(
          {{"type", "function"}, {"function", {{"name", t.name}, {"parameters", t.parameters}}}});
    }
    r->tool_schemas =
        std::make_shared<const toolcalls::ToolSchemas>(toolcalls::ToolSchemas::FromJson(tools));
  } else if (split_reasoning && toolcalls::FormatCarriesReasoning(syntax)) {
    // No tools to call (none given, or tool_choice "none"): the reasoning is
    // split all the same, and a call the model writes stays content.
    r->tool_format = syntax;
    r->parse_calls = false;
  }
  auto constraint =
      BuildOutputConstraint(*call->model, cr.gen.format, &cr.tools, r->tool_format, think_open);
  if (!constraint.ok()) return SendError(res, constraint.status());
  engine::GenRequest gr = BaseRequest(ctx, cr.gen, std::move(*tenant));
  gr.constraint = std::move(constraint).value();
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
  if (Status st = ParseOutputFields(*body, req.body, &cr->gen.format, nullptr); !st.ok())
    return SendError(res, st);
  auto tenant = TenantOf(req, cr->gen, res);
  if (!tenant.ok()) return SendJson(res, ErrorJson(tenant.status(), "user"), 400);
  auto model = ResolveModel(ctx, cr->gen.model);
  if (!model.ok()) return SendError(res, model.status());
  const auto& tok = *(*model)->model->tokenizer;
  auto r = NewReply(ctx, ReplyKind::kText, *model);
  r->logprobs = cr->logprobs >= 0;
  r->include_usage = cr->gen.include_usage;
  auto constraint = BuildOutputConstraint(**model, cr->gen.format, nullptr,
                                          toolcalls::ToolCallFormat::kNone, false);
  if (!constraint.ok()) return SendError(res, constraint.status());
  engine::GenRequest gr = BaseRequest(ctx, cr->gen, std::move(*tenant));
  gr.constraint = std::move(constraint).value();
  if (cr->prompt_is_tokens) {
    for (int32_t t : cr->prompt_tokens) {
      if (t >= tok.n_vocab()) {
        return SendError(res, 400,
                         "'prompt' token id " + std::to_string(t) +
                             " is outside the vocabulary [0, " + std::to_string(tok.n_vocab()) +
                             ")");
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
  routes->push_back(
      {"POST", "/v1/chat/completions", "OpenAI chat completion (stream with \"stream\": true)",
       false,
       [ctx](const HttpRequest& req, HttpResponse& res) { ChatCompletions(ctx, req, res); }});
  routes->push_back(
      {"POST", "/v1/completions", "OpenAI text completion (prompt string or token ids)", false,
       [ctx](const HttpRequest& req, HttpResponse& res) { Completions(ctx, req, res); }});
}

}  // namespace mx::server
