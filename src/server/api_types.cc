#include "server/api_types.h"

#include <algorithm>
#include <cmath>

#include "templates/jinja/json.h"

namespace mx::server {
namespace {

Status TypeError(const std::string& field, const char* expected) {
  return Status::InvalidArgument("'" + field + "' must be " + expected);
}

Result<std::string> GetString(const Json& j, const std::string& field, bool required) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) {
    if (required) return Status::InvalidArgument("'" + field + "' is required");
    return std::string();
  }
  if (!it->is_string()) return TypeError(field, "a string");
  return it->get<std::string>();
}

// Reads an optional number field into `out` within [min, max].
Status GetNumber(const Json& j, const std::string& field, double min, double max, std::optional<double>* out) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_number()) return TypeError(field, "a number");
  double v = it->get<double>();
  if (!(v >= min && v <= max)) {
    return Status::InvalidArgument("'" + field + "' must be in [" + Json(min).dump() + ", " + Json(max).dump() +
                                   "], got " + it->dump());
  }
  *out = v;
  return Status::Ok();
}

Status GetInt(const Json& j, const std::string& field, int64_t min, int64_t max, std::optional<int64_t>* out) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_number_integer()) return TypeError(field, "an integer");
  const bool too_big = it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX);
  const int64_t v = too_big ? INT64_MAX : it->get<int64_t>();
  if (too_big || v < min || v > max) {
    return Status::InvalidArgument("'" + field + "' must be in [" + std::to_string(min) + ", " +
                                   std::to_string(max) + "], got " + it->dump());
  }
  *out = v;
  return Status::Ok();
}

Status GetBool(const Json& j, const std::string& field, bool* out) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_boolean()) return TypeError(field, "a boolean");
  *out = it->get<bool>();
  return Status::Ok();
}

Result<std::vector<int32_t>> GetTokenArray(const Json& v, const std::string& field) {
  if (!v.is_array()) return TypeError(field, "an array of token ids");
  std::vector<int32_t> out;
  for (const auto& t : v) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX) {
      return TypeError(field, "an array of non-negative integer token ids");
    }
    out.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return out;
}

