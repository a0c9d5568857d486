#include "runtime/tuning/results_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <optional>

#include "fmt/format.h"
#include "base/str_cat.h"
#include "runtime/tuning/atomic_file.h"
#include "base/text_fields.h"

namespace tessera {
namespace {

constexpr std::string_view kValidator = "Validator";

absl::Status errno_status(int err, const std::string& path, std::string_view what) {
  return absl::ErrnoToStatus(err, str_cat(path, ": ", what));
}

// Whole contents of a regular file; nullopt (not an error) when it does not exist.
absl::StatusOr<std::optional<std::string>> read_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; fstat below rejects it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    return errno_status(errno, path, "cannot open the tuning results file");
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    return errno_status(errno, path, "cannot stat the tuning results file");
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        str_cat(path, ": the tuning results file is not a regular file"));
  }
  std::string text;
  char buf[65536];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_status(errno, path, "cannot read the tuning results file");
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  return std::optional<std::string>(std::move(text));
}

// Where each line came from, for the "repeated result" warning.
using LineOf = std::map<GemmSignature, size_t>;

// Parses one result line into `out`, or returns why it cannot be used.
std::optional<std::string> parse_result_line(const std::vector<std::string_view>& fields,
                                             GemmSignature* sig, TunedSolution* sol) {
  if (fields.size() != 3 && fields.size() != 4) {
    return str_cat("expected OP,PARAMS,SOLUTION[,AVG_MS] but found ", fields.size(), " field",
                   fields.size() == 1 ? "" : "s");
  }
  absl::StatusOr<GemmSignature> parsed =
      GemmSignature::parse(tuning_text::trim(fields[0]), tuning_text::trim(fields[1]));
  if (!parsed.ok()) return std::string(parsed.status().message());
  *sig = *parsed;
  const std::string_view solution = tuning_text::trim(fields[2]);
  if (solution.empty()) return std::string("the solution (field 3) is empty");
  sol->solution = std::string(solution);
  sol->avg_ms.reset();
  if (fields.size() == 4) {
    const std::string_view ms = tuning_text::trim(fields[3]);
    const std::optional<double> v = tuning_text::parse_double(ms);
    if (!v || !std::isfinite(*v) || *v < 0) {
      return str_cat("AVG_MS '", ms, "' is not a non-negative number");
    }
    sol->avg_ms = *v;
  }
  return std::nullopt;
}

bool has_line_break(std::string_view s) {
  return s.find_first_of("\r\n") != std::string_view::npos;
}

}  // namespace

LoadedResults ResultsFile::parse(std::string_view text, std::string_view source,
                                 const Validators& expected) {
  LoadedResults out;
  out.exists = true;
  LineOf line_of;
  std::map<std::string, size_t> validator_line;
  const std::vector<std::string_view> lines = tuning_text::split(text, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    const size_t lineno = i + 1;
    const std::string_view line = tuning_text::trim(lines[i]);
    if (line.empty()) continue;
    auto warn = [&](std::string_view why) {
      out.warnings.push_back(str_cat(source, ":", lineno, ": ", why, "; line skipped"));
    };
    const std::vector<std::string_view> fields = tuning_text::split(line, ',');
    if (tuning_text::trim(fields[0]) == kValidator) {
      if (fields.size() < 3) {
        warn("expected Validator,KEY,VALUE");
        continue;
      }
      const std::string key(tuning_text::trim(fields[1]));
      // The value is everything after the second comma.
      const size_t value_at = line.find(',', line.find(',') + 1) + 1;
      const std::string value(tuning_text::trim(line.substr(value_at)));
      if (key.empty()) {
        warn("the validator key is empty");
        continue;
      }
      if (auto it = validator_line.find(key); it != validator_line.end()) {
        warn(str_cat("validator ", key, " repeats line ", it->second));
        continue;
      }
      validator_line[key] = lineno;
      out.file_validators[key] = value;
      continue;
    }
    GemmSignature sig;
    TunedSolution sol;
    if (std::optional<std::string> why = parse_result_line(fields, &sig, &sol)) {
      warn(*why);
      continue;
    }
    if (auto it = line_of.find(sig); it != line_of.end()) {
      out.warnings.push_back(str_cat(source, ":", lineno, ": ", sig.key(), " repeats line ",
                                     it->second, "; the later line wins"));
    }
    line_of[sig] = lineno;
    out.entries.insert_or_assign(sig, std::move(sol));
  }

  for (const auto& [key, want] : expected) {
    const auto it = out.file_validators.find(key);
    if (it == out.file_validators.end()) {
      out.validators_match = false;
      out.warnings.push_back(str_cat(source, ": validator ", key,
                                     " is missing from the file (expected '", want, "')"));
    } else if (it->second != want) {
      out.validators_match = false;
      out.warnings.push_back(str_cat(source, ":", validator_line[key], ": validator ", key, " is '",
                                     it->second, "' but expected '", want, "'"));
    }
  }
  for (const auto& [key, value] : out.file_validators) {
    if (expected.count(key) == 0) {
      out.validators_match = false;
      out.warnings.push_back(str_cat(source, ":", validator_line[key], ": validator ", key, "='",
                                     value, "' is not one this build checks"));
    }
  }
  if (!out.validators_match) {
    out.warnings.push_back(str_cat(source, ": validators differ, ignoring the file's ",
                                   out.entries.size(), " tuned GEMM",
                                   out.entries.size() == 1 ? "" : "s"));
    out.entries.clear();
  }
  return out;
}

