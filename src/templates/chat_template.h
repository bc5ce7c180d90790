// Chat templates: OpenAI-style `messages` -> prompt text, for a small set of
// built-in template families. The server renders chats with the model's own
// Jinja template (templates/jinja, through engine::LoadedModel); these
// families are the fallback when a file's template is missing or does not
// parse, and always supply the message-start markers and end-of-turn strings.
// The family of a model is recognised from distinctive substrings of its GGUF
// `tokenizer.chat_template` (DetectFamily), or forced by name (FamilyFromName).
// Each family reproduces its official template for plain text conversations
// (system / user / assistant); the exact text reproduced is written down next
// to each renderer in chat_template.cc.
//
// Prefix property (the prompt cache relies on it). For a conversation
// u1, a1, u2, a2, ... let R(m..., gen) be Render of those messages:
//   (A) R(u1..uk, ak; gen=false) is a string prefix of R(u1..uk, ak, u(k+1); *).
//   (B) R(u1..uk; gen=true) + ak + EndOfTurnStrings()[0] is a prefix of R(u1..u(k+1); *).
//   (C) R(u1..uk; gen=true) is a prefix of R(u1..u(k+1); *).
// They hold for every family (templates_test.cc checks each), except:
//   - llama3, gemma trim message content, so (B) needs ak == trim(ak);
//   - mistral writes ' ' + ak in the history, so (B) holds for ' ' + ak;
//   - qwen3: (A) never holds (a final assistant message gets an empty <think>
//     block that later turns drop); (B) holds only for replies without a <think>
//     block; with enable_thinking = false neither (B) nor (C) holds (the
//     generation prompt's empty think block is not part of the history).
//   - harmony (gpt-oss): only (C) holds. A reply is a run of messages
//     ("<|channel|>analysis<|message|>...<|end|><|start|>assistant<|channel|>
//     final<|message|>..."), of which the history keeps the final one only,
//     as "<|channel|>final<|message|>" + ak + "<|end|>" after the generation
//     prompt's "<|start|>assistant" ((B) holds for that text); a final
//     assistant message ends with "<|return|>" instead of "<|end|>" (no (A)).
//   - qwen3.5: none of (A), (B), (C) holds in general. Its generation prompt
//     ends with "<think>\n" ("<think>\n\n</think>\n\n" with enable_thinking =
//     false), which past turns do not have, and a final assistant message gets a
//     think block that later turns drop. What holds, with P = R(u1..uk; gen=true)
//     less that think text (so P ends with "<|im_start|>assistant\n"), for any
//     enable_thinking on either side:
//       (C') P is a prefix of R(u1..u(k+1); *);
//       (B') P + ak + EndOfTurnStrings()[0] is a prefix of R(u1..u(k+1); *) when
//            ak == trim(ak) and ak has no "</think>" (a reply with a think block
//            is kept as the trimmed text after its last "</think>").
//
// Deliberate differences from the official templates (everything else is
// checked against Python jinja2 renderings in testdata/jinja_goldens.json):
//   - phi3 writes no eos_token after the last message when add_generation_prompt
//     is false (it would break (A)); llama.cpp's built-in phi3 does the same;
//   - mistral and gemma refuse a lone system message (their templates drop it);
//   - "developer" is rendered as "system"; tool roles and tool calls are not
//     supported (InvalidArgument); qwen3.5's image and video parts neither
//     (content is text);
//   - chatml does not insert Qwen2.5's default system prompt; llama3 does not
//     write Llama 3.1's "Cutting Knowledge Date" system header.
//   - harmony renders the system message of gpt-oss's template with its
//     default model identity and without tools (RenderOptions has the date and
//     the reasoning effort).
//
// Everything here is a pure function of its arguments: thread-safe, no I/O.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace mx::templates {

// One chat message. `content` is the text of the message (the caller joins the
// text parts of an OpenAI content array).
struct ChatMessage {
  // "system", "user" or "assistant"; "developer" (OpenAI's newer name for the
  // system role) is accepted and rendered as "system". Anything else is an error.
  std::string role;
  std::string content;
  // Only read by kQwen3 and kQwen35 (their templates' `message.reasoning_content`):
  // when set on an assistant message it is the reasoning, and `content` is taken
  // as is (no <think> parsing). Ignored by every other family (gpt-oss's
  // template reads a `thinking` field, which jinja2 goldens of
  // reasoning_content chats do not show).
  std::optional<std::string> reasoning_content;
};

enum class TemplateFamily {
  kChatml, kQwen3, kQwen35, kLlama3, kMistral, kGemma, kPhi3, kHarmony
};

// "chatml", "qwen3", "qwen3.5", "llama3", "mistral", "gemma", "phi3",
// "harmony" (gpt-oss) (ASCII case-insensitive).
// Unknown -> InvalidArgument that lists the valid names.
Result<TemplateFamily> FamilyFromName(std::string_view name);

