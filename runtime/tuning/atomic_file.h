// Replacing a file so that a reader (or a crash) sees the old contents or the new, never a part.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace tessera {

// Writes `contents` to a temporary file beside `path` (same directory, so rename is atomic),
// fsyncs it, renames it over `path`, and fsyncs the directory. The new file keeps the old one's
// permission bits (0644 when there was none). On failure the old file is untouched, the temporary
// is removed, and the error names `path` and the step that failed.
absl::Status write_file_atomically(const std::string& path, std::string_view contents);

}  // namespace tessera
