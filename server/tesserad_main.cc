// tesserad: serves a model over gRPC until SIGTERM/SIGINT, then drains and exits 0.
//   tesserad [--config FILE] [--model PATH] [--listen HOST:PORT] [--KEY VALUE ...]
// A bad flag or config value, an unusable address or TLS file, or a model that does not load
// ends it at start with one line naming what was wrong, and a non-zero exit code.
#include <pthread.h>
#include <signal.h>

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

#include "server/daemon.h"
#include "server/daemon_config.h"
#include "server/logging.h"

namespace {

using tessera::server::Daemon;

// SIGTERM/SIGINT, received by one thread with sigwait so that no handler runs at a random point.
struct Signals {
  std::mutex mu;
  std::condition_variable cv;
  int received = 0;
  Daemon* daemon = nullptr;  // to cut a drain short on the second signal
};

void wait_for_signals(Signals* signals, sigset_t set) {
  while (true) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    std::lock_guard<std::mutex> lock(signals->mu);
    ++signals->received;
    if (signals->received == 1) {
      spdlog::info("received {}: draining (a second signal cuts the drain short)", strsignal(sig));
    } else {
      spdlog::warn("received {} again: cancelling in-flight requests now", strsignal(sig));
      if (signals->daemon != nullptr) signals->daemon->cut_drain_short();
    }
    signals->cv.notify_all();
  }
}

int fail(const std::string& message) {
  std::fprintf(stderr, "tesserad: %s\n", message.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  absl::StatusOr<tessera::server::CommandLine> cl = tessera::server::parse_command_line(argc, argv);
  if (!cl.ok()) return fail(std::string(cl.status().message()));
  if (cl->help) {
    std::fputs(tessera::server::usage().c_str(), stdout);
    return 0;
  }
  if (cl->version) {
    std::printf("tesserad %s\n", TESSERA_VERSION);
    return 0;
  }
  if (cl->print_config) {
    std::fputs(tessera::server::config_to_yaml(cl->config).c_str(), stdout);
    return 0;
  }
  if (absl::Status s = tessera::server::setup_logging(cl->config.log_level, cl->config.log_format); !s.ok()) {
    return fail(std::string(s.message()));
  }

  // Block the signals before any thread starts, so that every thread inherits the mask and only
  // the sigwait thread sees them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  static Signals signals;
  std::thread(wait_for_signals, &signals, set).detach();

  Daemon daemon(cl->config);
  if (absl::Status s = daemon.start(); !s.ok()) {
    spdlog::error("cannot start: {}", std::string(s.message()));
    return 1;
  }
  {
    std::lock_guard<std::mutex> lock(signals.mu);
    signals.daemon = &daemon;
  }
  if (absl::Status s = daemon.load_model(); !s.ok()) {
    spdlog::error("cannot load the model: {}", std::string(s.message()));
    return 1;
  }
  {
    std::unique_lock<std::mutex> lock(signals.mu);
    signals.cv.wait(lock, [] { return signals.received > 0; });
  }
  daemon.drain();
  {
    std::lock_guard<std::mutex> lock(signals.mu);
    signals.daemon = nullptr;
  }
  return 0;
}
