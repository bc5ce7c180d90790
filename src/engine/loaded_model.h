// LoadedModel: what serving one GGUF file needs, loaded together: the
// weights (models::Model), the tokenizer, the model's own Jinja chat template
// (tokenizer.chat_template, rendered by mx_jinja) and the built-in template
// family (the fallback renderer, and the source of the message-start markers
// and end-of-turn strings). Shared by `matricxon chat` and the server's model
// manager.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "engine/prompt_images.h"
#include "models/model.h"
#include "templates/chat_template.h"
#include "templates/jinja/template.h"
#include "tokenizer/tokenizer.h"

namespace mx::vision {
class Projector;
}  // namespace mx::vision

namespace mx::engine {

struct ModelLoadOptions {
  models::LoadOptions load;
  // Forces a template family by name ("chatml", "llama3", ...); empty:
  // recognise it from tokenizer.chat_template, ChatML when unrecognised.
  std::string template_override;
  // When set and true, the load stops at its next check (between its
  // stages, and while the template's probe renders) with ResourceExhausted
  // "... cancelled". Read from the loading thread; the owner keeps it alive.
  const std::atomic<bool>* cancel = nullptr;
};

// One chat to render, in the shape transformers' apply_chat_template gives
// the template (see docs/chat_templates.md "How the server uses templates").
struct ChatPrompt {
  // A list of message dicts as the client sent them (role, content as a
  // string, None or a list of parts, tool_calls, reasoning_content, ...).
  jinja::Value messages = jinja::Value::List({});
  // The request's `tools` list, or None.
  jinja::Value tools = jinja::Value::None();
  // chat_template_kwargs: a dict whose keys become template variables
  // (enable_thinking, ...); undefined or None when the request has none.
  jinja::Value kwargs;
  bool add_generation_prompt = true;
  // What strftime_now() formats; unset: the local time from the Env's clock.
  std::optional<jinja::DateTime> now;
  // Asked now and then while the template renders; true stops it (the
  // client left). Empty: renders to the end or its limits.
  std::function<bool()> should_stop;
};

struct LoadedModel {
  std::unique_ptr<models::Model> model;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  templates::TemplateFamily family = templates::TemplateFamily::kChatml;
  bool family_detected = false;  // false: fell back to ChatML
  // The parsed tokenizer.chat_template; nullopt when the file has none, it
  // fails to parse, or a family is forced (template_override): chats then
  // render with `family`. `template_fallback_reason` says why.
  std::optional<jinja::Template> chat_template;
  // Its source text as the file holds it ("" when none or a family is
  // forced): what the server reads the model's tool-call syntax from.
  std::string chat_template_text;
  std::string template_fallback_reason;
  // The template takes message content as a list of parts ({"type": "text",
  // ...}); false: text parts are joined into one string first (the template
  // would fail on a list or print it).
  bool template_takes_content_parts = false;
  // The template names the "developer" role; false: it is sent as "system".
  bool template_knows_developer = false;
  // The model thinks in <think>...</think> blocks (its template or family
  // says so): replies can split reasoning from the answer.
  bool thinks = false;
  std::string bos_text, eos_text;  // the vocabulary's BOS / EOS token texts ("" when none)
  Env* env = nullptr;              // its clock dates strftime_now()
  // Pictures (SPEC §11): the vision projector loaded beside the model, and
  // the text its picture rows are wrapped in. Null: the model takes none.
  std::shared_ptr<const vision::Projector> projector;
  std::string projector_path;
  std::string image_begin_text = "<|vision_start|>", image_end_text = "<|vision_end|>";

  // Loads the weights, the tokenizer and the chat template. A template that
  // is missing, fails to parse, or hits a limit of the template engine
  // (jinja::Limits: max_steps, ...) when rendering a one-message chat is not
  // an error: a warning is logged naming the reason (and the limit) and chats
  // render with the built-in family.
  static Result<std::unique_ptr<LoadedModel>> Load(Env* env, const std::string& path,
                                                   const ModelLoadOptions& options);

