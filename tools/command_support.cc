#include "tools/command_support.h"

#include <unistd.h>

#include <cstdio>

namespace tessera::cli {

int report_error(const std::string& command, const absl::Status& status, int exit_code) {
  std::fprintf(stderr, "tessera %s: %s\n", command.c_str(), std::string(status.message()).c_str());
  return exit_code;
}

int print_usage(const std::string& text) {
  std::fputs(text.c_str(), stderr);
  return 0;
}

bool stdin_is_tty() {
  return isatty(STDIN_FILENO) == 1;
}
bool stderr_is_tty() {
  return isatty(STDERR_FILENO) == 1;
}

}  // namespace tessera::cli
