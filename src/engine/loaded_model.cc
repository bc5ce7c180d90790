#include "engine/loaded_model.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "core/logging.h"
#include "templates/jinja/json.h"
#include "tokenizer/gguf_vocab.h"

namespace mx::engine {
namespace {

using jinja::Value;

// The text parts of an OpenAI content list, joined (other parts skipped).
std::string JoinTextParts(const Value& parts) {
  std::string text;
  for (const Value& part : parts.as_list()) {
    const Value* type = part.Field("type");
    const Value* t = part.Field("text");
    if (type != nullptr && type->is_string() && type->as_string() == "text" && t != nullptr &&
        t->is_string()) {
      text += t->as_string();
    }
  }
  return text;
}

// A copy of `message` with `key` set to `value` (order kept).
Value WithField(const Value& message, std::string_view key, Value value) {
  jinja::Dict d = message.as_dict();
  d.Set(Value::String(std::string(key)), std::move(value));
  return Value::FromDict(std::move(d));
}

// The local calendar time of `env`'s wall clock.
jinja::DateTime LocalNow(Env* env) {
  const time_t t = static_cast<time_t>((env != nullptr ? env->WallMicros() : 0) / 1000000);
  struct tm tm_local = {};
  localtime_r(&t, &tm_local);
  return {tm_local.tm_year + 1900, tm_local.tm_mon + 1, tm_local.tm_mday,
          tm_local.tm_hour,        tm_local.tm_min,     tm_local.tm_sec};
}

// The family renderer's messages: role, content (text parts joined, None
// as "") and reasoning_content.
Result<std::vector<templates::ChatMessage>> FamilyMessages(const Value& messages) {
  if (!messages.is_sequence()) return Status::InvalidArgument("'messages' must be a list");
  std::vector<templates::ChatMessage> out;
  for (size_t i = 0; i < messages.as_list().size(); ++i) {
    const Value& m = messages.as_list()[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    const Value* role = m.Field("role");
    if (role == nullptr || !role->is_string()) {
      return Status::InvalidArgument(where + ".role must be a string");
    }
    templates::ChatMessage msg;
    msg.role = role->as_string();
    const Value* content = m.Field("content");
    if (content == nullptr || content->is_none()) {
      // empty
    } else if (content->is_string()) {
      msg.content = content->as_string();
    } else if (content->is_sequence()) {
      msg.content = JoinTextParts(*content);
    } else {
      return Status::InvalidArgument(where + ".content must be a string or a list of parts");
    }
    if (const Value* r = m.Field("reasoning_content"); r != nullptr && r->is_string()) {
      msg.reasoning_content = r->as_string();
    }
    out.push_back(std::move(msg));
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<LoadedModel>> LoadedModel::Load(Env* env, const std::string& path,
                                                       const ModelLoadOptions& options) {
  auto cancelled = [&options] { return options.cancel != nullptr && options.cancel->load(); };
  const Status cancel_status =
      Status::ResourceExhausted("loading " + path + " was cancelled (the server is stopping)");
  auto m = std::make_unique<LoadedModel>();
  m->env = env;
  if (cancelled()) return cancel_status;
  MX_ASSIGN_OR_RETURN(m->model, models::Model::Load(env, path, options.load));
  if (cancelled()) return cancel_status;
  MX_ASSIGN_OR_RETURN(m->tokenizer, tokenizer::TokenizerFromGguf(m->model->file()));
  if (cancelled()) return cancel_status;
  if (m->tokenizer->n_vocab() != m->model->config().n_vocab) {
    return Status::InvalidArgument(path + ": tokenizer has " + std::to_string(m->tokenizer->n_vocab()) +
                                   " tokens, the model's output has " +
                                   std::to_string(m->model->config().n_vocab));
  }
  if (m->tokenizer->bos_id() >= 0) m->bos_text = m->tokenizer->TokenText(m->tokenizer->bos_id());
  if (m->tokenizer->eos_id() >= 0) m->eos_text = m->tokenizer->TokenText(m->tokenizer->eos_id());
  std::string jinja;
  if (m->model->file().Find("tokenizer.chat_template") != nullptr) {
    MX_ASSIGN_OR_RETURN(jinja, m->model->file().GetString("tokenizer.chat_template"));
  }
  if (!options.template_override.empty()) {
    MX_ASSIGN_OR_RETURN(m->family, templates::FamilyFromName(options.template_override));
    m->family_detected = true;
    m->template_fallback_reason =
        "the template family is forced to '" + options.template_override + "'";
    return m;
  }
  m->thinks = jinja.find("</think>") != std::string::npos;
  m->chat_template_text = jinja;
  if (auto family = templates::DetectFamily(jinja)) {
    m->family = *family;
    m->family_detected = true;
  }
  const std::string fallback = "built-in '" + std::string(templates::FamilyName(m->family)) + "'";
  if (jinja.empty()) {
    m->template_fallback_reason = "the file has no tokenizer.chat_template";
  } else if (auto parsed = jinja::Template::Parse(jinja); !parsed.ok()) {
    m->template_fallback_reason =
        "tokenizer.chat_template does not parse: " + parsed.status().message();
  } else {
    m->chat_template = std::move(parsed).value();
    m->template_knows_developer = jinja.find("developer") != std::string::npos;
    // Like llama.cpp's capability probe: a template that prints a text
    // part's text takes content as a list of parts; others (that fail on a
    // list, or print its Python repr) get the text parts joined.
    const std::string probe = "mx-content-part-probe";
    ChatPrompt p;
    p.messages = Value::List({Value::MakeDict(
        {{"role", Value::String("user")},
         {"content", Value::List({Value::MakeDict(
                         {{"type", Value::String("text")}, {"text", Value::String(probe)}})})}})});
    p.now = jinja::DateTime{};
    p.should_stop = cancelled;
    m->template_takes_content_parts = true;
    jinja::RenderErrorInfo info;
    auto out = m->RenderTemplate(p, &info);
    if (info.stopped) return cancel_status;
    m->template_takes_content_parts = out.ok() && out->find(probe) != std::string::npos &&
                                      out->find("'text': '" + probe) == std::string::npos;
    if (!out.ok() && out.status().code() == Status::Code::kResourceExhausted) {
      // A template that cannot render one short message within the engine's
      // limits would fail (or cost a whole budget) on every chat: refuse it.
      m->chat_template.reset();
      m->template_knows_developer = false;
      m->template_takes_content_parts = false;
      m->template_fallback_reason = "tokenizer.chat_template is refused: rendering a one-message "
                                    "chat exceeds a limit of the template engine: " +
                                    out.status().message();
    }
  }
  if (!m->chat_template) {
    MX_LOG(kWarn) << path << ": " << m->template_fallback_reason << "; rendering chats with the "
                  << fallback << " template";
  } else if (!m->family_detected) {
    MX_LOG(kInfo) << path << ": chat template family not recognised; stop strings and message "
                  << "markers are ChatML's";
  }
  return m;
}

Result<std::string> LoadedModel::RenderChat(const ChatPrompt& prompt) const {
  if (!prompt.messages.is_sequence()) return Status::InvalidArgument("'messages' must be a list");
  if (chat_template) {
    jinja::RenderErrorInfo info;
    auto text = RenderTemplate(prompt, &info);
    if (text.ok()) return text;
    // Every render failure is the request's (its messages do not fit the
    // template) and goes back to the client as such.
    if (info.raised) return Status::InvalidArgument("chat template: " + text.status().message());
    return Status::InvalidArgument(text.status().message());
  }
  MX_ASSIGN_OR_RETURN(std::vector<templates::ChatMessage> messages,
                      FamilyMessages(prompt.messages));
  templates::RenderOptions options;
  options.add_generation_prompt = prompt.add_generation_prompt;
  if (const Value* t = prompt.kwargs.Field("enable_thinking"); t != nullptr && !t->is_none()) {
    options.enable_thinking = t->Truthy();
  }
  if (const Value* e = prompt.kwargs.Field("reasoning_effort"); e != nullptr && e->is_string()) {
    options.reasoning_effort = e->as_string();
  }
  // What the template's strftime_now("%Y-%m-%d") would print (harmony).
  const jinja::DateTime now = prompt.now ? *prompt.now : LocalNow(env);
  char date[48];
  std::snprintf(date, sizeof(date), "%04d-%02d-%02d", now.year, now.month, now.day);
  options.current_date = date;
  return templates::Render(family, messages, options);
}

Result<std::string> LoadedModel::RenderTemplate(const ChatPrompt& prompt,
                                                jinja::RenderErrorInfo* info) const {
  if (!prompt.messages.is_sequence()) return Status::InvalidArgument("'messages' must be a list");
  // Messages as the template expects them (see the members' comments).
  jinja::ValueList messages;
  for (const Value& m : prompt.messages.as_list()) {
    Value msg = m;
    if (const Value* content = msg.Field("content");
        content != nullptr && content->is_sequence() && !template_takes_content_parts) {
      msg = WithField(msg, "content", Value::String(JoinTextParts(*content)));
    }
    if (const Value* role = msg.Field("role"); role != nullptr && role->is_string() &&
                                                role->as_string() == "developer" &&
                                                !template_knows_developer) {
      msg = WithField(msg, "role", Value::String("system"));
    }
    messages.push_back(std::move(msg));
  }
  // The render context: transformers' variables, then each kwarg (a key
  // that names one of them replaces it, in its place). Dict::Set is O(1), so
  // the merge is linear in the number of kwargs.
  jinja::Dict vars;
  auto set = [&vars](std::string_view key, Value value) {
    vars.Set(Value::String(std::string(key)), std::move(value));
  };
  set("messages", Value::List(std::move(messages)));
  set("tools", prompt.tools);
  set("documents", Value::None());
  set("add_generation_prompt", Value::Bool(prompt.add_generation_prompt));
  set("bos_token", Value::String(bos_text));
  set("eos_token", Value::String(eos_text));
  if (prompt.kwargs.is_dict()) {
    for (const auto& [k, v] : prompt.kwargs.as_dict().items()) {
      if (k.is_string()) vars.Set(k, v);
    }
  }
  jinja::RenderOptions options;
  options.now = prompt.now ? *prompt.now : LocalNow(env);
  options.should_stop = prompt.should_stop;
  return chat_template->Render(Value::FromDict(std::move(vars)), options, info);
}

std::vector<int32_t> LoadedModel::EncodePrompt(std::string_view text,
                                               std::span<const tokenizer::Tokenizer::Span> literal) const {
  std::vector<int32_t> tokens = tokenizer->EncodeWithLiterals(text, /*add_special=*/true, literal);
  const int32_t bos = tokenizer->bos_id();
  if (tokenizer->add_bos() && bos >= 0 && tokens.size() >= 2 && tokens[0] == bos &&
      tokens[1] == bos) {
    tokens.erase(tokens.begin());
  }
  return tokens;
}

namespace {

constexpr std::string_view kAsciiSpace = " \t\n\r\v\f";

// The forms a template may print a message's text in: as is, or trimmed.
std::vector<std::string_view> PrintedForms(std::string_view s) {
  auto rstrip = [](std::string_view v) {
    const size_t e = v.find_last_not_of(kAsciiSpace);
    return e == std::string_view::npos ? std::string_view() : v.substr(0, e + 1);
  };
  auto lstrip = [](std::string_view v) {
    const size_t b = v.find_first_not_of(kAsciiSpace);
    return b == std::string_view::npos ? std::string_view() : v.substr(b);
  };
  return {s, lstrip(rstrip(s)), rstrip(s), lstrip(s)};
}

}  // namespace

Result<std::vector<int32_t>> LoadedModel::EncodeChat(const ChatPrompt& prompt) const {
  MX_ASSIGN_OR_RETURN(RenderedChat r, RenderForTokens(prompt));
  return EncodePrompt(r.text, r.literal);
}

Result<LoadedModel::RenderedChat> LoadedModel::RenderForTokens(const ChatPrompt& prompt) const {
  MX_ASSIGN_OR_RETURN(std::string text, RenderChat(prompt));
  // Message text holding a control token's text ("<|im_end|>" typed in a
  // message) must stay text, or a user could end a turn or start one as
  // another role. Find where the template printed each such text: render
  // once more with each replaced by a placeholder; the placeholder render
  // is then the real one with the texts cut out, which locates them.
  std::vector<std::string> risky;
  std::string marker = "mxliteral";
  if (prompt.messages.is_list()) {
    auto dump = jinja::ToJson(prompt.messages);
    while (dump.ok() && dump->find(marker) != std::string::npos) marker += "q";
  }
  ChatPrompt masked = prompt;
  auto mask = [&](const Value& v) -> std::optional<Value> {
    if (!v.is_string() || !tokenizer->ContainsControlText(v.as_string())) return std::nullopt;
    risky.push_back(v.as_string());
    return Value::String(marker + std::to_string(risky.size() - 1) + "z");
  };
  if (prompt.messages.is_list()) {
    jinja::ValueList messages;
    for (const Value& m : prompt.messages.as_list()) {
      Value msg = m;
      if (const Value* c = msg.Field("content")) {
        if (auto p = mask(*c)) {
          msg = WithField(msg, "content", *p);
        } else if (c->is_sequence()) {
          jinja::ValueList parts;
          for (const Value& part : c->as_list()) {
            const Value* t = part.Field("text");
            auto p = t != nullptr ? mask(*t) : std::nullopt;
            parts.push_back(p ? WithField(part, "text", *p) : part);
          }
          msg = WithField(msg, "content", Value::List(std::move(parts)));
        }
      }
      messages.push_back(std::move(msg));
    }
    masked.messages = Value::List(std::move(messages));
  }
  if (risky.empty()) return RenderedChat{std::move(text), {}};
  auto with_markers = RenderChat(masked);
  // Split the placeholder render at its placeholders and walk the real one.
  std::vector<tokenizer::Tokenizer::Span> literal;
  bool located = with_markers.ok();
  if (located) {
    const std::string& p = *with_markers;
    size_t p_at = 0, t_at = 0;
    for (;;) {
      const size_t hit = p.find(marker, p_at);
      const size_t seg_end = hit == std::string::npos ? p.size() : hit;
      const std::string_view segment(p.data() + p_at, seg_end - p_at);
      if (text.compare(t_at, segment.size(), segment) != 0) {
        located = false;
        break;
      }
      t_at += segment.size();
      if (hit == std::string::npos) {
        located = t_at == text.size();
        break;
      }
      const size_t num_end = p.find('z', hit + marker.size());
      const size_t k = num_end == std::string::npos
                           ? risky.size()
                           : std::strtoul(p.c_str() + hit + marker.size(), nullptr, 10);
      if (k >= risky.size()) {
        located = false;
        break;
      }
      p_at = num_end + 1;
      // The segment after the placeholder (up to the next one) must follow
      // the printed text in the real render.
      const size_t next_hit = p.find(marker, p_at);
      const std::string_view after(p.data() + p_at,
                                   (next_hit == std::string::npos ? p.size() : next_hit) - p_at);
      bool found = false;
      for (std::string_view form : PrintedForms(risky[k])) {
        if (text.compare(t_at, form.size(), form) == 0 &&
            text.compare(t_at + form.size(), after.size(), after) == 0) {
          literal.push_back({t_at, t_at + form.size()});
          t_at += form.size();
          found = true;
          break;
        }
      }
      if (!found) {
        located = false;
        break;
      }
    }
  }
  if (!located) {
    // The template did more than print or trim the text: its control-token
    // text is tokenized as such (what other servers always do).
    MX_LOG(kWarn) << "chat template: could not locate a message's text in the prompt; its "
                     "special-token text is tokenized as special tokens";
    literal.clear();
  }
  return RenderedChat{std::move(text), std::move(literal)};
}

Result<std::vector<int32_t>> LoadedModel::EncodeChat(
    const std::vector<templates::ChatMessage>& messages,
    const templates::RenderOptions& options) const {
  ChatPrompt prompt;
  jinja::ValueList list;
  for (const templates::ChatMessage& m : messages) {
    std::vector<std::pair<std::string, Value>> fields = {{"role", Value::String(m.role)},
                                                         {"content", Value::String(m.content)}};
    if (m.reasoning_content)
      fields.emplace_back("reasoning_content", Value::String(*m.reasoning_content));
    list.push_back(Value::MakeDict(std::move(fields)));
  }
  prompt.messages = Value::List(std::move(list));
  prompt.add_generation_prompt = options.add_generation_prompt;
  if (options.enable_thinking) {
    prompt.kwargs = Value::MakeDict({{"enable_thinking", Value::Bool(*options.enable_thinking)}});
  }
  return EncodeChat(prompt);
}
std::vector<int64_t> LoadedModel::MessageStarts(std::span<const int32_t> prompt,
                                                bool generation_prompt,
                                                int64_t* reply_start) const {
  if (reply_start != nullptr) *reply_start = 0;
  const templates::MessageMarkers markers = templates::MessageStartMarkers(family);
  std::vector<int32_t> ids;
  for (const std::string& text : markers.texts) {
    std::vector<int32_t> t = tokenizer->Encode(text, /*add_special=*/false, /*parse_special=*/true);
    if (t.size() == 1) ids.push_back(t[0]);
  }
  std::vector<int64_t> out;
  if (ids.empty()) return out;
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (std::find(ids.begin(), ids.end(), prompt[i]) != ids.end())
      out.push_back(static_cast<int64_t>(i));
  }
  if (generation_prompt && markers.in_generation_prompt && !out.empty()) {
    if (reply_start != nullptr) *reply_start = out.back();
    out.pop_back();
  }
  return out;
}

}  // namespace mx::engine
