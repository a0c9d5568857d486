#include "server/metrics/listen_socket.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tessera::server {

namespace {

std::string q(std::string_view s) {
  return absl::StrCat("\"", std::string(s), "\"");
}

}  // namespace

absl::StatusOr<HostPort> parse_host_port(std::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "admin address ", q(address), " is not HOST:PORT (for example 127.0.0.1:8002)"));
  }
  std::string_view host = address.substr(0, colon);
  const std::string_view port_text = address.substr(colon + 1);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') {
      return absl::InvalidArgumentError(absl::StrCat(
          "admin address ", q(address), ": an IPv6 host goes in brackets ([::1]:8002)"));
    }
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("admin address ", q(address), ": an IPv6 host goes in brackets ([::1]:8002)"));
  }
  int port = -1;
  const auto [ptr, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || ptr != port_text.data() + port_text.size() ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("admin address ", q(address), ": the port must be 0 to 65535"));
  }
  return HostPort{std::string(host), port};
}

absl::StatusOr<ListenSocket> open_listen_socket(std::string_view address, int backlog) {
  absl::StatusOr<HostPort> hp = parse_host_port(address);
  if (!hp.ok()) return hp.status();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(hp->port);
  if (int rc = getaddrinfo(hp->host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(absl::StrCat("admin address ", q(address),
                                               ": cannot resolve the host: ", gai_strerror(rc)));
  }
  std::string last_error = "no address";
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    const int fd =
        socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, backlog) != 0) {
      last_error = std::strerror(errno);
      close(fd);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    int bound_port = hp->port;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) == 0) {
      if (bound.ss_family == AF_INET) {
        bound_port = ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
      } else if (bound.ss_family == AF_INET6) {
        bound_port = ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
      }
    }
    freeaddrinfo(found);
    return ListenSocket{fd, bound_port};
  }
  freeaddrinfo(found);
  return absl::UnavailableError(
      absl::StrCat("admin address ", q(address), ": cannot listen: ", last_error));
}

}  // namespace tessera::server