Status ParseGeneration(const Json& j, GenerationFields* g) {
  MX_ASSIGN_OR_RETURN(g->model, GetString(j, "model", false));
  MX_ASSIGN_OR_RETURN(g->user, GetString(j, "user", false));
  std::optional<double> d;
  std::optional<int64_t> i;
  g->sampling.temperature = 1.0f;  // OpenAI's default
  MX_RETURN_IF_ERROR(GetNumber(j, "temperature", 0, 2, &d));
  if (d) g->sampling.temperature = static_cast<float>(*d);
  d.reset();
  MX_RETURN_IF_ERROR(GetNumber(j, "top_p", 0, 1, &d));
  if (d) {
    if (*d <= 0) return Status::InvalidArgument("'top_p' must be in (0, 1], got " + Json(*d).dump());
    g->sampling.top_p = static_cast<float>(*d);
  }
  d.reset();
  MX_RETURN_IF_ERROR(GetNumber(j, "min_p", 0, 0.999999, &d));
  if (d) g->sampling.min_p = static_cast<float>(*d);
  d.reset();
  MX_RETURN_IF_ERROR(GetNumber(j, "repeat_penalty", 1e-6, 100, &d));
  if (d) {
    g->sampling.repeat_penalty = static_cast<float>(*d);
  }
  MX_RETURN_IF_ERROR(GetInt(j, "top_k", 0, 1 << 30, &i));
  if (i) g->sampling.top_k = static_cast<int>(*i);
  i.reset();
  MX_RETURN_IF_ERROR(GetInt(j, "seed", INT64_MIN, INT64_MAX, &i));
  if (i) g->sampling.seed = static_cast<uint64_t>(*i);
  i.reset();
  MX_RETURN_IF_ERROR(GetInt(j, "max_tokens", 1, int64_t{1} << 30, &g->max_tokens));
  MX_RETURN_IF_ERROR(GetInt(j, "max_completion_tokens", 1, int64_t{1} << 30, &i));
  if (i) g->max_tokens = i;
  i.reset();
  MX_RETURN_IF_ERROR(GetInt(j, "n", 1, engine::kMaxChoices, &i));
  if (i) g->n = static_cast<int>(*i);
  i.reset();
  d.reset();
  MX_RETURN_IF_ERROR(GetNumber(j, "frequency_penalty", -2, 2, &d));
  if (d) g->sampling.frequency_penalty = static_cast<float>(*d);
  d.reset();
  MX_RETURN_IF_ERROR(GetNumber(j, "presence_penalty", -2, 2, &d));
  if (d) g->sampling.presence_penalty = static_cast<float>(*d);
  d.reset();
  MX_RETURN_IF_ERROR(GetInt(j, "repeat_last_n", -1, 1 << 30, &i));
  if (i) g->sampling.repeat_last_n = static_cast<int>(*i);
  i.reset();
  MX_RETURN_IF_ERROR(ParseLogitBias(j, &g->sampling.logit_bias));

  if (auto it = j.find("stop"); it != j.end() && !it->is_null()) {
    if (it->is_string()) {
      g->stop.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      if (it->size() > 16) return Status::InvalidArgument("'stop' holds at most 16 strings");
      for (const auto& s : *it) {
        if (!s.is_string()) return TypeError("stop", "a string or an array of strings");
        g->stop.push_back(s.get<std::string>());
      }
    } else {
      return TypeError("stop", "a string or an array of strings");
    }
  }
  MX_RETURN_IF_ERROR(GetBool(j, "stream", &g->stream));
  MX_RETURN_IF_ERROR(GetBool(j, "cache_prompt", &g->cache_prompt));
  MX_RETURN_IF_ERROR(GetBool(j, "ignore_eos", &g->ignore_eos));
  if (auto it = j.find("stream_options"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return TypeError("stream_options", "an object");
    MX_RETURN_IF_ERROR(GetBool(*it, "include_usage", &g->include_usage));
  }
  return engine::ValidateSamplingParams(g->sampling);
}

Result<std::string> MessageContent(const Json& content, size_t index, const std::string& model) {
  const std::string field = "messages[" + std::to_string(index) + "].content";
  if (content.is_null()) return std::string();
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return TypeError(field, "a string or an array of content parts");
  std::string text;
  for (size_t p = 0; p < content.size(); ++p) {
    const Json& part = content[p];
    const std::string pf = field + "[" + std::to_string(p) + "]";
    if (!part.is_object()) return TypeError(pf, "an object");
    MX_ASSIGN_OR_RETURN(std::string type, GetString(part, "type", true));
    if (type == "text") {
      MX_ASSIGN_OR_RETURN(std::string t, GetString(part, "text", true));
      text += t;
    } else if (type == "image_url" || type == "input_image" || type == "image") {
      // The picture itself is loaded with the model known (image_input.h);
      // here only its shape: image_url.url, or image_url / image a string.
      const std::string key = part.contains("image_url") ? "image_url" : "image";
      const auto it = part.find(key);
      const bool named = it != part.end() &&
                         (it->is_string() || (it->is_object() && it->contains("url") && (*it)["url"].is_string()));
      if (!named) return TypeError(pf + ".image_url", "an object with a string 'url' (or a URL string)");
    } else {
      return Status::InvalidArgument(pf + ".type '" + type + "' is not supported (expected \"text\" or \"image_url\")");
    }
  }
  return text;
}

}  // namespace

Result<Json> ParseJsonBody(const std::string& body) {
  Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument("invalid JSON in the request body");
  if (!j.is_object()) return Status::InvalidArgument("the request body must be a JSON object");
  return j;
}

