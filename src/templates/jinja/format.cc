// Python string formatting: `"%s: %d" % (a, b)` and `"{}: {:>4}".format(a, b)`.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "templates/jinja/ops.h"
#include "templates/jinja/pystr.h"

namespace mx::jinja {
namespace {

struct Spec {
  char fill = ' ';
  char align = '\0';  // < > ^ = or none
  char sign = '\0';   // '+', '-', ' ' when given
  bool alternate = false;
  bool zero = false;
  int width = -1;
  int precision = -1;
  char grouping = '\0';
  char type = '\0';
};

constexpr int kMaxWidth = 1 << 20;

std::string PadTo(std::string s, const Spec& spec, char default_align) {
  const int64_t len = static_cast<int64_t>(py::CodePointCount(s));
  if (spec.width < 0 || len >= spec.width) return s;
  const size_t pad = static_cast<size_t>(spec.width - len);
  const char align = spec.align ? spec.align : default_align;
  std::string fill(1, spec.fill);
  auto rep = [&](size_t n) {
    std::string out;
    for (size_t i = 0; i < n; ++i) out += fill;
    return out;
  };
  if (align == '<') return s + rep(pad);
  if (align == '^') return rep(pad / 2) + s + rep(pad - pad / 2);
  if (align == '=' && !s.empty() && (s[0] == '-' || s[0] == '+' || s[0] == ' ')) {
    return s.substr(0, 1) + rep(pad) + s.substr(1);
  }
  return rep(pad) + s;
}

std::string Group(std::string digits, char sep) {
  if (!sep) return digits;
  std::string out;
  const size_t n = digits.size();
  for (size_t i = 0; i < n; ++i) {
    if (i && (n - i) % 3 == 0) out.push_back(sep);
    out.push_back(digits[i]);
  }
  return out;
}

Result<std::string> FormatInt(int64_t v, const Spec& spec) {
  const char type = spec.type ? spec.type : 'd';
  const uint64_t mag = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  std::string digits;
  char buf[80];
  switch (type) {
    case 'd':
    case 'n':
      std::snprintf(buf, sizeof(buf), "%llu", static_cast<unsigned long long>(mag));
      break;
    case 'x':
      std::snprintf(buf, sizeof(buf), "%llx", static_cast<unsigned long long>(mag));
      break;
    case 'X':
      std::snprintf(buf, sizeof(buf), "%llX", static_cast<unsigned long long>(mag));
      break;
    case 'o':
      std::snprintf(buf, sizeof(buf), "%llo", static_cast<unsigned long long>(mag));
      break;
    case 'b': {
      std::string b;
      uint64_t m = mag;
      do {
        b.insert(b.begin(), static_cast<char>('0' + (m & 1)));
        m >>= 1;
      } while (m);
      std::snprintf(buf, sizeof(buf), "%s", b.c_str());
      break;
    }
    case 'c': {
      if (v < 0 || v > 0x10FFFF) return Status::InvalidArgument("%c arg not in range(0x110000)");
      std::string out;
      py::AppendUtf8(out, static_cast<char32_t>(v));
      if (spec.zero && !spec.align) {
        Spec z = spec;
        z.fill = '0';
        z.align = '=';
        return PadTo(std::move(out), z, '>');
      }
      return PadTo(std::move(out), spec, '<');
    }
    default:
      return TypeError(std::string("Unknown format code '") + type + "' for object of type 'int'");
  }
  digits = Group(buf, spec.grouping);
  if (spec.alternate && type != 'd' && type != 'n') {
    digits = std::string("0") + (type == 'X' ? 'X' : type) + digits;
  }
  std::string sign = v < 0 ? "-" : spec.sign == '+' ? "+" : spec.sign == ' ' ? " " : "";
  std::string s = sign + digits;
  if (spec.zero && !spec.align) {
    Spec z = spec;
    z.fill = '0';
    z.align = '=';
    return PadTo(std::move(s), z, '>');
  }
  return PadTo(std::move(s), spec, '>');
}

Result<std::string> FormatFloat(double v, const Spec& spec) {
  char type = spec.type;
  std::string body;
  char buf[512];
  const int prec = spec.precision < 0 ? 6 : std::min(spec.precision, 200);
  if (type == '\0' && spec.precision < 0) {
    body = py::ReprFloat(std::fabs(v));
  } else {
    double x = std::fabs(v);
    std::string suffix;
    if (type == '%') {
      x *= 100;
      type = 'f';
      suffix = "%";
    }
    const char conv = type == '\0' ? 'g' : type == 'n' ? 'g' : type;
    if (conv != 'e' && conv != 'E' && conv != 'f' && conv != 'F' && conv != 'g' && conv != 'G') {
      return TypeError(std::string("Unknown format code '") + type +
                       "' for object of type 'float'");
    }
    const char fmt[] = {'%', '.', '*', conv, '\0'};
    std::snprintf(buf, sizeof(buf), fmt, prec, x);
    body = buf;
    if (type == '\0' && body.find_first_of(".einf") == std::string::npos) body += ".0";
    body += suffix;
  }
  if (spec.grouping) {
    const size_t dot = body.find_first_of(".e");
    body = Group(body.substr(0, dot), spec.grouping) +
           (dot == std::string::npos ? "" : body.substr(dot));
  }
  std::string sign = std::signbit(v) && !std::isnan(v) ? "-"
                     : spec.sign == '+'                ? "+"
                     : spec.sign == ' '                ? " "
                                                       : "";
  std::string s = sign + body;
  if (spec.zero && !spec.align) {
    Spec z = spec;
    z.fill = '0';
    z.align = '=';
    return PadTo(std::move(s), z, '>');
  }
  return PadTo(std::move(s), spec, '>');
}

Result<Spec> ParseSpec(std::string_view text) {
  Spec spec;
  size_t i = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (text.size() >= 2 && is_align(text[1])) {
    spec.fill = text[0];
    spec.align = text[1];
    i = 2;
  } else if (!text.empty() && is_align(text[0])) {
    spec.align = text[0];
    i = 1;
  }
  if (i < text.size() && (text[i] == '+' || text[i] == '-' || text[i] == ' '))
    spec.sign = text[i++];
  if (i < text.size() && text[i] == '#') {
    spec.alternate = true;
    ++i;
  }
  if (i < text.size() && text[i] == '0') {
    spec.zero = true;
    ++i;
  }
  auto number = [&](int* out) {
    int v = 0;
    bool any = false;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      v = std::min(kMaxWidth, v * 10 + (text[i++] - '0'));
      any = true;
    }
    if (any) *out = v;
  };
  number(&spec.width);
  if (i < text.size() && (text[i] == ',' || text[i] == '_')) spec.grouping = text[i++];
  if (i < text.size() && text[i] == '.') {
    ++i;
    spec.precision = -1;
    number(&spec.precision);
    if (spec.precision < 0) return Status::InvalidArgument("Format specifier missing precision");
  }
  if (i < text.size()) spec.type = text[i++];
  if (i != text.size()) return Status::InvalidArgument("Invalid format specifier");
  return spec;
}

// format(value, spec) as Python's built-in format().
Result<std::string> FormatValue(Runtime& rt, const Value& v, std::string_view spec_text) {
  if (spec_text.empty()) return rt.ToStr(v);
  MX_ASSIGN_OR_RETURN(Spec spec, ParseSpec(spec_text));
  if (v.is_string()) {
    if (spec.sign != '\0')
      return Status::InvalidArgument("Sign not allowed in string format specifier");
    if (spec.align == '=') {
      return Status::InvalidArgument("'=' alignment not allowed in string format specifier");
    }
    if (spec.alternate) {
      return Status::InvalidArgument("Alternate form (#) not allowed in string format specifier");
    }
    if (spec.grouping) {
      return Status::InvalidArgument(std::string("Cannot specify '") + spec.grouping +
                                     "' with 's'.");
    }
    if (spec.type && spec.type != 's') {
      return TypeError(std::string("Unknown format code '") + spec.type +
                       "' for object of type 'str'");
    }
    std::string s = v.as_string();
    if (spec.precision >= 0) {
      const std::u32string cps = py::Decode(s);
      if (cps.size() > static_cast<size_t>(spec.precision)) {
        s = py::Encode(std::u32string_view(cps).substr(0, static_cast<size_t>(spec.precision)));
      }
    }
    return PadTo(std::move(s), spec, '<');
  }
  if (v.is_int() || v.is_bool()) {
    const int64_t i = v.is_bool() ? v.as_bool() : v.as_int();
    const char t = spec.type;
    if (t == 'e' || t == 'E' || t == 'f' || t == 'F' || t == 'g' || t == 'G' || t == '%') {
      return FormatFloat(static_cast<double>(i), spec);
    }
    return FormatInt(i, spec);
  }
  if (v.is_float()) return FormatFloat(v.as_float(), spec);
  return TypeError("unsupported format string passed to " + std::string(v.TypeName()) +
                   ".__format__");
}

// One %-conversion of PercentFormat.
Result<std::string> PercentOne(Runtime& rt, const Value& arg, char conv, const Spec& spec) {
  switch (conv) {
    case 's':
    case 'r':
    case 'a': {
      MX_ASSIGN_OR_RETURN(std::string s, conv == 's' ? rt.ToStr(arg) : rt.ToRepr(arg));
      if (spec.precision >= 0) {
        const std::u32string cps = py::Decode(s);
        if (cps.size() > static_cast<size_t>(spec.precision)) {
          s = py::Encode(std::u32string_view(cps).substr(0, static_cast<size_t>(spec.precision)));
        }
      }
      return PadTo(std::move(s), spec, '>');
    }
    case 'd':
    case 'i':
    case 'u':
    case 'x':
    case 'X':
    case 'o': {
      if (!arg.is_number()) {
        return TypeError(std::string("%") + conv + " format: a real number is required, not " +
                         std::string(arg.TypeName()));
      }
      if (arg.is_float() && conv != 'd' && conv != 'i' && conv != 'u') {
        return TypeError(std::string("%") + conv + " format: an integer is required, not float");
      }
      const double d = arg.as_number();
      if (arg.is_float() && (std::isnan(d) || std::isinf(d) || std::fabs(d) > 9.2e18)) {
        return Status::InvalidArgument("cannot convert float to integer");
      }
      const int64_t i = arg.is_float()  ? static_cast<int64_t>(d)
                        : arg.is_bool() ? arg.as_bool()
                                        : arg.as_int();
      Spec s = spec;
      s.type = (conv == 'i' || conv == 'u') ? 'd' : conv;
      return FormatInt(i, s);
    }
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G': {
      if (!arg.is_number()) {
        return TypeError("must be real number, not " + std::string(arg.TypeName()));
      }
      Spec s = spec;
      s.type = conv;
      return FormatFloat(arg.as_number(), s);
    }
    case 'c': {
      if (arg.is_string() && py::CodePointCount(arg.as_string()) == 1) return arg.as_string();
      if (arg.is_int() && arg.as_int() >= 0 && arg.as_int() <= 0x10FFFF) {
        std::string out;
        py::AppendUtf8(out, static_cast<char32_t>(arg.as_int()));
        return PadTo(std::move(out), spec, '>');
      }
      return TypeError("%c requires int or char");
    }
    default:
      return Status::InvalidArgument(std::string("unsupported format character '") + conv + "'");
  }
}

}  // namespace

