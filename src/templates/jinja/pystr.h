// Python string semantics over UTF-8 text: code-point decoding, str.isspace(),
// case mapping, repr() of str and float. Chat templates index, slice, strip and
// print strings the way Python does; these helpers give the same results on
// UTF-8 bytes.
//
// Invalid UTF-8 never fails here: a byte that does not start a valid sequence
// decodes as U+FFFD, so every function is total. Thread-safe (pure functions).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mx::jinja::py {

// Decodes UTF-8 into code points (invalid bytes become U+FFFD).
std::u32string Decode(std::string_view utf8);
// Appends the UTF-8 encoding of `cp` (surrogates and values above U+10FFFF as U+FFFD).
void AppendUtf8(std::string& out, char32_t cp);
std::string Encode(std::u32string_view cps);
// True when `text` is well-formed UTF-8 (no overlongs, surrogates or values > U+10FFFF).
bool IsValidUtf8(std::string_view text);
// Number of code points (what Python's len() gives).
size_t CodePointCount(std::string_view utf8);
bool IsAscii(std::string_view text);

// Python str.isspace() for one code point.
bool IsSpace(char32_t cp);
// str.isprintable() for one code point (controls, format characters, separators
// other than the ASCII space and private-use characters are not printable).
bool IsPrintable(char32_t cp);
bool IsDigit(char32_t cp);  // str.isdigit(): ASCII digits and other decimal digits
bool IsAlpha(char32_t cp);  // letters of the scripts in the case tables, CJK, kana, hangul
bool IsUpper(char32_t cp);  // has a lowercase mapping
bool IsLower(char32_t cp);  // has an uppercase mapping (or is ß)
char32_t ToUpper(char32_t cp);
char32_t ToLower(char32_t cp);

// str.upper() / str.lower() / str.title() / str.capitalize() / str.swapcase().
// Case mapping covers ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic;
// other scripts are returned unchanged (Python maps a few more).
std::string Upper(std::string_view s);
std::string Lower(std::string_view s);
std::string Title(std::string_view s);
std::string Capitalize(std::string_view s);

// Python's float(str): surrounding whitespace, a sign, '_' between digits,
// "inf" / "infinity" / "nan" in any case; nullopt where Python raises ValueError.
std::optional<double> ParseFloat(std::string_view s);
// Python's int(str, base) for base 0 (prefix decides) or 2..36, with the same
// syntax; nullopt where Python raises ValueError. `*overflow` is set when the
// text is a valid integer outside int64 (Python would give a big int).
std::optional<int64_t> ParseInt(std::string_view s, int base, bool* overflow);

// repr() of a str: single quotes unless the text has ' and no ", escapes as Python.
std::string ReprString(std::string_view s);
// repr() / str() of a float: shortest round-trip digits, "1.0", "1e+16", "inf", "nan".
std::string ReprFloat(double v);

}  // namespace mx::jinja::py