Result<ChatRequest> ParseChatRequest(const Json& j) {
  ChatRequest r;
  MX_RETURN_IF_ERROR(ParseGeneration(j, &r.gen));
  auto it = j.find("messages");
  if (it == j.end()) return Status::InvalidArgument("'messages' is required");
  if (!it->is_array() || it->empty()) return TypeError("messages", "a non-empty array");
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& m = (*it)[i];
    if (!m.is_object()) return TypeError("messages[" + std::to_string(i) + "]", "an object");
    templates::ChatMessage msg;
    MX_ASSIGN_OR_RETURN(msg.role, GetString(m, "role", true));
    // Any role reaches the template (tool, ipython, ...); the built-in
    // families refuse the ones they do not know.
    if (msg.role.empty())
      return TypeError("messages[" + std::to_string(i) + "].role", "a non-empty string");
    if (auto rc = m.find("reasoning_content");
        rc != m.end() && !rc->is_null() && !rc->is_string()) {
      return TypeError("messages[" + std::to_string(i) + "].reasoning_content", "a string");
    }
    if (auto tc = m.find("tool_calls"); tc != m.end() && !tc->is_null() && !tc->is_array()) {
      return TypeError("messages[" + std::to_string(i) + "].tool_calls", "an array");
    }
    MX_ASSIGN_OR_RETURN(msg.content, MessageContent(m.contains("content") ? m["content"] : Json(), i, r.gen.model));
    r.messages.push_back(std::move(msg));
  }
  if (auto k = j.find("chat_template_kwargs"); k != j.end() && !k->is_null()) {
    if (!k->is_object()) return TypeError("chat_template_kwargs", "an object");
    if (k->size() > kMaxTemplateKwargs) {
      return Status::InvalidArgument("'chat_template_kwargs' has " + std::to_string(k->size()) +
                                     " keys; at most " + std::to_string(kMaxTemplateKwargs) +
                                     " are accepted");
    }
  }
  MX_RETURN_IF_ERROR(GetBool(j, "logprobs", &r.logprobs));
  std::optional<int64_t> top;
  MX_RETURN_IF_ERROR(GetInt(j, "top_logprobs", 0, 20, &top));
  if (top) {
    if (!r.logprobs && *top > 0) return Status::InvalidArgument("'top_logprobs' requires 'logprobs': true");
    r.top_logprobs = static_cast<int>(*top);
  }
  if (j.contains("reasoning_format") && !j["reasoning_format"].is_null()) {
    MX_ASSIGN_OR_RETURN(r.reasoning_format, GetString(j, "reasoning_format", false));
    if (r.reasoning_format == "auto") r.reasoning_format = "deepseek";
    if (r.reasoning_format != "deepseek" && r.reasoning_format != "none") {
      return Status::InvalidArgument("'reasoning_format' is '" + r.reasoning_format +
                                     "': expected none, deepseek or auto");
    }
  }
  return r;
}

Result<engine::ChatPrompt> ChatPromptFromBody(const std::string& body) {
  auto parsed = jinja::ParseJson(body);
  if (!parsed.ok() || !parsed->is_dict())
    return Status::InvalidArgument("invalid JSON in the request body");
  const jinja::Dict& d = parsed->as_dict();
  engine::ChatPrompt p;
  if (const jinja::Value* m = d.Find("messages"); m != nullptr && m->is_sequence()) p.messages = *m;
  if (const jinja::Value* t = d.Find("tools"); t != nullptr && t->is_sequence()) p.tools = *t;
  if (const jinja::Value* k = d.Find("chat_template_kwargs"); k != nullptr && k->is_dict())
    p.kwargs = *k;
  return p;
}

