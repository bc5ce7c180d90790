// A small command-line flag parser: `--name value`, `--name=value` and bare
// `--name` for booleans. Each command declares its flags with help text and a
// default in one table (Options struct + table), so `--help` is generated and
// unknown flags are errors naming the flag.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace mx::cli {

struct FlagSpec {
  std::string name;           // without dashes
  std::string default_value;  // "" for none
  std::string help;
  bool is_bool = false;
};

class Flags {
 public:
  // Parses argv[first..argc). Errors: unknown flag, missing value.
  static Result<Flags> Parse(const std::vector<FlagSpec>& specs, int argc, char** argv, int first);

  bool Has(const std::string& name) const { return values_.count(name) != 0; }
  std::string Get(const std::string& name) const;
  Result<int64_t> GetInt(const std::string& name, int64_t min, int64_t max) const;
  Result<double> GetDouble(const std::string& name, double min, double max) const;
  bool GetBool(const std::string& name) const;
  bool help() const { return help_; }
  const std::vector<std::string>& positional() const { return positional_; }

  static std::string Usage(const std::string& command, const std::string& summary,
                           const std::vector<FlagSpec>& specs);

 private:
  std::map<std::string, std::string> values_;
  std::map<std::string, std::string> defaults_;
  std::vector<std::string> positional_;
  bool help_ = false;
};

// The shape of every sub-command: parses argv[first..) with `specs`, prints
// the usage for --help (exit 0), reports a flag error (exit 2), runs `run`
// and reports its error as "matricxon <command>: <status>" (exit 1).
int RunCommand(const std::string& command, const std::string& summary, const std::vector<FlagSpec>& specs,
               int argc, char** argv, int first, const std::function<Status(const Flags&)>& run);

// Parses an integer/real from a setting value; errors name `what` and the range.
Result<int64_t> ParseInt(const std::string& what, const std::string& value, int64_t min, int64_t max);
Result<double> ParseDouble(const std::string& what, const std::string& value, double min, double max);
Result<bool> ParseBool(const std::string& what, const std::string& value);

}  // namespace mx::cli
