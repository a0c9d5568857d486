#include "server/tuning_routes.h"

#include <utility>

#include "nlohmann/json.hpp"
#include "base/status_macros.h"
#include "server/echoed_text.h"
#include "server/json_responses.h"
#include "server/metrics/bearer_token.h"
#include "server/warmup_proto.h"

namespace tessera::server {

namespace {

using nlohmann::json;

// The body's fields into a WarmupRequest; errors name the field and what it must be.
absl::StatusOr<tessera::v1::WarmupRequest> parse_body(const std::string& body) {
  tessera::v1::WarmupRequest request;
  if (body.empty()) return request;
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("the body is not valid JSON");
  if (!j.is_object()) return absl::InvalidArgumentError("the body must be a JSON object");
  for (const auto& [key, value] : j.items()) {
    if (key == "decode_buckets") {
      if (!value.is_array()) return absl::InvalidArgumentError("decode_buckets must be an array");
      for (const json& b : value) {
        if (!b.is_number_integer()) {
          return absl::InvalidArgumentError("decode_buckets must hold integers");
        }
        request.add_decode_buckets(b.get<int64_t>());
      }
    } else if (key == "prefill_pad" || key == "max_prefill_tokens") {
      if (!value.is_number_integer()) {
        return absl::InvalidArgumentError(key + " must be an integer");
      }
      if (key == "prefill_pad") {
        request.set_prefill_pad(value.get<int64_t>());
      } else {
        request.set_max_prefill_tokens(value.get<int64_t>());
      }
    } else if (key == "time_budget_seconds") {
      if (!value.is_number()) return absl::InvalidArgumentError(key + " must be a number");
      request.set_time_budget_seconds(value.get<double>());
    } else if (key == "force") {
      if (!value.is_boolean()) return absl::InvalidArgumentError("force must be true or false");
      request.set_force(value.get<bool>());
    } else {
      return absl::InvalidArgumentError(
          "unknown field \"" + echoed_text(key) +
          "\" (known: decode_buckets, prefill_pad, max_prefill_tokens, time_budget_seconds, force)");
    }
  }
  return request;
}

json report_json(const GemmTuneReport& r) {
  return json{{"device", r.device},
              {"op", r.signature.op_name()},
              {"params", r.signature.params()},
              {"used_by", r.used_by},
              {"outcome", gemm_tune_outcome_name(r.outcome)},
              {"solution", r.solution},
              {"avg_ms", r.avg_ms},
              {"default_ms", r.default_ms},
              {"gain", r.gain},
              {"message", r.message}};
}

// `host_details`: include what describes the host (results file paths, validators, warnings).
json tuning_json(const ModelTuning& tuning, bool host_details) {
  json devices = json::array();
  for (const TuningContext* ctx : tuning.contexts()) {
    json results = json::array();
    for (const auto& [sig, sol] : ctx->results()) {
      json entry = {{"op", sig.op_name()}, {"params", sig.params()}, {"solution", sol.solution}};
      entry["avg_ms"] = sol.avg_ms ? json(*sol.avg_ms) : json(nullptr);
      results.push_back(std::move(entry));
    }
    json device = {{"device", ctx->ordinal()}};
    if (host_details) {
      device["results_file"] = ctx->path();
      device["validators"] = ctx->validators();
      device["load_warnings"] = ctx->load_warnings();
    }
    device["results"] = std::move(results);
    devices.push_back(std::move(device));
  }
  const GemmTuningStats stats = tuning.stats();
  json out = {{"mode", std::string(tuning_mode_name(tuning.config().mode))},
              {"devices", std::move(devices)},
              {"counters",
               {{"hits", stats.totals.hits},
                {"misses", stats.totals.misses},
                {"shapes_tuned", stats.totals.shapes_tuned},
                {"tuning_seconds", stats.totals.tuning_seconds}}}};
  std::shared_ptr<const WarmupJob> job = tuning.last_warmup();
  if (!job) {
    out["warmup"] = nullptr;
    return out;
  }
  const WarmupSnapshot s = job->snapshot();
  json table = json::array();
  for (const GemmTuneReport& r : s.reports) table.push_back(report_json(r));
  out["warmup"] = {{"state", warmup_state_name(s.state)},
                   {"done", s.done},
                   {"total", s.total},
                   {"elapsed_seconds", s.elapsed_seconds},
                   {"summary", s.message},
                   {"current", s.reports.empty() ? json(nullptr) : report_json(s.reports.back())},
                   {"table", std::move(table)}};
  return out;
}

}  // namespace

absl::Status add_tuning_routes(HttpServer& server, std::function<ModelTuning*()> tuning,
                               std::string admin_token) {
  TESSERA_RETURN_IF_ERROR(server.add_route(
      "POST", "/v1/tuning/warmup",
      [tuning](const HttpRequest& request) {
        ModelTuning* t = tuning();
        if (t == nullptr) return error_response(503, "the model is still loading");
        absl::StatusOr<tessera::v1::WarmupRequest> body = parse_body(request.body);
        if (!body.ok()) return error_response(400, std::string(body.status().message()));
        absl::StatusOr<WarmupSpec> spec = warmup_spec(*body, *t);
        if (!spec.ok()) return error_response(400, std::string(spec.status().message()));
        absl::StatusOr<std::shared_ptr<WarmupJob>> job = t->start_warmup(*spec);
        if (!job.ok()) {
          const bool bad = job.status().code() == absl::StatusCode::kInvalidArgument;
          return error_response(bad ? 400 : 409, std::string(job.status().message()));
        }
        return json_response(202, json{{"state", "running"}, {"total", (*job)->snapshot().total}});
      },
      /*token_required=*/true));
  TESSERA_RETURN_IF_ERROR(server.add_route(
      "GET", "/v1/tuning",
      [tuning, admin_token = std::move(admin_token)](const HttpRequest& request) {
        ModelTuning* t = tuning();
        if (t == nullptr) return error_response(503, "the model is still loading");
        const bool admin =
            !admin_token.empty() &&
            bearer_token_matches(request.header("authorization").value_or(""), admin_token);
        return json_response(200, tuning_json(*t, admin));
      }));
  return absl::OkStatus();
}

}  // namespace tessera::server
