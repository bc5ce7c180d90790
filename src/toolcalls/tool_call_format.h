// Tool-call syntaxes of chat models, and which one a chat template uses.
//
// A model writes its tool calls in the syntax its chat template renders them
// in the history (docs/tool_calls.md has one worked example per family).
// DetectToolCallFormat reads the template source (the GGUF's
// tokenizer.chat_template) and names the family from substrings only that
// family's templates contain; it never renders the template.
//
// Pure functions; thread-safe.
#pragma once

#include <string_view>

namespace mx::toolcalls {

enum class ToolCallFormat {
  kNone,  // no tool-call syntax this library parses (the reply is all content)
  // <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
  // (Qwen 2.5, Qwen 3, QwQ, Granite 4, Reka, Hermes 2/3)
  kHermes,
  // <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n</function>\n</tool_call>
  // (Qwen3-Coder, Qwen 3.5)
  kQwen3Xml,
  // <seed:tool_call>\n<function=NAME>\n<parameter=P>VALUE</parameter>\n</function>\n</seed:tool_call>
  kSeedOss,
  // {"name": ..., "parameters": {...}} at the start of the reply, or after
  // <|python_tag|> (Llama 3.1 / 3.2 / 3.3 custom tools)
  kLlama3Json,
  // [TOOL_CALLS][{"name": ..., "arguments": {...}, "id": ...}] (Mistral Nemo, v3 tekken)
  kMistralJson,
  // [TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{...} with [CALL_ID] optional
  // (Mistral Small 3.2, Devstral, Ministral 3)
  kMistralArgs,
  // gpt-oss harmony: <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}
  // (<|call|> ends the generation); the analysis channel is reasoning
  kHarmony,
  // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜>
  // <｜tool▁calls▁end｜> (DeepSeek R1 and its distills)
  kDeepSeekR1,
  // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜><｜tool▁calls▁end｜>
  // (DeepSeek V3.1)
  kDeepSeekV31,
  // <｜DSML｜function_calls> (V3.2) or <｜DSML｜tool_calls> (V4) with
  // <｜DSML｜invoke name="NAME"><｜DSML｜parameter name="P"
  // string="true|false">VALUE</｜DSML｜parameter>
  kDeepSeekDsml,
  // <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{...}
  // <|tool_call_end|><|tool_calls_section_end|> (Kimi K2)
  kKimiK2,
  // <tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n</tool_call> (GLM 4.5 - 4.7)
  kGlm,
  // <function name="NAME"><param name="P">VALUE</param></function> (MiniCPM 5)
  kMiniCpm,
  // <function=NAME>{...}</function> (Functionary v3.1, Llama 3.1 based)
  kFunctionaryV31,
  // functools[{"name": ..., "arguments": {...}}] at the start of the reply (Firefunction v2)
  kFirefunction,
  // <|tool_call|>[{"name": ..., "arguments": {...}}] (Granite 3.x)
  kGranite,
  // Action:\n```json\n[{"tool_name": ..., "parameters": {...}}]\n``` (Command R / R+ tool_use)
  kCommandR,
};

// Stable lower-case name ("hermes", "qwen3_xml", ...; "none").
std::string_view ToolCallFormatName(ToolCallFormat format);

// The family of `jinja_template` (the template's source text); kNone when it
// renders no tool-call syntax this library knows (including templates that
// take no tools).
ToolCallFormat DetectToolCallFormat(std::string_view jinja_template);

// The syntax carries the reply's reasoning itself (kHarmony: the analysis
// channel), so its parser splits reasoning from content in every reply,
// with tools or without (tool_calls.h: parse_calls false).
bool FormatCarriesReasoning(ToolCallFormat format);

}  // namespace mx::toolcalls
