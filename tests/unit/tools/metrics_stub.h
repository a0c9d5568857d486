// A stand-in for tesserad's admin listener: answers every GET with the Prometheus text a
// callback makes for it (the callback gets how many requests came before), on a free port of
// 127.0.0.1, one connection at a time, for the test's lifetime.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"

namespace tessera::cli::testing {

class MetricsStub {
 public:
  explicit MetricsStub(std::function<std::string(int served)> body) : body_(std::move(body)) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    listen(fd_, 8);
    thread_ = std::thread([this] { serve(); });
  }
  ~MetricsStub() {
    stopping_ = true;
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  int served() const { return served_.load(); }
  std::string last_request_line() const { return last_line_; }

 private:
  void serve() {
    while (!stopping_) {
      const int conn = accept(fd_, nullptr, nullptr);
      if (conn < 0) return;
      std::string request;
      char buf[4096];
      while (request.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = read(conn, buf, sizeof(buf));
        if (n <= 0) break;
        request.append(buf, static_cast<size_t>(n));
      }
      last_line_ = request.substr(0, request.find("\r\n"));
      const std::string body = body_(served_.load());
      const std::string response = absl::StrCat(
          "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: ",
          body.size(), "\r\nConnection: close\r\n\r\n", body);
      (void)!write(conn, response.data(), response.size());
      close(conn);
      ++served_;
    }
  }

  std::function<std::string(int)> body_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> served_{0};
  std::string last_line_;
  std::thread thread_;
};

}  // namespace tessera::cli::testing
