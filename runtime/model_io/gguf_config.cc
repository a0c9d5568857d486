#include "runtime/model_io/gguf_config.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numbers>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "runtime/model_io/dequant.h"
#include "runtime/model_io/gguf_file.h"
#include "base/str_cat.h"

namespace tessera {
namespace {

// llama3 rope scaling as in transformers' _compute_llama3_parameters and the GGUF converter's
// rope_freqs: the divisor applied to the rotary frequency of dimension pair i.
double llama3_divisor(double freq, const RopeScaling& s) {
  const double low_wavelen = static_cast<double>(s.original_max_position) / s.low_freq_factor;
  const double high_wavelen = static_cast<double>(s.original_max_position) / s.high_freq_factor;
  const double wavelen = 2.0 * std::numbers::pi / freq;
  if (wavelen < high_wavelen) return 1.0;
  if (wavelen > low_wavelen) return s.factor;
  const double smooth =
      (static_cast<double>(s.original_max_position) / wavelen - s.low_freq_factor) /
      (s.high_freq_factor - s.low_freq_factor);
  return 1.0 / ((1.0 - smooth) / s.factor + smooth);
}

class GgufConfigReader {
 public:
  explicit GgufConfigReader(const GgufFile& g) : g_(g) {}

  absl::StatusOr<ModelConfig> read() {
    ModelConfig c;
    absl::StatusOr<std::string> arch = g_.get_string("general.architecture");
    if (!arch.ok()) return arch.status();
    // The families whose GGUF metadata and tensor names this reader maps (a subset of
    // supported_architectures(): the others load from HF directories).
    static const std::vector<std::string> supported = {"llama", "qwen2", "qwen3",
                                                       "gemma2", "gemma3", "phi3"};
    if (std::find(supported.begin(), supported.end(), *arch) == supported.end()) {
      return absl::InvalidArgumentError(
          str_cat(g_.path(), ": general.architecture '", *arch,
                  "' is not supported in GGUF files (supported: ", absl::StrJoin(supported, ", "),
                  "; from HF directories: ", absl::StrJoin(supported_architectures(), ", "), ")"));
    }
    c.architecture = *arch;
    prefix_ = str_cat(*arch, ".");
    if (g_.has("general.name")) {
      absl::StatusOr<std::string> name = g_.get_string("general.name");
      if (!name.ok()) return name.status();
      c.name = *name;
    }

    absl::Status st;
    st.Update(required_int("block_count", &c.num_layers));
    st.Update(required_int("embedding_length", &c.hidden_size));
    st.Update(required_int("feed_forward_length", &c.intermediate_size));
    st.Update(required_int("attention.head_count", &c.num_heads));
    st.Update(required_int("context_length", &c.max_position_embeddings));
    if (!st.ok()) return st;
    c.num_kv_heads = c.num_heads;
    st.Update(optional_int("attention.head_count_kv", &c.num_kv_heads));
    st.Update(required_float("attention.layer_norm_rms_epsilon", &c.rms_norm_eps));
    st.Update(optional_float("rope.freq_base", &c.rope_theta));
    if (!st.ok()) return st;
    if (absl::Status s = read_vocab_size(&c); !s.ok()) return s;
    if (absl::Status s = read_head_dim(&c); !s.ok()) return s;
    if (absl::Status s = read_rope_scaling(&c); !s.ok()) return s;
    c.tie_word_embeddings = g_.find_tensor("output.weight") == nullptr;
    if (absl::Status s = read_family(&c); !s.ok()) return s;

    if (absl::Status s = c.validate(); !s.ok()) {
      return absl::InvalidArgumentError(
          str_cat(g_.path(), ": invalid model config: ", s.message()));
    }
    return c;
  }

 private:
  std::string key(std::string_view suffix) const { return str_cat(prefix_, suffix); }

