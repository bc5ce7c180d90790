// Utility routes: POST /tokenize, POST /detokenize, POST /apply-template
// (llama.cpp server shapes), GET /health (liveness and the build), GET /metrics (Prometheus
// text), GET /api/routes (the table).
#include "server/api_types.h"
#include "server/http_util.h"
#include "server/server.h"
#include "version/build_info.h"

namespace mx::server {
namespace {

// /tokenize replies of more tokens than this are streamed (chunked).
constexpr size_t kTokenizeWholeReplyTokens = 16384;

void Tokenize(ServerContext* ctx, const HttpRequest& req, HttpResponse& res) {
  auto body = ParseJsonBody(req.body);
  if (!body.ok()) return SendError(res, body.status());
  auto tr = ParseTokenizeRequest(*body);
  if (!tr.ok()) return SendError(res, tr.status());
  auto model = ResolveModel(ctx, tr->model);
  if (!model.ok()) return SendError(res, model.status());
  std::shared_ptr<ServedModel> served = *model;
  auto ids = std::make_shared<std::vector<int32_t>>(
      served->model->tokenizer->Encode(tr->content, tr->add_special, tr->parse_special));
  const bool pieces = tr->with_pieces;
  // The reply is written as text, token by token (a JSON document of
  // millions of small objects costs hundreds of bytes a token, and a body of
  // a few MB of byte-level text is millions of tokens); a long one streams
  // in pieces of about 64 KiB, paced by the client (chunked).
  auto write = [served, ids, pieces](size_t from, size_t max_bytes, std::string* out) {
    const auto& tok = *served->model->tokenizer;
    size_t i = from;
    for (; i < ids->size() && out->size() < max_bytes; ++i) {
      if (i > 0) *out += ',';
      const std::string id = std::to_string((*ids)[i]);
      if (pieces) {
        *out += "{\"id\":" + id + ",\"piece\":" + Dump(Json(tok.TokenToPiece((*ids)[i]))) + "}";
      } else {
        *out += id;
      }
    }
    return i;
  };
  const std::string tail = "],\"model\":" + Dump(Json(served->name)) + "}";
  if (ids->size() <= kTokenizeWholeReplyTokens) {
    std::string out = "{\"tokens\":[";
    write(0, SIZE_MAX, &out);
    res.status = 200;
    res.set_content(out + tail, "application/json");
    return;
  }
  res.status = 200;
  res.set_stream("application/json", [write, tail, ids](BodyWriter& w) {
    std::string out = "{\"tokens\":[";
    for (size_t next = 0; next < ids->size();) {
      next = write(next, 64 << 10, &out);
      if (!w.Write(out)) return;  // the client left
      out.clear();
    }
    w.Write(tail);
  });
}

void Detokenize(ServerContext* ctx, const HttpRequest& req, HttpResponse& res) {
  auto body = ParseJsonBody(req.body);
  if (!body.ok()) return SendError(res, body.status());
  auto dr = ParseDetokenizeRequest(*body);
  if (!dr.ok()) return SendError(res, dr.status());
  auto model = ResolveModel(ctx, dr->model);
  if (!model.ok()) return SendError(res, model.status());
  const auto& tok = *(*model)->model->tokenizer;
  for (int32_t id : dr->tokens) {
    if (id >= tok.n_vocab()) {
      return SendError(res, 400, "'tokens': id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                     std::to_string(tok.n_vocab()) + ")");
    }
  }
  SendJson(res, {{"content", tok.Decode(dr->tokens)}, {"model", (*model)->name}});
}

// A chat completion body -> {"prompt": the text its chat template renders}
// (the prompt chat completions tokenize, BOS text included when the
// template writes it).
void ApplyTemplate(ServerContext* ctx, const HttpRequest& req, HttpResponse& res) {
  auto call = ParseChatCall(ctx, req);
  if (!call.ok()) return SendError(res, call.status());
  auto text = call->model->model->RenderChat(call->prompt);
  if (!text.ok()) return SendError(res, text.status());
  SendJson(res, {{"prompt", *text}, {"model", call->model->name}});
}

// {"status": "ok", "version", "commit", "build_type", "kernels", "cpu_features"}: the
// build and the kernels' CPU path, so a bug report can quote them.
void Health(HttpResponse& res) {
  const version::BuildInfo& b = version::Build();
  const version::KernelInfo k = version::Kernels();
  SendJson(res, {{"status", "ok"},
                 {"version", b.version},
                 {"commit", b.git_commit},
                 {"build_type", b.build_type},
                 {"kernels", k.path},
                 {"cpu_features", k.features}});
}

}  // namespace

void AddUtilityRoutes(ServerContext* ctx, std::vector<Route>* routes) {
  routes->push_back({"POST", "/tokenize", "{\"content\": text} -> {\"tokens\": [ids]}", false,
                     [ctx](const HttpRequest& req, HttpResponse& res) { Tokenize(ctx, req, res); }});
  routes->push_back(
      {"POST", "/apply-template",
       "chat completion body (messages, tools?, chat_template_kwargs?) -> {\"prompt\": "
       "the rendered chat template}",
       false, [ctx](const HttpRequest& req, HttpResponse& res) { ApplyTemplate(ctx, req, res); }});
  routes->push_back({"POST", "/detokenize", "{\"tokens\": [ids]} -> {\"content\": text}", false,
                     [ctx](const HttpRequest& req, HttpResponse& res) { Detokenize(ctx, req, res); }});
  routes->push_back({"GET", "/health",
                     "liveness and the build: {\"status\": \"ok\", \"version\", \"commit\", "
                     "\"build_type\", \"kernels\", \"cpu_features\"}",
                     false, [](const HttpRequest&, HttpResponse& res) { Health(res); }});
  routes->push_back({"GET", "/metrics", "Prometheus counters and the time-to-first-token histogram", false,
                     [ctx](const HttpRequest&, HttpResponse& res) {
                       res.set_content(ctx->metrics->Render() + RenderCacheMetrics(ctx), "text/plain; version=0.0.4");
                     },
                     /*cache_stats=*/true});
  // The route table itself (help text), built lazily from the routes vector.
  routes->push_back({"GET", "/api/routes", "this table: method, path, help, mutates, access", false,
                     [ctx, routes](const HttpRequest&, HttpResponse& res) {
                       Json list = Json::array();
                       for (const Route& r : *routes) {
                         list.push_back({{"method", r.method}, {"path", r.pattern}, {"help", r.help},
                                         {"mutates", r.mutates},
                                         {"access", RouteAccessName(AccessOf(r, ctx->options))}});
                       }
                       SendJson(res, {{"routes", list}});
                     }});
}

}  // namespace mx::server
