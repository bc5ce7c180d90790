// The answer to one OpenAI generation request (chat or text completion),
// whole or streamed (SSE ending with `data: [DONE]`), built from the
// engine's events for every choice (`n`). A chat choice's text goes through
// the reasoning splitter (thinking models) and, when tools are active, the
// tool-call parser (message.tool_calls / delta.tool_calls, finish_reason
// "tool_calls"); a harmony model's through its channel parser, tools or not
// (chat_choice.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "server/http_types.h"
#include "server/server.h"
#include "toolcalls/tool_calls.h"

namespace mx::server {

enum class ReplyKind { kChat, kText };

// Everything one reply needs, shared by the handler and the stream provider.
struct Reply {
  ReplyKind kind = ReplyKind::kChat;
  ServerContext* ctx = nullptr;
  std::shared_ptr<ServedModel> model;  // held until the reply is done
  std::shared_ptr<engine::GenStream> stream;
  std::string id;
  int64_t created = 0;
  int n = 1;  // choices
  bool logprobs = false;
  bool include_usage = false;
  std::string echo;  // text completions: prompt text sent first
  // Chats with a thinking model: reasoning_content is split from content,
  // starting inside a think block when the prompt opened one.
  bool split_reasoning = false;
  bool reasoning_starts_inside = false;
  // Chats with tools: calls are parsed from the content in this syntax
  // (kNone: the content stays text), reading parameters by these schemas.
  // Harmony models' chats without tools: the channels are parsed, calls not
  // (parse_calls false).
  toolcalls::ToolCallFormat tool_format = toolcalls::ToolCallFormat::kNone;
  bool parse_calls = true;
  std::shared_ptr<const toolcalls::ToolSchemas> tool_schemas;
  uint64_t start_us = 0;
  bool first_token_seen = false;

  // Metrics bookkeeping for one event.
  void Observe(const engine::GenEvent& ev);
  std::string Piece(int32_t token) const;
};

std::shared_ptr<Reply> NewReply(ServerContext* ctx, ReplyKind kind,
                                std::shared_ptr<ServedModel> model);

// Reads every event, answers one JSON object with a choice per `n`.
void AnswerWhole(Reply& r, HttpResponse& res);

// Streams the reply: one SSE chunk per released piece of a choice, each
// choice's finish reason, the usage (when asked), `timings` on the last
// chunk, then `data: [DONE]`. A client gone ends the request at the
// engine's next step.
void AnswerStream(std::shared_ptr<Reply> r, HttpResponse& res);

}  // namespace mx::server