absl::StatusOr<LoadedResults> ResultsFile::load(const std::string& path,
                                                const Validators& expected) {
  absl::StatusOr<std::optional<std::string>> text = read_file(path);
  if (!text.ok()) return text.status();
  if (!text->has_value()) return LoadedResults{};
  return parse(**text, path, expected);
}

absl::StatusOr<std::string> ResultsFile::format(const Validators& validators,
                                                const TunedEntries& entries) {
  std::string out;
  for (const auto& [key, value] : validators) {
    if (key.empty() || key.find(',') != std::string::npos || has_line_break(key) ||
        tuning_text::trim(key) != key) {
      return absl::InvalidArgumentError(
          str_cat("validator key '", key,
                  "' cannot be written (empty, a comma, a line break or "
                  "surrounding spaces)"));
    }
    if (has_line_break(value) || tuning_text::trim(value) != value) {
      return absl::InvalidArgumentError(str_cat("validator ", key, " value '", value,
                                                "' cannot be written (a line break or "
                                                "surrounding spaces)"));
    }
    out += fmt::format("{},{},{}\n", kValidator, key, value);
  }
  for (const auto& [sig, sol] : entries) {
    if (absl::Status s = sig.validate(); !s.ok()) {
      return absl::InvalidArgumentError(str_cat("tuned GEMM ", sig.key(), ": ", s.message()));
    }
    if (sol.solution.empty() || sol.solution.find(',') != std::string::npos ||
        has_line_break(sol.solution) || tuning_text::trim(sol.solution) != sol.solution) {
      return absl::InvalidArgumentError(
          str_cat("tuned GEMM ", sig.key(), ": solution '", sol.solution,
                  "' cannot be written (empty, a comma, a line break or surrounding spaces)"));
    }
    if (sol.avg_ms && (!std::isfinite(*sol.avg_ms) || *sol.avg_ms < 0)) {
      return absl::InvalidArgumentError(str_cat("tuned GEMM ", sig.key(), ": avg_ms ", *sol.avg_ms,
                                                " is not a non-negative number"));
    }
    out += fmt::format("{},{},{}", sig.op_name(), sig.params(), sol.solution);
    if (sol.avg_ms) out += fmt::format(",{}", *sol.avg_ms);
    out += '\n';
  }
  return out;
}

absl::Status ResultsFile::save(const std::string& path, const Validators& validators,
                               const TunedEntries& entries) {
  absl::StatusOr<std::string> text = format(validators, entries);
  if (!text.ok()) {
    return absl::InvalidArgumentError(str_cat(path, ": not saved: ", text.status().message()));
  }
  return write_file_atomically(path, *text);
}

}  // namespace tessera
