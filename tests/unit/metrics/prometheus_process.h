// Test helpers around a real Prometheus server (Debian's prometheus package): start one on
// loopback that scrapes a given port, and ask its HTTP API for a value.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include "nlohmann/json.hpp"
#include "tests/unit/metrics/http_test_client.h"

extern char** environ;

namespace tessera::testing {

using namespace std::chrono_literals;

// A port that was free a moment ago (Prometheus needs a fixed --web.listen-address).
inline int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// GET over HTTP/1.0 (the server closes after the body), or nullopt.
inline std::optional<std::string> http_get_body(int port, const std::string& target) {
  HttpTestClient client(port);
  if (!client.connected()) return std::nullopt;
  if (!client.send("GET " + target + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")) return std::nullopt;
  if (!client.closed_within(5s)) return std::nullopt;
  std::optional<HttpReply> reply = client.read_reply(100ms);
  if (!reply || reply->status != 200) return std::nullopt;
  return reply->body;
}

inline std::string url_encode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '_' || c == '.' || c == '-' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

// The value of an instant query's first sample, once Prometheus has one.
inline std::optional<double> query_value(int port, const std::string& promql) {
  std::optional<std::string> body =
      http_get_body(port, "/api/v1/query?query=" + url_encode(promql));
  if (!body) return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(*body, nullptr, false);
  if (j.is_discarded() || j.value("status", "") != "success") return std::nullopt;
  const nlohmann::json& result = j["data"]["result"];
  if (!result.is_array() || result.empty()) return std::nullopt;
  return std::stod(result[0]["value"][1].get<std::string>());
}

class PrometheusProcess {
 public:
  ~PrometheusProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  bool start(int scrape_port, int web_port) {
    dir_ = std::filesystem::temp_directory_path() / ("tessera_prom_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "prometheus.yml")
        << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        << "scrape_configs:\n  - job_name: tessera\n    static_configs:\n"
        << "      - targets: ['127.0.0.1:" << scrape_port << "']\n";
    const std::string config = "--config.file=" + (dir_ / "prometheus.yml").string();
    const std::string storage = "--storage.tsdb.path=" + (dir_ / "data").string();
    const std::string listen = "--web.listen-address=127.0.0.1:" + std::to_string(web_port);
    const std::string log = (dir_ / "prometheus.log").string();
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    const char* argv[] = {"prometheus",   config.c_str(),     storage.c_str(),
                          listen.c_str(), "--log.level=warn", nullptr};
    const int rc = posix_spawnp(&pid_, "prometheus", &actions, nullptr,
                                const_cast<char* const*>(argv), environ);
    posix_spawn_file_actions_destroy(&actions);
    return rc == 0;
  }
  std::string log() const {
    std::ifstream in(dir_ / "prometheus.log");
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

 private:
  pid_t pid_ = -1;
  std::filesystem::path dir_;
};

inline bool prometheus_installed() {
  return std::system("command -v prometheus >/dev/null 2>&1") == 0;
}

}  // namespace tessera::testing
