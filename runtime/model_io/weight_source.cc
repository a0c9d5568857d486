#include "runtime/model_io/weight_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "runtime/model_io/gguf_weights.h"
#include "runtime/model_io/safetensors_weights.h"
#include "base/str_cat.h"

namespace tessera {
namespace {

// Whether the file starts with the GGUF magic; false for shorter or unreadable files (opening
// them as GGUF would fail anyway, with a less helpful message).
bool has_gguf_magic(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char magic[4] = {};
  const ssize_t n = ::read(fd, magic, sizeof(magic));
  ::close(fd);
  return n == 4 && std::memcmp(magic, "GGUF", 4) == 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<WeightSource>> open_weights(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    std::string msg = str_cat(path, ": ", std::strerror(err));
    if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(msg);
    return absl::InvalidArgumentError(msg);
  }
  if (S_ISDIR(st.st_mode)) {
    absl::StatusOr<std::unique_ptr<SafetensorsWeights>> w = SafetensorsWeights::open(path);
    if (!w.ok()) return w.status();
    return std::unique_ptr<WeightSource>(*std::move(w));
  }
  if (S_ISREG(st.st_mode) && has_gguf_magic(path)) {
    absl::StatusOr<std::unique_ptr<GgufWeights>> w = GgufWeights::open(path);
    if (!w.ok()) return w.status();
    return std::unique_ptr<WeightSource>(*std::move(w));
  }
  return absl::InvalidArgumentError(str_cat("not a GGUF file or HF model directory: ", path));
}

}  // namespace tessera