Result<CompletionRequest> ParseCompletionRequest(const Json& j) {
  CompletionRequest r;
  MX_RETURN_IF_ERROR(ParseGeneration(j, &r.gen));
  if (!r.gen.max_tokens) r.gen.max_tokens = 16;  // OpenAI's default for completions
  auto it = j.find("prompt");
  if (it == j.end() || it->is_null()) return Status::InvalidArgument("'prompt' is required");
  if (it->is_string()) {
    r.prompt_text = it->get<std::string>();
  } else if (it->is_array() && it->size() == 1 && (*it)[0].is_string()) {
    r.prompt_text = (*it)[0].get<std::string>();
  } else if (it->is_array()) {
    MX_ASSIGN_OR_RETURN(r.prompt_tokens, GetTokenArray(*it, "prompt"));
    r.prompt_is_tokens = true;
  } else {
    return TypeError("prompt", "a string or an array of token ids");
  }
  std::optional<int64_t> lp;
  MX_RETURN_IF_ERROR(GetInt(j, "logprobs", 0, 5, &lp));
  if (lp) r.logprobs = static_cast<int>(*lp);
  MX_RETURN_IF_ERROR(GetBool(j, "echo", &r.echo));
  return r;
}

Result<TokenizeRequest> ParseTokenizeRequest(const Json& j) {
  TokenizeRequest r;
  MX_ASSIGN_OR_RETURN(r.model, GetString(j, "model", false));
  MX_ASSIGN_OR_RETURN(r.content, GetString(j, "content", true));
  MX_RETURN_IF_ERROR(GetBool(j, "add_special", &r.add_special));
  MX_RETURN_IF_ERROR(GetBool(j, "parse_special", &r.parse_special));
  MX_RETURN_IF_ERROR(GetBool(j, "with_pieces", &r.with_pieces));
  return r;
}

Result<DetokenizeRequest> ParseDetokenizeRequest(const Json& j) {
  DetokenizeRequest r;
  MX_ASSIGN_OR_RETURN(r.model, GetString(j, "model", false));
  auto it = j.find("tokens");
  if (it == j.end()) return Status::InvalidArgument("'tokens' is required");
  MX_ASSIGN_OR_RETURN(r.tokens, GetTokenArray(*it, "tokens"));
  return r;
}

Json UsageJson(const engine::GenEvent& ev) {
  return {{"prompt_tokens", ev.prompt_tokens},
          {"completion_tokens", ev.completion_tokens},
          {"total_tokens", ev.prompt_tokens + ev.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", ev.cached_tokens}}}};
}

Json TimingsJson(const engine::GenEvent& ev) {
  // Microsecond steps keep the JSON short; negative values cannot come from
  // a steady clock, but a rate must never divide by zero.
  auto ms = [](double v) { return std::round(std::max(v, 0.0) * 1000.0) / 1000.0; };
  auto per_token_ms = [&](double t_ms, int64_t n) { return n > 0 ? ms(t_ms / static_cast<double>(n)) : 0.0; };
  auto per_second = [](double t_ms, int64_t n) {
    return t_ms > 0 ? std::round(1e3 * static_cast<double>(n) / t_ms * 100.0) / 100.0 : 0.0;
  };
  const engine::RequestTimings& t = ev.timings;
  const int64_t prompt_n = std::max<int64_t>(ev.prompt_tokens - ev.cached_tokens, 0);
  return {{"cache_n", ev.cached_tokens},
          {"cache_ms", ms(t.cache_ms)},
          {"queue_ms", ms(t.queue_ms)},
          {"prompt_n", prompt_n},
          {"prompt_ms", ms(t.prompt_ms)},
          {"prompt_per_token_ms", per_token_ms(t.prompt_ms, prompt_n)},
          {"prompt_per_second", per_second(t.prompt_ms, prompt_n)},
          {"predicted_n", ev.completion_tokens},
          {"predicted_ms", ms(t.predicted_ms)},
          {"predicted_per_token_ms", per_token_ms(t.predicted_ms, ev.completion_tokens)},
          {"predicted_per_second", per_second(t.predicted_ms, ev.completion_tokens)}};
}

}  // namespace mx::server
