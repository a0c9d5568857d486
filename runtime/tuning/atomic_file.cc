#include "runtime/tuning/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "base/str_cat.h"
#include "spdlog/spdlog.h"

namespace tessera {
namespace {

absl::Status errno_status(int err, const std::string& path, std::string_view what) {
  return absl::ErrnoToStatus(err, str_cat(path, ": ", what));
}

// The directory part of `path` ("." for a bare file name).
std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Removes the temporary file unless released (after the rename).
class TempFile {
 public:
  explicit TempFile(std::string path) : path_(std::move(path)) {}
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!released_) ::unlink(path_.c_str());
  }
  void set_fd(int fd) { fd_ = fd; }
  int fd() const { return fd_; }
  // Closes the descriptor; returns close()'s errno or 0.
  int close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc == 0 ? 0 : errno;
  }
  void release() { released_ = true; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  bool released_ = false;
};

}  // namespace

absl::Status write_file_atomically(const std::string& path, std::string_view contents) {
  if (path.empty() || path.back() == '/') {
    return absl::InvalidArgumentError(str_cat("'", path, "' is not a file path"));
  }
  mode_t mode = 0644;
  struct stat old {};
  if (::stat(path.c_str(), &old) == 0) {
    if (S_ISDIR(old.st_mode)) {
      return absl::FailedPreconditionError(str_cat(path, ": is a directory, cannot write it"));
    }
    mode = old.st_mode & 07777;
  }

  std::string templ = path + ".tmp.XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  const int fd = ::mkstemp(buf.data());
  if (fd < 0) {
    return errno_status(errno, path,
                        str_cat("cannot create a temporary file in ", directory_of(path)));
  }
  TempFile tmp(std::string(buf.data()));
  tmp.set_fd(fd);

  if (::fchmod(fd, mode) != 0)
    return errno_status(errno, path, "cannot set the temporary file's mode");
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_status(errno, path, str_cat("cannot write ", tmp.path()));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) return errno_status(errno, path, str_cat("cannot fsync ", tmp.path()));
  if (const int err = tmp.close(); err != 0) {
    return errno_status(err, path, str_cat("cannot close ", tmp.path()));
  }
  if (::rename(tmp.path().c_str(), path.c_str()) != 0) {
    return errno_status(errno, path, str_cat("cannot rename ", tmp.path(), " over it"));
  }
  tmp.release();

  // The rename is durable once the directory is synced; the file is in place either way, so a
  // failure here is only logged.
  const std::string dir = directory_of(path);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0 || ::fsync(dfd) != 0) {
    spdlog::warn("{}: written, but cannot fsync directory {}: {}", path, dir, std::strerror(errno));
  }
  if (dfd >= 0) ::close(dfd);
  return absl::OkStatus();
}

}  // namespace tessera
