// A small command-line parser for the tessera subcommands: --name value, --name=value, boolean
// --flag, and positional arguments. Unknown flags and malformed values are errors naming them.
// A value flag given more than once keeps every value (get_all); get() answers the last one.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::cli {

// The union of several flag-name sets (a command's own flags plus shared groups).
std::set<std::string> merge_flags(std::initializer_list<std::set<std::string>> sets);

class Args {
 public:
  // `value_flags` take a value, `bool_flags` do not; anything else starting with "--" is an error.
  static absl::StatusOr<Args> parse(int argc, char** argv, const std::set<std::string>& value_flags,
                                    const std::set<std::string>& bool_flags);

  bool has(const std::string& name) const {
    return values_.count(name) > 0 || bools_.count(name) > 0;
  }
  std::string get(const std::string& name, const std::string& fallback = "") const;
  // Every value of a repeatable flag (--stop A --stop B), in command-line order.
  std::vector<std::string> get_all(const std::string& name) const;
  absl::StatusOr<int64_t> get_int(const std::string& name, int64_t fallback) const;
  absl::StatusOr<double> get_double(const std::string& name, double fallback) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::vector<std::string>> values_;
  std::set<std::string> bools_;
  std::vector<std::string> positional_;
};

}  // namespace tessera::cli
