// Native request structs of the HTTP API and their JSON parsers. Parsing
// validates everything that comes from the client: wrong types and values
// out of range are InvalidArgument naming the field (-> HTTP 400), so the
// handlers only see well-formed requests. No HTTP here: tested on JSON text.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/loaded_model.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "server/api_output.h"
#include "templates/chat_template.h"

namespace mx::server {

// The most keys a request's chat_template_kwargs may have (each becomes a
// template variable; real templates read a handful). More: 400 naming it.
inline constexpr size_t kMaxTemplateKwargs = 1024;

using Json = nlohmann::json;

// Fields shared by chat and text completions.
struct GenerationFields {
  std::string model;
  engine::SamplingParams sampling;
  std::optional<int64_t> max_tokens;  // unset: until the context is full
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool cache_prompt = true;    // llama.cpp server's switch: false = read everything, pool untouched
  bool ignore_eos = false;     // llama.cpp server's switch: never end at an end-of-generation token
  int n = 1;                   // choices (1..engine::kMaxChoices), all from one read of the prompt
  ResponseFormat format;       // response_format / json_schema / grammar (ParseOutputFields)
  // OpenAI's end-user id. Only a trusted API key's `user` changes the
  // request's tenant (api_keys.h RequestTenant); otherwise it is ignored.
  std::string user;
};

struct ChatRequest {
  GenerationFields gen;
  std::vector<templates::ChatMessage> messages;
  ToolOptions tools;  // tools, tool_choice, parallel_tool_calls (ParseOutputFields)
  bool logprobs = false;
  int top_logprobs = 0;  // 0..20
  // "deepseek" (default; "auto" is the same): a thinking model's
  // <think>...</think>, or a harmony model's (gpt-oss) analysis channel, goes
  // to reasoning_content; "none": left in content (a harmony reply without
  // tools comes back as written; with tools its channels are read for the
  // calls, so the analysis is still reasoning_content).
  std::string reasoning_format = "deepseek";
};

struct CompletionRequest {
  GenerationFields gen;
  std::string prompt_text;              // when the prompt is a string
  std::vector<int32_t> prompt_tokens;   // when it is an array of token ids
  bool prompt_is_tokens = false;
  int logprobs = -1;                    // -1: none; 0..5 top logprobs per token
  bool echo = false;
};

struct TokenizeRequest {
  std::string model;
  std::string content;
  bool add_special = true;
  bool parse_special = true;  // false: special-token text stays text
  bool with_pieces = false;
};

struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
};

// Parses the body text as JSON (InvalidArgument "invalid JSON: ..." when it
// is not an object).
Result<Json> ParseJsonBody(const std::string& body);

// `default_model` fills `model` when the request has none (a single model).
Result<ChatRequest> ParseChatRequest(const Json& j);
Result<CompletionRequest> ParseCompletionRequest(const Json& j);

// The template's view of a chat request body (`messages`, `tools`,
// `chat_template_kwargs`), parsed from the body text with jinja::ParseJson so
// that objects keep the client's key order (nlohmann's Json sorts keys, and
// tojson in templates prints tools in the order it is given). REQUIRES:
// ParseChatRequest and ParseOutputFields accepted the body (they validate those fields).
Result<engine::ChatPrompt> ChatPromptFromBody(const std::string& body);
Result<TokenizeRequest> ParseTokenizeRequest(const Json& j);
Result<DetokenizeRequest> ParseDetokenizeRequest(const Json& j);

// The reply's `usage` object from a request's final event: prompt,
// completion and total tokens and prompt_tokens_details.cached_tokens.
Json UsageJson(const engine::GenEvent& final_event);

// The reply's `timings` object from a request's final event: llama.cpp
// server's fields (cache_n, prompt_n, prompt_ms, prompt_per_token_ms,
// prompt_per_second, predicted_n, predicted_ms, predicted_per_token_ms,
// predicted_per_second) plus cache_ms and queue_ms. cache_n equals
// usage.prompt_tokens_details.cached_tokens and prompt_n + cache_n equals
// usage.prompt_tokens; times are in ms, rounded to the microsecond; a rate
// over no time is 0. See docs/http_api.md "Timings".
Json TimingsJson(const engine::GenEvent& final_event);

}  // namespace mx::server