// The canonical lower-case name of `family` (what FamilyFromName accepts).
std::string_view FamilyName(TemplateFamily family);

// Recognises the family of a Jinja chat template by distinctive substrings.
// Returns nullopt when the template is empty or none of the families fits
// (the caller then falls back to kChatml and logs a warning). Rules, in order:
//   "<|im_start|>" + "<|im_sep|>"        -> nullopt (Phi-4 style, not ChatML)
//   "<|im_start|>" + "<think>" + "<function=" -> kQwen35 (Qwen3.5: XML tool calls)
//   "<|im_start|>" + "<think>"           -> kQwen3 (Qwen3; also QwQ, SmolLM3, LFM2.5
//                                           and MiniCPM5, whose templates differ from
//                                           Qwen3's: closest built-in family)
//   "<|im_start|>"                       -> kChatml (ChatML, Qwen2/2.5)
//   "<|start_header_id|>"                -> kLlama3
//   "<start_of_turn>"                    -> kGemma
//   "<|start|>" + "<|channel|>" + "<|message|>" -> kHarmony (gpt-oss)
//   "<|end|>" + ("<|user|>" or "<|assistant|>") -> kPhi3
//   "[INST]"                             -> kMistral (also Llama 2 and Mistral v3/v7
//                                           templates: closest built-in family)
std::optional<TemplateFamily> DetectFamily(std::string_view jinja);

struct RenderOptions {
  // Append the text that opens the assistant's reply (e.g. "<|im_start|>assistant\n").
  // Mistral's template has none: its prompt simply ends with " [/INST]".
  bool add_generation_prompt = true;
  // Start the text with the family's BOS token text (BosText). Leave false when
  // the tokenizer adds BOS itself, so that BOS is not doubled.
  bool include_bos_text = false;
  // Qwen3 and Qwen3.5 only: false appends "<think>\n\n</think>\n\n" to the
  // generation prompt (thinking switched off). Unset or true: Qwen3 leaves it to
  // the model, Qwen3.5 appends "<think>\n" (the reply starts inside the block).
  std::optional<bool> enable_thinking;
  // Harmony only: the system message's "Current date: " (the template's
  // strftime_now("%Y-%m-%d"); empty: the line is left out) and "Reasoning: "
  // (the template's reasoning_effort; empty: "medium").
  std::string current_date;
  std::string reasoning_effort;
};

// The BOS token text the official template starts with: "<|begin_of_text|>"
// (llama3), "<s>" (mistral), "<bos>" (gemma); "" for chatml, qwen3, qwen3.5,
// phi3 and harmony, whose templates write none.
std::string_view BosText(TemplateFamily family);

// Renders `messages` as prompt text in the format of `family`; the caller owns
// the returned string.
// Errors (InvalidArgument, naming the message index where one applies):
//   - an empty message list;
//   - an unknown role;
//   - kMistral and kGemma: roles out of order. After an optional system message at
//     index 0 they require user, assistant, user, ... (a system message anywhere
//     else is also an error), and at least one user message.
//   - kQwen35: a system message after index 0, or no user message that is a
//     query (every user message is a "<tool_response>...</tool_response>").
//   - kHarmony: an assistant message whose content holds a channel header
//     ("<|channel|>analysis<|message|>" or "<|channel|>final<|message|>"), as
//     gpt-oss's template refuses it.
Result<std::string> Render(TemplateFamily family, std::span<const ChatMessage> messages,
                           const RenderOptions& options);

// Strings that end an assistant turn in this family, for stop detection. The
// first entry is the one the template writes after an assistant message in the
// history (e.g. "<|im_end|>"); the rest are the model's other end tokens.
// Harmony: "<|return|>" (the answer is done) and "<|call|>" (a tool call is);
// its "<|end|>", which the history writes after each message, ends a message
// of the reply but not the reply, so it is none of them.
std::vector<std::string> EndOfTurnStrings(TemplateFamily family);

// How a family's rendered messages begin, for finding message boundaries in
// a prompt's tokens (the prompt cache snapshots hybrid models' state there).
struct MessageMarkers {
  // The special-token texts a rendered message begins with: "<|im_start|>"
  // (chatml, qwen3), "<|start_header_id|>" (llama3), "<start_of_turn>"
  // (gemma: a system message shares the first user turn), "<|system|>",
  // "<|user|>", "<|assistant|>" (phi3), "[INST]" (mistral: user messages
  // only; a system message shares the first), "<|start|>" (harmony: every
  // message, the template's own system message first, a system prompt
  // becoming the developer message).
  std::vector<std::string> texts;
  // The generation prompt begins with one too (every family but mistral).
  bool in_generation_prompt = true;
};
MessageMarkers MessageStartMarkers(TemplateFamily family);

}  // namespace mx::templates
