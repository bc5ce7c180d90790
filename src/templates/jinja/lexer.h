// Lexer: template text -> tokens, as jinja2's lexer does it with the settings
// transformers uses (trim_blocks=True, lstrip_blocks=True,
// keep_trailing_newline=False, default delimiters):
//   * \r\n and \r become \n; one newline at the very end of the text is dropped;
//   * "{%-" / "{{-" / "{#-" strip the whitespace before the tag, "-%}" / "-}}" /
//     "-#}" the whitespace after it; "{%+" / "+%}" turn lstrip / trim off;
//   * trim_blocks: the first newline after "%}" or "#}" is removed;
//   * lstrip_blocks: spaces and tabs before "{%" or "{#" at the start of a line
//     are removed;
//   * {% raw %}...{% endraw %} is data; comments are dropped.
// Pure function of its input; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace mx::jinja {

enum class TokenType : uint8_t {
  kData,        // text between tags (text)
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,        // identifier (text)
  kString,      // string literal, unescaped (text)
  kInteger,     // (int_value)
  kFloat,       // (float_value)
  kOperator,    // + - * / // % ** ~ == != < <= > >= = . : | , ( ) [ ] { } ; (text)
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;    // 1-based line in the template
  int column = 1;  // 1-based column (bytes)
};

// Tokenizes `source`. Fails with InvalidArgument "line N: ..." on an
// unterminated tag, comment, string or raw block, an unexpected character, an
// unbalanced bracket or an integer literal out of range.
Result<std::vector<Token>> Tokenize(std::string_view source);

}  // namespace mx::jinja
