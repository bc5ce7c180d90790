// Built-in chat template families. Each renderer reproduces the official
// Jinja template of its family for plain-text system/user/assistant messages;
// the comment above each one says which template and which of its quirks.
// Where a template uses Jinja's `trim` filter (Python str.strip()), PyStrip
// below strips the same set of Unicode whitespace.
#include "templates/chat_template.h"

#include <array>
#include <cstdint>

namespace mx::templates {
namespace {

enum class Role { kSystem, kUser, kAssistant };

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kSystem: return "system";
    case Role::kUser: return "user";
    case Role::kAssistant: return "assistant";
  }
  return "user";
}

bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// ---------------------------------------------------------------------------
// Python-compatible strip helpers.

// True for the non-ASCII code points Python's str.isspace() accepts.
bool IsUnicodeSpace(uint32_t cp) {
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// Byte length of the whitespace code point that starts at s[i], or 0 when the
// code point there is not whitespace (or not valid UTF-8).
size_t SpaceLenAt(std::string_view s, size_t i) {
  const auto c0 = static_cast<unsigned char>(s[i]);
  if (c0 < 0x80) {
    // \t \n \v \f \r, the separators \x1c-\x1f, and the space itself.
    return ((c0 >= 0x09 && c0 <= 0x0D) || (c0 >= 0x1C && c0 <= 0x20)) ? 1 : 0;
  }
  // Every non-ASCII space is in the BMP: 2- or 3-byte sequences only.
  size_t len = 0;
  uint32_t cp = 0;
  if ((c0 & 0xE0) == 0xC0) {
    len = 2;
    cp = c0 & 0x1F;
  } else if ((c0 & 0xF0) == 0xE0) {
    len = 3;
    cp = c0 & 0x0F;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    const auto ck = static_cast<unsigned char>(s[i + k]);
    if ((ck & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (ck & 0x3F);
  }
  return IsUnicodeSpace(cp) ? len : 0;
}

// Jinja's `trim` filter: Python's str.strip() with no argument.
std::string_view PyStrip(std::string_view s) {
  size_t begin = 0;
  while (begin < s.size()) {
    const size_t n = SpaceLenAt(s, begin);
    if (n == 0) break;
    begin += n;
  }
  size_t end = s.size();
  while (end > begin) {
    // Start of the last code point: step back over at most 3 continuation bytes.
    size_t start = end - 1;
    while (start > begin && end - start < 4 &&
           (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) {
      --start;
    }
    if (SpaceLenAt(s, start) != end - start) break;
    end = start;
  }
  return s.substr(begin, end - begin);
}

// Python's str.lstrip(c) / str.rstrip(c) / str.strip(c) for one character.
std::string_view LStripChar(std::string_view s, char c) {
  while (!s.empty() && s.front() == c) s.remove_prefix(1);
  return s;
}
std::string_view RStripChar(std::string_view s, char c) {
  while (!s.empty() && s.back() == c) s.remove_suffix(1);
  return s;
}
std::string_view StripChar(std::string_view s, char c) { return RStripChar(LStripChar(s, c), c); }

// ---------------------------------------------------------------------------
// Validation.

Result<std::vector<Role>> ParseRoles(TemplateFamily family, std::span<const ChatMessage> messages) {
  if (messages.empty()) {
    return Status::InvalidArgument(
        std::string(FamilyName(family)) +
        " template: the message list is empty (need at least one message)");
  }
  std::vector<Role> roles;
  roles.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& r = messages[i].role;
    if (r == "system" || r == "developer") {
      roles.push_back(Role::kSystem);
    } else if (r == "user") {
      roles.push_back(Role::kUser);
    } else if (r == "assistant") {
      roles.push_back(Role::kAssistant);
    } else {
      // The role comes from the request: quote at most 64 bytes of it.
      const std::string shown = r.size() > 64 ? r.substr(0, 64) + "..." : r;
      return Status::InvalidArgument(std::string(FamilyName(family)) + " template: message " +
                                     std::to_string(i) + " has unknown role \"" + shown +
                                     "\" (expected system, developer, user or assistant)");
    }
  }
  return roles;
}

// Mistral and Gemma raise_exception() unless the roles after an optional
// leading system message go user, assistant, user, ...
Status CheckAlternation(TemplateFamily family, const std::vector<Role>& roles) {
  const std::string name(FamilyName(family));
  const size_t first = roles[0] == Role::kSystem ? 1 : 0;
  if (first == roles.size()) {
    return Status::InvalidArgument(name +
                                   " template: message 0 is a system message and no user "
                                   "message follows (" +
                                   name + " merges the system prompt into the first user message)");
  }
  for (size_t i = first; i < roles.size(); ++i) {
    const Role expected = (i - first) % 2 == 0 ? Role::kUser : Role::kAssistant;
    if (roles[i] == expected) continue;
    if (roles[i] == Role::kSystem) {
      return Status::InvalidArgument(name + " template: message " + std::to_string(i) +
                                     " is a system message, but " + name +
                                     " accepts one only at index 0");
    }
    return Status::InvalidArgument(
        name + " template: message " + std::to_string(i) + " has role \"" +
        std::string(RoleName(roles[i])) + "\" where \"" + std::string(RoleName(expected)) +
        "\" was expected (" + name +
        " requires user/assistant alternation after an optional leading system message)");
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// Renderers. Each appends to `out`.

// ChatML, exactly the template of our reference models (shared/ref) and the
// message loop of Qwen2/Qwen2.5:
//   {% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' +
//   message['content'] + '<|im_end|>' + '\n'}}{% endfor %}
//   {% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}
// Not reproduced: Qwen2.5's default system prompt ("You are Qwen, created by
// Alibaba Cloud. ...") that its template inserts when messages[0] is not a
// system message, and its tool-call/tool-response blocks.
void RenderChatml(std::span<const ChatMessage> messages, const std::vector<Role>& roles,
                  const RenderOptions& options, std::string& out) {
  for (size_t i = 0; i < messages.size(); ++i) {
    out += "<|im_start|>";
    out += RoleName(roles[i]);
    out += '\n';
    out += messages[i].content;
    out += "<|im_end|>\n";
  }
  if (options.add_generation_prompt) out += "<|im_start|>assistant\n";
}

// Qwen3 and Qwen3.5 (Qwen3-*B and Qwen3.5-*B chat_template, non-tool paths)
// share their structure; QwenRules below holds where they differ. Both:
//   last_query_index = index of the last user message whose content is not
//     '<tool_response>...</tool_response>' (Qwen3.5 tests the trimmed content);
//   system and user messages as ChatML; for an assistant message:
//     reasoning = message.reasoning_content if given; else if '</think>' in content:
//       reasoning = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
//       content   = content.split('</think>')[-1].lstrip('\n')
//     with a think block: '<|im_start|>assistant\n<think>\n' + reasoning' + '\n</think>\n\n'
//       + content.lstrip('\n') + '<|im_end|>\n'
//     else: '<|im_start|>assistant\n' + content + '<|im_end|>\n'
//   generation prompt: '<|im_start|>assistant\n', then '<think>\n\n</think>\n\n' when
//     enable_thinking is false.
// So every assistant turn before the last user query loses its <think> block.
// Qwen3 (Qwen3-0.6B's template; not QwQ's, which DetectFamily also maps here):
//   content as given; reasoning' = reasoning.strip('\n'); a think block only for
//   an assistant message after last_query_index that is the last message or has
//   a non-empty reasoning (so a final assistant message always gets one);
//   last_query_index = messages|length - 1 if no user message is a query; a
//   system message after index 0 is rendered like a user message.
// Qwen3.5 (Qwen3.5-4B):
//   every content |trim (Python str.strip()), reasoning' = reasoning|trim; a
//   think block for every assistant message after last_query_index, empty or
//   not; the generation prompt ends with '<think>\n' unless thinking is off;
//   raise_exception when no user message is a query or a system message is not
//   the first message (CheckQwen35 refuses those before rendering).
struct QwenRules {
  bool trim_content;                         // Qwen3.5: |trim on every message content
  bool trim_reasoning;                       // Qwen3.5: |trim; Qwen3: strip('\n')
  bool think_block_needs_last_or_reasoning;  // Qwen3: loop.last or reasoning
  bool generation_prompt_opens_think;        // Qwen3.5: '<think>\n' unless thinking is off
};
constexpr QwenRules kQwen3Rules{/*trim_content=*/false, /*trim_reasoning=*/false,
                                /*think_block_needs_last_or_reasoning=*/true,
                                /*generation_prompt_opens_think=*/false};
constexpr QwenRules kQwen35Rules{/*trim_content=*/true, /*trim_reasoning=*/true,
                                 /*think_block_needs_last_or_reasoning=*/false,
                                 /*generation_prompt_opens_think=*/true};

std::string_view QwenContent(const ChatMessage& m, const QwenRules& rules) {
  return rules.trim_content ? PyStrip(m.content) : std::string_view(m.content);
}

// The index of the last user message that is a query (not a tool response),
// or nullopt when there is none.
std::optional<size_t> LastQueryIndex(std::span<const ChatMessage> messages,
                                     const std::vector<Role>& roles, const QwenRules& rules) {
  for (size_t k = messages.size(); k-- > 0;) {
    if (roles[k] != Role::kUser) continue;
    const std::string_view c = QwenContent(messages[k], rules);
    if (!(c.starts_with("<tool_response>") && c.ends_with("</tool_response>"))) return k;
  }
  return std::nullopt;
}

// An assistant message split as the Qwen templates split it (see above).
struct AssistantParts {
  std::string_view reasoning;
  std::string_view content;
};
AssistantParts SplitReasoning(const ChatMessage& m, std::string_view content) {
  if (m.reasoning_content.has_value()) return {*m.reasoning_content, content};
  const size_t first_close = content.find("</think>");
  if (first_close == std::string_view::npos) return {{}, content};
  std::string_view before = RStripChar(content.substr(0, first_close), '\n');
  if (const size_t open = before.rfind("<think>"); open != std::string_view::npos) {
    before = before.substr(open + std::string_view("<think>").size());
  }
  const size_t last_close = content.rfind("</think>");
  return {LStripChar(before, '\n'),
          LStripChar(content.substr(last_close + std::string_view("</think>").size()), '\n')};
}

// Qwen3.5's raise_exception cases, in the template's order.
Status CheckQwen35(std::span<const ChatMessage> messages, const std::vector<Role>& roles) {
  if (!LastQueryIndex(messages, roles, kQwen35Rules).has_value()) {
    return Status::InvalidArgument(
        "qwen3.5 template: no user query found in messages (it needs a user message that is "
        "not a <tool_response>)");
  }
  for (size_t i = 1; i < roles.size(); ++i) {
    if (roles[i] == Role::kSystem) {
      return Status::InvalidArgument("qwen3.5 template: message " + std::to_string(i) +
                                     " is a system message, but qwen3.5 accepts one only at "
                                     "index 0 (system message must be at the beginning)");
    }
  }
  return Status::Ok();
}

void RenderQwen(std::span<const ChatMessage> messages, const std::vector<Role>& roles,
                const RenderOptions& options, const QwenRules& rules, std::string& out) {
  const size_t n = messages.size();
  const size_t last_query_index = LastQueryIndex(messages, roles, rules).value_or(n - 1);
  for (size_t i = 0; i < n; ++i) {
    const std::string_view content = QwenContent(messages[i], rules);
    if (roles[i] != Role::kAssistant) {
      out += "<|im_start|>";
      out += RoleName(roles[i]);
      out += '\n';
      out += content;
      out += "<|im_end|>\n";
      continue;
    }
    const AssistantParts parts = SplitReasoning(messages[i], content);
    out += "<|im_start|>assistant\n";
    const bool think_block = i > last_query_index && (!rules.think_block_needs_last_or_reasoning ||
                                                      i + 1 == n || !parts.reasoning.empty());
    if (think_block) {
      out += "<think>\n";
      out += rules.trim_reasoning ? PyStrip(parts.reasoning) : StripChar(parts.reasoning, '\n');
      out += "\n</think>\n\n";
      // A no-op for Qwen3.5, whose content has no leading '\n' here.
      out += LStripChar(parts.content, '\n');
    } else {
      out += parts.content;
    }
    out += "<|im_end|>\n";
  }
  if (options.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (options.enable_thinking.has_value() && !*options.enable_thinking) {
      out += "<think>\n\n</think>\n\n";
    } else if (rules.generation_prompt_opens_think) {
      out += "<think>\n";
    }
  }
}

// Llama 3 / 3.x (Meta-Llama-3-8B-Instruct chat_template; the same as llama.cpp's
// built-in "llama3"):
//   {% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'
//      + message['content'] | trim + '<|eot_id|>' %}
//   {% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}
//   ... {% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
// Not reproduced: Llama 3.1+'s always-present system header with "Cutting
// Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n", and tool roles.
void RenderLlama3(std::span<const ChatMessage> messages, const std::vector<Role>& roles,
                  const RenderOptions& options, std::string& out) {
  if (options.include_bos_text) out += "<|begin_of_text|>";
  for (size_t i = 0; i < messages.size(); ++i) {
    out += "<|start_header_id|>";
    out += RoleName(roles[i]);
    out += "<|end_header_id|>\n\n";
    out += PyStrip(messages[i].content);
    out += "<|eot_id|>";
  }
  if (options.add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
}

// Mistral "v1" (the official template of Mistral-7B-Instruct-v0.1/v0.2 and
// Mixtral-8x7B-Instruct after Mistral's 2024 update; llama.cpp "mistral-v1"):
//   {{- bos_token }} for each message after the optional system message:
//   user:      ' [INST] ' + (system_message + '\n\n' if first) + content + ' [/INST]'
//   assistant: ' ' + content + eos_token
// Roles must alternate (raise_exception otherwise). The template has no
// generation prompt: the prompt ends with " [/INST]" and the reply follows.
void RenderMistral(std::span<const ChatMessage> messages, const std::vector<Role>& roles,
                   const RenderOptions& options, std::string& out) {
  if (options.include_bos_text) out += "<s>";
  const bool has_system = roles[0] == Role::kSystem;
  for (size_t i = has_system ? 1 : 0; i < messages.size(); ++i) {
    if (roles[i] == Role::kUser) {
      out += " [INST] ";
      if (has_system && i == 1) {
        out += messages[0].content;
        out += "\n\n";
      }
      out += messages[i].content;
      out += " [/INST]";
    } else {
      out += ' ';
      out += messages[i].content;
      out += "</s>";
    }
  }
}

// Gemma (gemma-3-*-it chat_template; Gemma 1/2 are the same without system support):
//   {{ bos_token }}, first_user_prefix = messages[0]['content'] + '\n\n' if it is a system message
//   '<start_of_turn>' + ('model' if assistant else 'user') + '\n'
//     + (first_user_prefix if loop.first else '') + content | trim + '<end_of_turn>\n'
//   generation prompt: '<start_of_turn>model\n'
// Roles must alternate (raise_exception otherwise). The system text itself is not trimmed.
void RenderGemma(std::span<const ChatMessage> messages, const std::vector<Role>& roles,
                 const RenderOptions& options, std::string& out) {
  if (options.include_bos_text) out += "<bos>";
  const bool has_system = roles[0] == Role::kSystem;
  const size_t first = has_system ? 1 : 0;
  for (size_t i = first; i < messages.size(); ++i) {
    out += roles[i] == Role::kAssistant ? "<start_of_turn>model\n" : "<start_of_turn>user\n";
    if (has_system && i == first) {
      out += messages[0].content;
      out += "\n\n";
    }
    out += PyStrip(messages[i].content);
    out += "<end_of_turn>\n";
  }
  if (options.add_generation_prompt) out += "<start_of_turn>model\n";
}

// Phi-3 / Phi-3.5 (Phi-3.5-mini-instruct chat_template):
//   system (only if its content is non-empty): '<|system|>\n' + content + '<|end|>\n'
//   user: '<|user|>\n' + content + '<|end|>\n'
//   assistant: '<|assistant|>\n' + content + '<|end|>\n'
//   {% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}
// Deliberately not reproduced: the eos_token ("<|endoftext|>") the template appends
// when add_generation_prompt is false (llama.cpp's built-in "phi3" omits it too);
// it would break the prefix property the prompt cache relies on.
void RenderPhi3(std::span<const ChatMessage> messages, const std::vector<Role>& roles,
                const RenderOptions& options, std::string& out) {
  for (size_t i = 0; i < messages.size(); ++i) {
    if (roles[i] == Role::kSystem && messages[i].content.empty()) continue;
    out += "<|";
    out += RoleName(roles[i]);
    out += "|>\n";
    out += messages[i].content;
    out += "<|end|>\n";
  }
  if (options.add_generation_prompt) out += "<|assistant|>\n";
}

// Harmony (openai/gpt-oss-120b chat_template, without tools, builtin_tools
// or model_identity):
//   '<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n'
//     'Knowledge cutoff: 2024-06\nCurrent date: ' + strftime_now("%Y-%m-%d") + '\n\n'
//     'Reasoning: ' + (reasoning_effort or "medium") + '\n\n'
//     '# Valid channels: analysis, commentary, final. Channel must be included for every
//     message.<|end|>'
//   messages[0] system (or developer) is the developer message, written only when its
//     content is not empty: '<|start|>developer<|message|># Instructions\n\n' + content
//     + '\n\n<|end|>'; a system message anywhere else is dropped
//   user: '<|start|>user<|message|>' + content + '<|end|>'
//   assistant: '<|start|>assistant<|channel|>final<|message|>' + content + '<|end|>', and
//     '<|return|>' instead of '<|end|>' for the last message when add_generation_prompt
//     is false (its `thinking` analysis before it is not reproduced: ChatMessage has none)
//   generation prompt: '<|start|>assistant'
// raise_exception on an assistant content holding a channel header (CheckHarmony).
Status CheckHarmony(std::span<const ChatMessage> messages, const std::vector<Role>& roles) {
  for (size_t i = 0; i < messages.size(); ++i) {
    if (roles[i] != Role::kAssistant) continue;
    const std::string& c = messages[i].content;
    if (Contains(c, "<|channel|>analysis<|message|>") ||
        Contains(c, "<|channel|>final<|message|>")) {
      return Status::InvalidArgument(
          "harmony template: message " + std::to_string(i) +
          " holds <|channel|> tags in its content (pass the analysis as reasoning and only the "
          "final message's text as content)");
    }
  }
  return Status::Ok();
}

void RenderHarmony(std::span<const ChatMessage> messages, const std::vector<Role>& roles,
                   const RenderOptions& options, std::string& out) {
  out += "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
         "Knowledge cutoff: 2024-06\n";
  if (!options.current_date.empty()) {
    out += "Current date: ";
    out += options.current_date;
    out += "\n\n";
  }
  out += "Reasoning: ";
  out += options.reasoning_effort.empty() ? std::string_view("medium")
                                          : std::string_view(options.reasoning_effort);
  out += "\n\n# Valid channels: analysis, commentary, final. Channel must be included for every "
         "message.<|end|>";
  const bool has_system = roles[0] == Role::kSystem;
  if (has_system && !messages[0].content.empty()) {
    out += "<|start|>developer<|message|># Instructions\n\n";
    out += messages[0].content;
    out += "\n\n<|end|>";
  }
  for (size_t i = has_system ? 1 : 0; i < messages.size(); ++i) {
    switch (roles[i]) {
      case Role::kSystem:
        break;  // the template renders only assistant, user and tool messages here
      case Role::kUser:
        out += "<|start|>user<|message|>";
        out += messages[i].content;
        out += "<|end|>";
        break;
      case Role::kAssistant:
        out += "<|start|>assistant<|channel|>final<|message|>";
        out += messages[i].content;
        // <|return|> ends a generation: only a chat that ends with the reply has it.
        const bool ends_chat = i + 1 == messages.size() && !options.add_generation_prompt;
        out += ends_chat ? "<|return|>" : "<|end|>";
        break;
    }
  }
  if (options.add_generation_prompt) out += "<|start|>assistant";
}

struct FamilyInfo {
  TemplateFamily family;
  std::string_view name;
};
constexpr std::array<FamilyInfo, 8> kFamilies = {{
    {TemplateFamily::kChatml, "chatml"},
    {TemplateFamily::kQwen3, "qwen3"},
    {TemplateFamily::kQwen35, "qwen3.5"},
    {TemplateFamily::kLlama3, "llama3"},
    {TemplateFamily::kMistral, "mistral"},
    {TemplateFamily::kGemma, "gemma"},
    {TemplateFamily::kPhi3, "phi3"},
    {TemplateFamily::kHarmony, "harmony"},
}};

bool EqualsIgnoreAsciiCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i];
    char y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

}  // namespace

Result<TemplateFamily> FamilyFromName(std::string_view name) {
  std::string valid;
  for (const FamilyInfo& info : kFamilies) {
    if (EqualsIgnoreAsciiCase(name, info.name)) return info.family;
    if (!valid.empty()) valid += ", ";
    valid += info.name;
  }
  return Status::InvalidArgument("unknown chat template family \"" + std::string(name) +
                                 "\" (valid: " + valid + ")");
}

std::string_view FamilyName(TemplateFamily family) {
  for (const FamilyInfo& info : kFamilies) {
    if (info.family == family) return info.name;
  }
  return "unknown";
}

std::optional<TemplateFamily> DetectFamily(std::string_view jinja) {
  if (Contains(jinja, "<|im_start|>")) {
    // Phi-4 puts <|im_sep|> between role and content: not ChatML.
    if (Contains(jinja, "<|im_sep|>")) return std::nullopt;
    if (!Contains(jinja, "<think>")) return TemplateFamily::kChatml;
    // Qwen3.5 writes tool calls as XML (<function=...>); Qwen3 and QwQ as JSON.
    return Contains(jinja, "<function=") ? TemplateFamily::kQwen35 : TemplateFamily::kQwen3;
  }
  if (Contains(jinja, "<|start_header_id|>")) return TemplateFamily::kLlama3;
  if (Contains(jinja, "<start_of_turn>")) return TemplateFamily::kGemma;
  // gpt-oss: messages are <|start|>ROLE<|channel|>CHANNEL<|message|>TEXT<|end|>.
  if (Contains(jinja, "<|start|>") && Contains(jinja, "<|channel|>") &&
      Contains(jinja, "<|message|>")) {
    return TemplateFamily::kHarmony;
  }
  // "<|end|>" separates Phi-3 from Zephyr / GLM, which also use <|user|> and <|assistant|>.
  if (Contains(jinja, "<|end|>") &&
      (Contains(jinja, "<|user|>") || Contains(jinja, "<|assistant|>"))) {
    return TemplateFamily::kPhi3;
  }
  if (Contains(jinja, "[INST]")) return TemplateFamily::kMistral;
  return std::nullopt;
}

std::string_view BosText(TemplateFamily family) {
  switch (family) {
    case TemplateFamily::kLlama3: return "<|begin_of_text|>";
    case TemplateFamily::kMistral: return "<s>";
    case TemplateFamily::kGemma: return "<bos>";
    case TemplateFamily::kChatml:
    case TemplateFamily::kQwen3:
    case TemplateFamily::kQwen35:
    case TemplateFamily::kPhi3:
    case TemplateFamily::kHarmony: return "";
  }
  return "";
}

Result<std::string> Render(TemplateFamily family, std::span<const ChatMessage> messages,
                           const RenderOptions& options) {
  MX_ASSIGN_OR_RETURN(const std::vector<Role> roles, ParseRoles(family, messages));
  if (family == TemplateFamily::kMistral || family == TemplateFamily::kGemma) {
    MX_RETURN_IF_ERROR(CheckAlternation(family, roles));
  }
  if (family == TemplateFamily::kQwen35) MX_RETURN_IF_ERROR(CheckQwen35(messages, roles));
  if (family == TemplateFamily::kHarmony) MX_RETURN_IF_ERROR(CheckHarmony(messages, roles));
  std::string out;
  size_t bytes = 256;
  for (const ChatMessage& m : messages) bytes += m.content.size() + 32;
  out.reserve(bytes);
  switch (family) {
    case TemplateFamily::kChatml: RenderChatml(messages, roles, options, out); break;
    case TemplateFamily::kQwen3: RenderQwen(messages, roles, options, kQwen3Rules, out); break;
    case TemplateFamily::kQwen35: RenderQwen(messages, roles, options, kQwen35Rules, out); break;
    case TemplateFamily::kLlama3: RenderLlama3(messages, roles, options, out); break;
    case TemplateFamily::kMistral: RenderMistral(messages, roles, options, out); break;
    case TemplateFamily::kGemma: RenderGemma(messages, roles, options, out); break;
    case TemplateFamily::kPhi3: RenderPhi3(messages, roles, options, out); break;
    case TemplateFamily::kHarmony: RenderHarmony(messages, roles, options, out); break;
  }
  return out;
}

std::vector<std::string> EndOfTurnStrings(TemplateFamily family) {
  switch (family) {
    case TemplateFamily::kChatml:
    case TemplateFamily::kQwen3:
    case TemplateFamily::kQwen35: return {"<|im_end|>", "<|endoftext|>"};
    case TemplateFamily::kLlama3: return {"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"};
    case TemplateFamily::kMistral: return {"</s>"};
    case TemplateFamily::kGemma: return {"<end_of_turn>", "<eos>"};
    case TemplateFamily::kPhi3: return {"<|end|>", "<|endoftext|>"};
    case TemplateFamily::kHarmony: return {"<|return|>", "<|call|>"};
  }
  return {};
}

MessageMarkers MessageStartMarkers(TemplateFamily family) {
  switch (family) {
    case TemplateFamily::kChatml:
    case TemplateFamily::kQwen3:
    case TemplateFamily::kQwen35:
      return {{"<|im_start|>"}, true};
    case TemplateFamily::kLlama3:
      return {{"<|start_header_id|>"}, true};
    case TemplateFamily::kMistral:
      return {{"[INST]"}, false};
    case TemplateFamily::kGemma:
      return {{"<start_of_turn>"}, true};
    case TemplateFamily::kPhi3:
      return {{"<|system|>", "<|user|>", "<|assistant|>"}, true};
    case TemplateFamily::kHarmony:
      return {{"<|start|>"}, true};
  }
  return {};
}

}  // namespace mx::templates