  // Renders `prompt` as prompt text with the model's Jinja template (or the
  // family when there is none). Errors are InvalidArgument meant for the
  // client: "chat template: <message>" when the template raised, "chat
  // template line N: ..." for any other render failure (limits included), the
  // family renderer's errors on the fallback path. Thread-safe.
  Result<std::string> RenderChat(const ChatPrompt& prompt) const;
  // RenderChat's Jinja path with the template engine's own errors
  // (ResourceExhausted for a limit) and where they happened. REQUIRES:
  // chat_template.
  Result<std::string> RenderTemplate(const ChatPrompt& prompt, jinja::RenderErrorInfo* info) const;

  // Tokenizes rendered prompt text: special tokens parsed, BOS added when the
  // model asks for it; when the text already starts with the BOS token (many
  // templates write bos_token) the added one is dropped, as llama.cpp does.
  // `literal`: ranges of `text` whose special-token text stays text (user
  // message text; see EncodeChat).
  std::vector<int32_t> EncodePrompt(std::string_view text,
                                    std::span<const tokenizer::Tokenizer::Span> literal = {}) const;

  // RenderChat + EncodePrompt. Text of the messages that holds a control
  // token's text ("<|im_end|>" typed by a user) is tokenized as plain text
  // where the template printed it (as is or trimmed), so it cannot end a
  // turn or open one.
  Result<std::vector<int32_t>> EncodeChat(const ChatPrompt& prompt) const;

  // A chat whose messages hold pictures (content parts of type image_url,
  // input_image or image, SPEC §11): `images` are the pictures in the order
  // their parts appear (messages in order, parts in order; first_row is set
  // here). Each part becomes, in its place, the projector's begin marker
  // tokens, the picture's nx * ny rows (image row tokens of `mode`) and the
  // end marker tokens; the text between pictures is tokenized piece by piece
  // (BOS only before the first), as llama.cpp's mtmd does. InvalidArgument
  // when the counts differ or the template did not print every picture
  // exactly once. (Whether the model takes pictures is the caller's check.)
  struct EncodedChat {
    std::vector<int32_t> tokens;
    std::vector<PromptImage> images;
  };
  Result<EncodedChat> EncodeChatWithImages(const ChatPrompt& prompt, std::vector<PromptImage> images,
                                           ImageCacheMode mode) const;  // chat_images.cc
  // The picture parts of `messages`, in order (their dicts).
  static std::vector<const jinja::Value*> ImageParts(const jinja::Value& messages);  // chat_images.cc

  // The rendered prompt text and the ranges of it that stay text (message
  // text holding a control token's text, see EncodeChat).
  struct RenderedChat {
    std::string text;
    std::vector<tokenizer::Tokenizer::Span> literal;
  };
  Result<RenderedChat> RenderForTokens(const ChatPrompt& prompt) const;

  // Plain text messages: builds the ChatPrompt (role, content and
  // reasoning_content; enable_thinking as a template variable when set;
  // include_bos_text is ignored: the template decides) and encodes it.
  Result<std::vector<int32_t>> EncodeChat(const std::vector<templates::ChatMessage>& messages,
                                          const templates::RenderOptions& options) const;
  // Where the messages of a prompt made by EncodeChat begin (token
  // positions, ascending): the positions of the family's message markers
  // (templates::MessageStartMarkers), without the generation prompt's own
  // when `generation_prompt` (its position goes to *reply_start when given,
  // 0 when the family's generation prompt has no marker). Empty when the vocabulary has no single token
  // for the markers. A marker typed inside a message counts as a start too;
  // the positions only guide where hybrid models keep snapshots, never what
  // a reply is.
  std::vector<int64_t> MessageStarts(std::span<const int32_t> prompt,
                                     bool generation_prompt = true,
                                     int64_t* reply_start = nullptr) const;
};

}  // namespace mx::engine
