#include "cli/flags.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace mx::cli {

Result<int64_t> ParseInt(const std::string& what, const std::string& value, int64_t min, int64_t max) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || end == nullptr || *end != '\0' || errno == ERANGE || v < min || v > max) {
    return Status::InvalidArgument(what + " = '" + value + "': expected an integer in " +
                                   std::to_string(min) + ".." + std::to_string(max));
  }
  return static_cast<int64_t>(v);
}

Result<double> ParseDouble(const std::string& what, const std::string& value, double min, double max) {
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(value.c_str(), &end);
  if (value.empty() || end == nullptr || *end != '\0' || errno == ERANGE || !std::isfinite(v) ||
      v < min || v > max) {
    return Status::InvalidArgument(what + " = '" + value + "': expected a number in " +
                                   std::to_string(min) + ".." + std::to_string(max));
  }
  return v;
}

Result<bool> ParseBool(const std::string& what, const std::string& value) {
  if (value == "1" || value == "true" || value == "yes" || value == "on") return true;
  if (value == "0" || value == "false" || value == "no" || value == "off") return false;
  return Status::InvalidArgument(what + " = '" + value + "': expected true or false");
}

Result<Flags> Flags::Parse(const std::vector<FlagSpec>& specs, int argc, char** argv, int first) {
  Flags f;
  std::map<std::string, const FlagSpec*> by_name;
  for (const auto& s : specs) {
    by_name[s.name] = &s;
    if (!s.default_value.empty()) f.defaults_[s.name] = s.default_value;
  }
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      f.help_ = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      f.positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2), value;
    bool has_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    auto it = by_name.find(name);
    if (it == by_name.end()) return Status::InvalidArgument("unknown flag --" + name + " (see --help)");
    if (!has_value) {
      if (it->second->is_bool) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return Status::InvalidArgument("flag --" + name + " needs a value");
      }
    }
    f.values_[name] = value;
  }
  return f;
}

std::string Flags::Get(const std::string& name) const {
  if (auto it = values_.find(name); it != values_.end()) return it->second;
  if (auto it = defaults_.find(name); it != defaults_.end()) return it->second;
  return "";
}

Result<int64_t> Flags::GetInt(const std::string& name, int64_t min, int64_t max) const {
  return ParseInt("--" + name, Get(name), min, max);
}

Result<double> Flags::GetDouble(const std::string& name, double min, double max) const {
  return ParseDouble("--" + name, Get(name), min, max);
}

bool Flags::GetBool(const std::string& name) const {
  auto v = ParseBool("--" + name, Get(name));
  return v.ok() && v.value();
}

int RunCommand(const std::string& command, const std::string& summary, const std::vector<FlagSpec>& specs,
               int argc, char** argv, int first, const std::function<Status(const Flags&)>& run) {
  auto flags = Flags::Parse(specs, argc, argv, first);
  if (!flags.ok()) {
    std::fprintf(stderr, "matricxon %s: %s\n", command.c_str(), flags.status().message().c_str());
    return 2;
  }
  if (flags->help()) {
    std::fputs(Flags::Usage(command, summary, specs).c_str(), stdout);
    return 0;
  }
  Status st = run(*flags);
  if (!st.ok()) {
    std::fprintf(stderr, "matricxon %s: %s\n", command.c_str(), st.ToString().c_str());
    return 1;
  }
  return 0;
}

std::string Flags::Usage(const std::string& command, const std::string& summary,
                         const std::vector<FlagSpec>& specs) {
  std::string out = "usage: matricxon " + command + " [flags]\n\n" + summary + "\n\nflags:\n";
  for (const auto& s : specs) {
    std::string left = "  --" + s.name + (s.is_bool ? "" : " VALUE");
    if (left.size() < 28) left.resize(28, ' ');
    out += left + " " + s.help;
    if (!s.default_value.empty()) out += " (default: " + s.default_value + ")";
    out += "\n";
  }
  return out;
}

}  // namespace mx::cli