  // What each family adds to the Llama shape, as llama.cpp's converter writes it (see
  // tests/data/families/README.md): Mistral arrives as "llama" with no window key; Qwen2's
  // window is not written (full attention); Gemma's norm weights are stored with the 1 added
  // (offset 0 here), query_pre_attn_scalar is not written (llama.cpp scales by head_dim^-1/2) and
  // which layers slide is the architecture's (Gemma 2: even layers; Gemma 3: all but every 6th).
  absl::Status read_family(ModelConfig* c) const {
    const std::string& f = c->architecture;
    absl::Status st;
    c->qkv_bias = f == "qwen2";
    c->qk_norm = f == "qwen3" || f == "gemma3";
    std::function<bool(int64_t)> sliding = [](int64_t) { return true; };
    if (f == "gemma2" || f == "gemma3") {
      c->sandwich_norms = true;
      c->activation = Activation::kGeluTanh;
      c->embedding_scale = std::sqrt(static_cast<float>(c->hidden_size));
      if (f == "gemma2") {
        st.Update(optional_float("attn_logit_softcapping", &c->attn_logit_softcap));
        st.Update(optional_float("final_logit_softcapping", &c->final_logit_softcap));
        sliding = [](int64_t i) { return i % 2 == 0; };
      } else {
        c->rope_local_theta = 10000.0f;
        st.Update(optional_float("rope.freq_base_swa", &c->rope_local_theta));
        sliding = [](int64_t i) { return (i + 1) % 6 != 0; };
      }
    }
    if (f == "gemma2" || f == "gemma3" || f == "phi3") {
      st.Update(optional_int("attention.sliding_window", &c->sliding_window));
    }
    if (!st.ok()) return st;
    if (c->sliding_window > 0) {
      c->sliding_layers.resize(static_cast<size_t>(std::max<int64_t>(c->num_layers, 0)));
      for (size_t i = 0; i < c->sliding_layers.size(); ++i) {
        c->sliding_layers[i] = sliding(static_cast<int64_t>(i));
      }
    }
    return absl::OkStatus();
  }

  absl::Status required_int(std::string_view suffix, int64_t* out) const {
    absl::StatusOr<int64_t> v = g_.get_i64(key(suffix));
    if (!v.ok()) return v.status();
    *out = *v;
    return absl::OkStatus();
  }

  absl::Status optional_int(std::string_view suffix, int64_t* out) const {
    return g_.has(key(suffix)) ? required_int(suffix, out) : absl::OkStatus();
  }

  absl::Status required_float(std::string_view suffix, float* out) const {
    absl::StatusOr<float> v = g_.get_f32(key(suffix));
    if (!v.ok()) return v.status();
    *out = *v;
    return absl::OkStatus();
  }

  absl::Status optional_float(std::string_view suffix, float* out) const {
    return g_.has(key(suffix)) ? required_float(suffix, out) : absl::OkStatus();
  }

  absl::Status read_vocab_size(ModelConfig* c) const {
    if (g_.has(key("vocab_size"))) return required_int("vocab_size", &c->vocab_size);
    if (g_.has("tokenizer.ggml.tokens")) {
      absl::StatusOr<uint64_t> n = g_.get_array_size("tokenizer.ggml.tokens");
      if (!n.ok()) return n.status();
      c->vocab_size = static_cast<int64_t>(std::min<uint64_t>(*n, INT64_MAX));
      return absl::OkStatus();
    }
    return absl::NotFoundError(str_cat(g_.path(), ": neither '", key("vocab_size"),
                                       "' nor 'tokenizer.ggml.tokens' gives the vocab size"));
  }

  // head_dim is attention.key_length when given, else hidden / heads (as llama.cpp does);
  // rope.dimension_count, when given, must equal it: tessera rotates whole heads.
  absl::Status read_head_dim(ModelConfig* c) const {
    int64_t key_length = 0, value_length = 0, rope_dims = 0;
    absl::Status st;
    st.Update(optional_int("attention.key_length", &key_length));
    st.Update(optional_int("attention.value_length", &value_length));
    st.Update(optional_int("rope.dimension_count", &rope_dims));
    if (!st.ok()) return st;
    if (key_length > 0) {
      c->head_dim = key_length;
    } else if (c->num_heads > 0) {
      c->head_dim = c->hidden_size / c->num_heads;
    }
    if (value_length > 0 && value_length != c->head_dim) {
      return absl::InvalidArgumentError(str_cat(g_.path(), ": '", key("attention.value_length"),
                                                "' ", value_length, " differs from the key length ",
                                                c->head_dim, " (not supported)"));
    }
    if (rope_dims > 0 && rope_dims != c->head_dim) {
      return absl::InvalidArgumentError(str_cat(g_.path(), ": '", key("rope.dimension_count"), "' ",
                                                rope_dims, " differs from head_dim ", c->head_dim,
                                                " (partial rotary is not supported)"));
    }
    return absl::OkStatus();
  }

