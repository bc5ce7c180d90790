#include "toolcalls/tool_call_format.h"

namespace mx::toolcalls {
namespace {

bool Has(std::string_view text, std::string_view needle) {
  return text.find(needle) != std::string_view::npos;
}

}  // namespace

std::string_view ToolCallFormatName(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kNone:
      return "none";
    case ToolCallFormat::kHermes:
      return "hermes";
    case ToolCallFormat::kQwen3Xml:
      return "qwen3_xml";
    case ToolCallFormat::kSeedOss:
      return "seed_oss";
    case ToolCallFormat::kLlama3Json:
      return "llama3_json";
    case ToolCallFormat::kMistralJson:
      return "mistral_json";
    case ToolCallFormat::kMistralArgs:
      return "mistral_args";
    case ToolCallFormat::kHarmony:
      return "harmony";
    case ToolCallFormat::kDeepSeekR1:
      return "deepseek_r1";
    case ToolCallFormat::kDeepSeekV31:
      return "deepseek_v3_1";
    case ToolCallFormat::kDeepSeekDsml:
      return "deepseek_dsml";
    case ToolCallFormat::kKimiK2:
      return "kimi_k2";
    case ToolCallFormat::kGlm:
      return "glm";
    case ToolCallFormat::kMiniCpm:
      return "minicpm";
    case ToolCallFormat::kFunctionaryV31:
      return "functionary_v3_1";
    case ToolCallFormat::kFirefunction:
      return "firefunction";
    case ToolCallFormat::kGranite:
      return "granite";
    case ToolCallFormat::kCommandR:
      return "command_r";
  }
  return "none";
}

bool FormatCarriesReasoning(ToolCallFormat format) { return format == ToolCallFormat::kHarmony; }

// Most specific first: several families share <tool_call> or <function=.
ToolCallFormat DetectToolCallFormat(std::string_view t) {
  if (Has(t, "<|channel|>") && Has(t, "<|message|>")) return ToolCallFormat::kHarmony;
  if (Has(t,
          "\xEF\xBD\x9C"
          "DSML"
          "\xEF\xBD\x9C"))
    return ToolCallFormat::kDeepSeekDsml;  // ｜DSML｜
  // <｜tool▁call▁begin｜>
  constexpr std::string_view kDeepSeekCall =
      "<\xEF\xBD\x9Ctool\xE2\x96\x81"
      "call\xE2\x96\x81"
      "begin\xEF\xBD\x9C>";
  if (Has(t, kDeepSeekCall)) {
    return Has(t, "```json") ? ToolCallFormat::kDeepSeekR1 : ToolCallFormat::kDeepSeekV31;
  }
  if (Has(t, "<|tool_calls_section_begin|>")) return ToolCallFormat::kKimiK2;
  if (Has(t, "[TOOL_CALLS]")) {
    return Has(t, "[ARGS]") ? ToolCallFormat::kMistralArgs : ToolCallFormat::kMistralJson;
  }
  if (Has(t, "<seed:tool_call>")) return ToolCallFormat::kSeedOss;
  if (Has(t, "<arg_key>") && Has(t, "<arg_value>")) return ToolCallFormat::kGlm;
  if (Has(t, "<tool_call>") && Has(t, "<function=") && Has(t, "<parameter="))
    return ToolCallFormat::kQwen3Xml;
  if (Has(t, "<tool_call>")) return ToolCallFormat::kHermes;
  if (Has(t, "<function name=\"") && Has(t, "<param name=\"")) return ToolCallFormat::kMiniCpm;
  if (Has(t, "<function=") && Has(t, "</function>") && Has(t, "<|start_header_id|>"))
    return ToolCallFormat::kFunctionaryV31;
  if (Has(t, "functools[")) return ToolCallFormat::kFirefunction;
  if (Has(t, "<|tool_call|>")) return ToolCallFormat::kGranite;
  if (Has(t, "Action:") && Has(t, "tool_name")) return ToolCallFormat::kCommandR;
  if (Has(t, "<|start_header_id|>") && (Has(t, "<|python_tag|>") || Has(t, "\"parameters\"")))
    return ToolCallFormat::kLlama3Json;
  return ToolCallFormat::kNone;
}

}  // namespace mx::toolcalls
