// vocab_from_gguf: the tokenizer.* keys of a GGUF file's metadata.
#include <algorithm>
#include <string_view>

#include "absl/status/status.h"
#include "runtime/model_io/gguf_file.h"
#include "base/str_cat.h"
#include "runtime/tokenizer/vocab.h"

namespace tessera {
namespace {

class GgufVocabReader {
 public:
  explicit GgufVocabReader(const GgufFile& g) : g_(g) {}

  absl::StatusOr<Vocab> read() {
    Vocab v;
    absl::StatusOr<std::string> model = g_.get_string("tokenizer.ggml.model");
    if (!model.ok()) return model.status();
    if (*model != "gpt2") {
      return absl::UnimplementedError(str_cat(g_.path(), ": tokenizer.ggml.model is '", *model,
                                              "'; only byte-level BPE ('gpt2') is supported"));
    }
    v.model = *model;
    if (g_.has("tokenizer.ggml.pre")) {
      absl::StatusOr<std::string> pre = g_.get_string("tokenizer.ggml.pre");
      if (!pre.ok()) return pre.status();
      v.pre = *pre;
    }
    absl::StatusOr<std::vector<std::string>> tokens = g_.get_string_array("tokenizer.ggml.tokens");
    if (!tokens.ok()) return tokens.status();
    if (tokens->empty()) return error("tokenizer.ggml.tokens", "is empty");
    if (tokens->size() > static_cast<size_t>(INT32_MAX)) {
      return error("tokenizer.ggml.tokens", "has more tokens than a 32-bit id can address");
    }
    v.tokens = *std::move(tokens);
    n_tokens_ = static_cast<int64_t>(v.tokens.size());
    if (absl::Status st = read_types(&v); !st.ok()) return st;

    absl::StatusOr<std::vector<std::string>> merges = g_.get_string_array("tokenizer.ggml.merges");
    if (!merges.ok()) return merges.status();
    v.merges = *std::move(merges);

    absl::Status st;
    st.Update(read_id("tokenizer.ggml.bos_token_id", &v.bos_id));
    st.Update(read_id("tokenizer.ggml.eos_token_id", &v.eos_id));
    st.Update(read_id("tokenizer.ggml.unknown_token_id", &v.unk_id));
    st.Update(read_id("tokenizer.ggml.padding_token_id", &v.pad_id));
    st.Update(read_bool("tokenizer.ggml.add_bos_token", &v.add_bos));
    st.Update(read_bool("tokenizer.ggml.add_eos_token", &v.add_eos));
    if (!st.ok()) return st;
    if (g_.has("tokenizer.chat_template")) {
      absl::StatusOr<std::string> tmpl = g_.get_string("tokenizer.chat_template");
      if (!tmpl.ok()) return tmpl.status();
      v.chat_template = *std::move(tmpl);
    }
    if (absl::Status s = read_stop_ids(&v); !s.ok()) return s;
    return v;
  }

 private:
  absl::Status error(std::string_view key, std::string_view detail) const {
    return absl::InvalidArgumentError(str_cat(g_.path(), ": ", key, " ", detail));
  }

  absl::Status read_types(Vocab* v) const {
    if (!g_.has("tokenizer.ggml.token_type")) {
      v->types.assign(v->tokens.size(), TokenType::kNormal);
      return absl::OkStatus();
    }
    absl::StatusOr<std::vector<int64_t>> types = g_.get_int_array("tokenizer.ggml.token_type");
    if (!types.ok()) return types.status();
    if (types->size() != v->tokens.size()) {
      return error(
          "tokenizer.ggml.token_type",
          str_cat("has ", types->size(), " entries but there are ", v->tokens.size(), " tokens"));
    }
    v->types.reserve(types->size());
    for (size_t i = 0; i < types->size(); ++i) {
      const int64_t t = (*types)[i];
      if (t < static_cast<int64_t>(TokenType::kUndefined) ||
          t > static_cast<int64_t>(TokenType::kByte)) {
        return error("tokenizer.ggml.token_type",
                     str_cat("entry ", i, " is ", t, ", not a token type (0..6)"));
      }
      v->types.push_back(static_cast<TokenType>(t));
    }
    return absl::OkStatus();
  }

  // Optional id: absent leaves -1; present must index the vocab.
  absl::Status read_id(std::string_view key, int32_t* out) const {
    if (!g_.has(key)) return absl::OkStatus();
    absl::StatusOr<int64_t> id = g_.get_i64(key);
    if (!id.ok()) return id.status();
    if (*id < 0 || *id >= n_tokens_) {
      return absl::OutOfRangeError(
          str_cat(g_.path(), ": ", key, " ", *id, " is out of range for ", n_tokens_, " tokens"));
    }
    *out = static_cast<int32_t>(*id);
    return absl::OkStatus();
  }

  absl::Status read_bool(std::string_view key, bool* out) const {
    if (!g_.has(key)) return absl::OkStatus();
    absl::StatusOr<bool> b = g_.get_bool(key);
    if (!b.ok()) return b.status();
    *out = *b;
    return absl::OkStatus();
  }

  absl::Status read_stop_ids(Vocab* v) const {
    auto add = [v](int32_t id) {
      if (id >= 0 && std::find(v->stop_ids.begin(), v->stop_ids.end(), id) == v->stop_ids.end()) {
        v->stop_ids.push_back(id);
      }
    };
    add(v->eos_id);
    for (std::string_view key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
      int32_t id = -1;
      if (absl::Status st = read_id(key, &id); !st.ok()) return st;
      add(id);
    }
    add_end_of_turn_stop_ids(*v);
    return absl::OkStatus();
  }

  const GgufFile& g_;
  int64_t n_tokens_ = 0;
};

}  // namespace

absl::StatusOr<Vocab> vocab_from_gguf(const GgufFile& gguf) {
  return GgufVocabReader(gguf).read();
}

}  // namespace tessera