Result<std::string> PercentFormat(Runtime& rt, std::string_view format, const Value& args,
                                  bool escape_args) {
  ValueList positional;
  const Dict* mapping = args.is_dict() ? &args.as_dict() : nullptr;
  if (args.is_tuple()) {
    positional = args.as_list();
  } else {
    positional.push_back(args);
  }
  size_t next = 0;
  bool used_mapping = false;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out.push_back(format[i]);
      continue;
    }
    if (++i >= format.size()) return Status::InvalidArgument("incomplete format");
    if (format[i] == '%') {
      out.push_back('%');
      continue;
    }
    const Value* arg = nullptr;
    if (format[i] == '(') {
      const size_t close = format.find(')', i);
      if (close == std::string_view::npos) return Status::InvalidArgument("incomplete format key");
      if (!mapping) return TypeError("format requires a mapping");
      arg = mapping->Find(format.substr(i + 1, close - i - 1));
      if (!arg)
        return Status::InvalidArgument("KeyError: " +
                                       std::string(format.substr(i + 1, close - i - 1)));
      used_mapping = true;
      i = close + 1;
    }
    Spec spec;
    spec.align = '>';
    while (i < format.size() &&
           std::string_view("-+ #0").find(format[i]) != std::string_view::npos) {
      const char f = format[i++];
      if (f == '-') spec.align = '<';
      if (f == '+') spec.sign = '+';
      if (f == ' ' && spec.sign != '+') spec.sign = ' ';
      if (f == '#') spec.alternate = true;
      if (f == '0') spec.zero = true;
    }
    auto number = [&](int* out_num) -> Status {
      if (i < format.size() && format[i] == '*') {
        ++i;
        if (next >= positional.size() || !positional[next].is_int()) {
          return TypeError("* wants int");
        }
        *out_num = static_cast<int>(std::clamp<int64_t>(positional[next++].as_int(), 0, kMaxWidth));
        return Status::Ok();
      }
      int v = -1;
      while (i < format.size() && format[i] >= '0' && format[i] <= '9') {
        v = std::min(kMaxWidth, (v < 0 ? 0 : v) * 10 + (format[i++] - '0'));
      }
      if (v >= 0) *out_num = v;
      return Status::Ok();
    };
    MX_RETURN_IF_ERROR(number(&spec.width));
    if (i < format.size() && format[i] == '.') {
      ++i;
      spec.precision = 0;
      MX_RETURN_IF_ERROR(number(&spec.precision));
    }
    while (i < format.size() && (format[i] == 'l' || format[i] == 'h' || format[i] == 'L')) ++i;
    if (i >= format.size()) return Status::InvalidArgument("incomplete format");
    if (spec.zero && spec.align == '<') spec.zero = false;
    if (spec.zero) {
      spec.fill = '0';
      spec.align = '=';
    }
    if (!arg) {
      if (next >= positional.size()) {
        return TypeError("not enough arguments for format string");
      }
      arg = &positional[next++];
    }
    MX_ASSIGN_OR_RETURN(std::string piece, PercentOne(rt, *arg, format[i], spec));
    const bool textual = format[i] == 's' || format[i] == 'r' || format[i] == 'a';
    out += (escape_args && textual && !arg->is_markup()) ? EscapeHtml(piece) : piece;
    MX_RETURN_IF_ERROR(rt.CheckString(out.size()));
  }
  if (!used_mapping && !mapping && next < positional.size()) {
    return TypeError("not all arguments converted during string formatting");
  }
  return out;
}