  absl::Status read_rope_scaling(ModelConfig* c) const {
    std::string type = "none";
    if (g_.has(key("rope.scaling.type"))) {
      absl::StatusOr<std::string> t = g_.get_string(key("rope.scaling.type"));
      if (!t.ok()) return t.status();
      type = *t;
    } else if (g_.has(key("rope.scale_linear"))) {
      // Older converters wrote only the linear factor.
      type = "linear";
      float factor = 1.0f;
      if (absl::Status st = required_float("rope.scale_linear", &factor); !st.ok()) return st;
      c->rope_scaling.type = factor == 1.0f ? RopeScaling::Type::kNone : RopeScaling::Type::kLinear;
      c->rope_scaling.factor = factor;
      return check_no_rope_freqs(c->rope_scaling.type);
    }
    if (type == "none") {
      if (const GgufTensorInfo* t = g_.find_tensor("rope_freqs.weight"); t != nullptr) {
        return infer_llama3(*t, c);
      }
      return absl::OkStatus();
    }
    if (type == "linear") {
      c->rope_scaling.type = RopeScaling::Type::kLinear;
      if (absl::Status st = required_float("rope.scaling.factor", &c->rope_scaling.factor);
          !st.ok()) {
        return st;
      }
      return check_no_rope_freqs(c->rope_scaling.type);
    }
    if (type == "llama3") {
      // Not written by llama.cpp's converter, but accepted from writers that spell it out.
      RopeScaling& s = c->rope_scaling;
      s.type = RopeScaling::Type::kLlama3;
      absl::Status st;
      st.Update(required_float("rope.scaling.factor", &s.factor));
      st.Update(required_int("rope.scaling.original_context_length", &s.original_max_position));
      st.Update(optional_float("rope.scaling.low_freq_factor", &s.low_freq_factor));
      st.Update(optional_float("rope.scaling.high_freq_factor", &s.high_freq_factor));
      return st;
    }
    if (type == "yarn") {
      RopeScaling& s = c->rope_scaling;
      s.type = RopeScaling::Type::kYarn;
      s.original_max_position = c->max_position_embeddings;
      absl::Status st;
      st.Update(required_float("rope.scaling.factor", &s.factor));
      st.Update(optional_int("rope.scaling.original_context_length", &s.original_max_position));
      st.Update(optional_float("rope.scaling.yarn_beta_fast", &s.beta_fast));
      st.Update(optional_float("rope.scaling.yarn_beta_slow", &s.beta_slow));
      st.Update(optional_float("rope.scaling.yarn_attn_factor", &s.attention_factor));
      if (st.ok()) st = check_no_rope_freqs(s.type);
      return st;
    }
    return absl::InvalidArgumentError(
        str_cat(g_.path(), ": '", key("rope.scaling.type"), "' is '", type,
                "', which is not supported (supported: none, linear, llama3, yarn)"));
  }

  absl::Status check_no_rope_freqs(RopeScaling::Type type) const {
    if (type != RopeScaling::Type::kNone && g_.find_tensor("rope_freqs.weight") != nullptr) {
      return absl::InvalidArgumentError(
          str_cat(g_.path(), ": has both '", key("rope.scaling.type"),
                  "' and a rope_freqs.weight tensor; combining them is not supported"));
    }
    return absl::OkStatus();
  }

  absl::Status rope_freqs_error(std::string_view detail) const {
    return absl::InvalidArgumentError(str_cat(g_.path(), ": tensor 'rope_freqs.weight': ", detail));
  }

