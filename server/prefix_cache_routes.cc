#include "server/prefix_cache_routes.h"

#include <memory>
#include <mutex>
#include <optional>

#include "server/json_responses.h"

namespace tessera::server {

namespace {

// The reset's answer, which the engine gives on its own thread at its next step: the listener's
// io thread is never blocked waiting for it (a CPU step can take seconds).
class ResetAnswer final : public ResponseProducer {
 public:
  explicit ResetAnswer(Engine& engine) : state_(std::make_shared<State>()) {
    engine.reset_prefix_cache([state = state_](int32_t dropped) {
      std::function<void()> wake;
      {
        std::lock_guard<std::mutex> lock(state->mu);
        state->dropped = dropped;
        wake = state->wake;
      }
      if (wake) wake();
    });
  }
  ~ResetAnswer() override { detach(); }

  void start(std::function<void()> wake) override {
    bool ready;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->wake = wake;
      ready = state_->dropped.has_value();
    }
    if (ready) wake();
  }
  std::optional<ProducedPart> next() override {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (!state_->dropped) return std::nullopt;
    ProducedPart part;
    part.response = json_response(200, nlohmann::json{{"dropped_blocks", *state_->dropped}});
    return part;
  }
  // The reset goes on (it is cheap and cannot be half done); only the answer is dropped.
  void cancel() override { detach(); }

 private:
  struct State {
    std::mutex mu;
    std::optional<int32_t> dropped;
    std::function<void()> wake;  // the connection's, until it goes
  };
  void detach() {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->wake = nullptr;
  }

  std::shared_ptr<State> state_;  // shared with the engine's callback
};

}  // namespace

absl::Status add_prefix_cache_routes(HttpServer& server, std::function<Engine*()> engine) {
  return server.add_route(
      "POST", "/v1/prefix_cache/reset",
      [engine](const HttpRequest&) {
        Engine* e = engine();
        if (e == nullptr) return error_response(503, "the model is still loading");
        HttpResponse pending;
        pending.producer = std::make_shared<ResetAnswer>(*e);
        return pending;
      },
      /*token_required=*/true);
}

}  // namespace tessera::server