Result<std::string> BraceFormat(Runtime& rt, std::string_view format, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    const char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') {
        out.push_back('}');
        ++i;
        continue;
      }
      return Status::InvalidArgument("Single '}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    const size_t close = format.find('}', i);
    if (close == std::string_view::npos) {
      return Status::InvalidArgument("Single '{' encountered in format string");
    }
    std::string_view field = format.substr(i + 1, close - i - 1);
    i = close;
    std::string_view spec;
    char conversion = '\0';
    if (const size_t colon = field.find(':'); colon != std::string_view::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    if (const size_t bang = field.find('!'); bang != std::string_view::npos) {
      const std::string_view conv = field.substr(bang + 1);
      if (conv.size() > 1) {
        return Status::InvalidArgument("expected ':' after conversion specifier");
      }
      if (conv.empty() || (conv[0] != 'r' && conv[0] != 's' && conv[0] != 'a')) {
        return Status::InvalidArgument("Unknown conversion specifier " + std::string(conv));
      }
      conversion = conv[0];
      field = field.substr(0, bang);
    }
    // arg_name, then .attr / [key] parts.
    size_t p = 0;
    while (p < field.size() && field[p] != '.' && field[p] != '[') ++p;
    std::string_view name = field.substr(0, p);
    Value v;
    if (name.empty() ||
        std::all_of(name.begin(), name.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      const size_t idx = name.empty()
                             ? auto_index++
                             : static_cast<size_t>(std::stoul(std::string(name.substr(0, 9))));
      if (idx >= args.positional.size()) {
        return Status::InvalidArgument("Replacement index " + std::to_string(idx) +
                                       " out of range for positional args tuple");
      }
      v = args.positional[idx];
    } else {
      bool found = false;
      for (const auto& [k, kv] : args.keywords) {
        if (k == name) {
          v = kv;
          found = true;
        }
      }
      if (!found) return Status::InvalidArgument("KeyError: '" + std::string(name) + "'");
    }
    while (p < field.size()) {
      if (field[p] == '.') {
        size_t q = p + 1;
        while (q < field.size() && field[q] != '.' && field[q] != '[') ++q;
        MX_ASSIGN_OR_RETURN(v, GetAttr(v, field.substr(p + 1, q - p - 1)));
        p = q;
      } else {
        const size_t q = field.find(']', p);
        if (q == std::string_view::npos)
          return Status::InvalidArgument("Missing ']' in format string");
        std::string_view key = field.substr(p + 1, q - p - 1);
        const bool numeric =
            !key.empty() && key.size() < 10 &&
            std::all_of(key.begin(), key.end(), [](char d) { return d >= '0' && d <= '9'; });
        MX_ASSIGN_OR_RETURN(v, GetItem(v, numeric ? Value::Int(std::stoll(std::string(key)))
                                                  : Value::String(std::string(key))));
        p = q + 1;
      }
    }
    if (v.is_undefined()) return UndefinedError(v);
    if (conversion == 'r' || conversion == 'a') {
      MX_ASSIGN_OR_RETURN(std::string text, rt.ToRepr(v));
      v = Value::String(std::move(text));
    }
    if (conversion == 's') {
      MX_ASSIGN_OR_RETURN(std::string text, rt.ToStr(v));
      v = Value::String(std::move(text));
    }
    MX_ASSIGN_OR_RETURN(std::string piece, FormatValue(rt, v, spec));
    out += piece;
    MX_RETURN_IF_ERROR(rt.CheckString(out.size()));
  }
  return out;
}

}  // namespace mx::jinja