  // The converter writes rope_freqs[i] = llama3_divisor(freq_i) for the head's dim pairs. The
  // largest divisor is the factor; one point of the smooth ramp (divisor strictly between 1 and
  // factor) then fixes original_max_position, given the low/high frequency factors 1 and 4 that
  // every Llama 3.x release uses. The fitted parameters must reproduce every entry.
  absl::Status infer_llama3(const GgufTensorInfo& t, ModelConfig* c) const {
    // A bad rope_theta is reported by validate(); there is nothing to fit against.
    if (!std::isfinite(c->rope_theta) || c->rope_theta <= 0.0f) return absl::OkStatus();
    const int64_t n_pairs = c->head_dim / 2;
    if (c->head_dim <= 0 || t.shape.size() != 1 || t.shape[0] != n_pairs) {
      return rope_freqs_error(str_cat("expected shape [", n_pairs, "] (head_dim / 2)"));
    }
    std::vector<float> f(static_cast<size_t>(n_pairs));  // [head_dim / 2]
    if (absl::Status st = dequantize_f32(t.dtype, g_.tensor_bytes(t), f); !st.ok()) {
      return rope_freqs_error(std::string(st.message()));
    }
    std::vector<double> freq(f.size());  // [head_dim / 2] rotary frequency of each dim pair
    for (size_t i = 0; i < f.size(); ++i) {
      if (!std::isfinite(f[i]) || f[i] < 1.0f) {
        return rope_freqs_error(str_cat("entry ", i, " is ", f[i], "; expected >= 1"));
      }
      freq[i] = std::pow(static_cast<double>(c->rope_theta),
                         -2.0 * static_cast<double>(i) / static_cast<double>(c->head_dim));
    }
    RopeScaling s;
    s.type = RopeScaling::Type::kLlama3;
    s.factor = *std::max_element(f.begin(), f.end());
    s.low_freq_factor = 1.0f;
    s.high_freq_factor = 4.0f;
    if (s.factor <= 1.0f) return absl::OkStatus();  // all ones: no scaling
    const double tol = 1e-4 * s.factor;
    // Window of original_max_position consistent with the unscaled (divisor 1) and fully scaled
    // (divisor = factor) entries; a ramp point pins it exactly.
    double lo = 0.0, hi = INFINITY, pinned = NAN;
    for (size_t i = 0; i < f.size(); ++i) {
      const double wavelen = 2.0 * std::numbers::pi / freq[i];
      if (f[i] <= 1.0 + tol) {
        lo = std::max(lo, wavelen * s.high_freq_factor);
      } else if (f[i] >= s.factor - tol) {
        hi = std::min(hi, wavelen * s.low_freq_factor);
      } else if (std::isnan(pinned)) {
        const double inv_factor = 1.0 / s.factor;
        const double smooth = (1.0 / f[i] - inv_factor) / (1.0 - inv_factor);
        pinned = wavelen * (s.low_freq_factor + smooth * (s.high_freq_factor - s.low_freq_factor));
      }
    }
    double orig = pinned;
    if (std::isnan(orig)) orig = (8192.0 > lo && 8192.0 < hi) ? 8192.0 : (lo + hi) / 2;
    if (!std::isfinite(orig) || orig < 1.0 || orig > 1e12) {
      return rope_freqs_error("does not follow llama3 rope scaling");
    }
    s.original_max_position = std::llround(orig);
    for (size_t i = 0; i < f.size(); ++i) {
      const double want = llama3_divisor(freq[i], s);
      if (!(std::fabs(want - f[i]) <= 1e-3 * std::max(1.0, want))) {
        return rope_freqs_error(
            str_cat("entry ", i, " is ", f[i], " but llama3 rope scaling (factor ", s.factor,
                    ", low_freq_factor 1, high_freq_factor 4, original_max_position_embeddings ",
                    s.original_max_position, ") gives ", want,
                    "; other per-dimension factors are not "
                    "supported"));
      }
    }
    c->rope_scaling = s;
    return absl::OkStatus();
  }

  const GgufFile& g_;
  std::string prefix_;
};

}  // namespace

absl::StatusOr<ModelConfig> config_from_gguf(const GgufFile& gguf) {
  return GgufConfigReader(gguf).read();
}

}  // namespace tessera
