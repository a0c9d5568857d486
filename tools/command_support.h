// Small helpers every subcommand shares: error reporting with the command's name, and exit codes.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace tessera::cli {

inline constexpr int kExitError = 1;          // a failed call or an unusable input
inline constexpr int kExitUsage = 2;          // bad flags or arguments
inline constexpr int kExitInterrupted = 130;  // Ctrl-C, as shells report SIGINT

// Prints "tessera COMMAND: MESSAGE" on stderr and returns `exit_code`.
int report_error(const std::string& command, const absl::Status& status,
                 int exit_code = kExitError);

// Prints `text` on stderr and returns 0 (for --help).
int print_usage(const std::string& text);

// Whether stdin / stderr is a terminal.
bool stdin_is_tty();
bool stderr_is_tty();

}  // namespace tessera::cli
