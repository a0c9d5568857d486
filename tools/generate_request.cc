#include "tools/generate_request.h"

namespace tessera::cli {

void apply_generation_flags(const GenerationFlags& flags, v1::GenerateRequest& request) {
  v1::SamplingParams& s = *request.mutable_sampling();
  s.set_temperature(flags.temperature);
  s.set_top_k(flags.top_k);
  s.set_top_p(flags.top_p);
  s.set_min_p(flags.min_p);
  s.set_repetition_penalty(flags.repetition_penalty);
  s.set_frequency_penalty(flags.frequency_penalty);
  s.set_presence_penalty(flags.presence_penalty);
  if (flags.seed) s.set_seed(*flags.seed);
  v1::StoppingParams& stop = *request.mutable_stopping();
  stop.set_max_tokens(flags.max_tokens);
  stop.set_min_tokens(flags.min_tokens);
  for (const std::string& text : flags.stop) stop.add_stop(text);
  stop.set_ignore_eos(flags.ignore_eos);
  if (flags.logprobs) {
    request.set_logprobs(true);
    request.set_top_logprobs(*flags.logprobs);
  }
}

void add_chat_message(v1::ChatInput& chat, const std::string& role, const std::string& content) {
  v1::ChatMessage& message = *chat.add_messages();
  message.set_role(role);
  message.set_content(content);
}

}  // namespace tessera::cli
