// Test helper: a blocking TCP client that speaks just enough HTTP/1.1 to read the admin
// listener's responses (status line, headers, Content-Length body), with timeouts.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace tessera::testing {

struct HttpReply {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

class HttpTestClient {
 public:
  explicit HttpTestClient(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~HttpTestClient() {
    if (fd_ >= 0) close(fd_);
  }
  HttpTestClient(const HttpTestClient&) = delete;
  HttpTestClient& operator=(const HttpTestClient&) = delete;

  bool connected() const { return connected_; }

  bool send(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // One response, or nullopt when the connection closed or `timeout` passed first.
  std::optional<HttpReply> read_reply(std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    size_t header_end = std::string::npos;
    while ((header_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!fill(until)) return std::nullopt;
    }
    HttpReply reply;
    const std::string head = buffer_.substr(0, header_end);
    size_t line_end = head.find("\r\n");
    const std::string status_line = head.substr(0, line_end);
    if (status_line.size() < 12 || !status_line.starts_with("HTTP/1.")) return std::nullopt;
    reply.status = std::stoi(status_line.substr(9, 3));
    while (line_end != std::string::npos) {
      const size_t start = line_end + 2;
      line_end = head.find("\r\n", start);
      const std::string line =
          head.substr(start, line_end == std::string::npos ? std::string::npos : line_end - start);
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
      reply.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
    }
    size_t length = 0;
    if (auto it = reply.headers.find("content-length"); it != reply.headers.end() && !head_only_) {
      length = std::stoul(it->second);
    }
    while (buffer_.size() < header_end + 4 + length) {
      if (!fill(until)) return std::nullopt;
    }
    reply.body = buffer_.substr(header_end + 4, length);
    buffer_.erase(0, header_end + 4 + length);
    return reply;
  }

  // The raw bytes received up to and including `marker` (a chunked body's end, say), or nullopt
  // when the connection closed or `timeout` passed first.
  std::optional<std::string> read_until(std::string_view marker,
                                        std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    size_t at = std::string::npos;
    while ((at = buffer_.find(marker)) == std::string::npos) {
      if (!fill(until)) return std::nullopt;
    }
    std::string out = buffer_.substr(0, at + marker.size());
    buffer_.erase(0, at + marker.size());
    return out;
  }

  // For a HEAD request: the next reply has a Content-Length but no body.
  void expect_head() { head_only_ = true; }

  // True when the server closes the connection (EOF or reset) within `timeout` (0: has it
  // already); bytes that arrive before are kept for read_reply().
  bool closed_within(std::chrono::milliseconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (true) {
      const int left = std::max(remaining_ms(until), 0);
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, left) <= 0) {
        if (left == 0) return false;
        continue;
      }
      char buf[4096];
      const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return true;
      buffer_.append(buf, static_cast<size_t>(n));
    }
  }

 private:
  static int remaining_ms(std::chrono::steady_clock::time_point until) {
    return static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                until - std::chrono::steady_clock::now())
                                .count());
  }
  bool fill(std::chrono::steady_clock::time_point until) {
    const int left = remaining_ms(until);
    if (left <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, left) <= 0) return false;
    char buf[16384];
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    buffer_.append(buf, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  bool head_only_ = false;
  std::string buffer_;
};

// One request on a fresh connection ("Connection: close").
inline std::optional<HttpReply> http_request(int port, std::string_view method,
                                             std::string_view path,
                                             std::string_view extra_headers = "",
                                             std::string_view body = "") {
  HttpTestClient client(port);
  if (!client.connected()) return std::nullopt;
  std::string req = std::string(method) + " " + std::string(path) +
                    " HTTP/1.1\r\nHost: test\r\nConnection: close\r\n" + std::string(extra_headers);
  if (!body.empty() || method == "POST")
    req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n";
  req += body;
  if (method == "HEAD") client.expect_head();
  if (!client.send(req)) return std::nullopt;
  return client.read_reply();
}

}  // namespace tessera::testing
