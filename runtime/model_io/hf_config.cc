#include "runtime/model_io/hf_config.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "runtime/model_io/mapped_file.h"
#include "base/str_cat.h"

namespace tessera {
namespace {

using nlohmann::json;

constexpr size_t kMaxConfigBytes = size_t{64} << 20;  // config.json is a few KiB in practice

class HfConfigReader {
 public:
  HfConfigReader(const json& root, const std::string& path) : root_(root), path_(path) {}

  absl::StatusOr<ModelConfig> read() {
    if (!root_.is_object()) {
      return absl::InvalidArgumentError(
          str_cat(path_, ": top level must be a JSON object, got ", root_.type_name()));
    }
    ModelConfig c;
    c_ = &c;
    if (absl::Status st = read_architecture(&c); !st.ok()) return st;
    if (absl::Status st = read_string(root_, "_name_or_path", "_name_or_path", &c.name); !st.ok()) {
      return st;
    }
    absl::Status st;
    st.Update(read_int(root_, "hidden_size", "hidden_size", true, &c.hidden_size));
    st.Update(
        read_int(root_, "intermediate_size", "intermediate_size", true, &c.intermediate_size));
    st.Update(read_int(root_, "num_hidden_layers", "num_hidden_layers", true, &c.num_layers));
    st.Update(read_int(root_, "num_attention_heads", "num_attention_heads", true, &c.num_heads));
    st.Update(read_int(root_, "vocab_size", "vocab_size", true, &c.vocab_size));
    if (!st.ok()) return st;
    // transformers' LlamaConfig defaults for everything else.
    c.num_kv_heads = c.num_heads;
    c.head_dim = c.num_heads > 0 ? c.hidden_size / c.num_heads : 0;
    c.max_position_embeddings = 2048;
    c.rms_norm_eps = 1e-6f;
    c.rope_theta = 10000.0f;
    st.Update(
        read_int(root_, "num_key_value_heads", "num_key_value_heads", false, &c.num_kv_heads));
    st.Update(read_int(root_, "head_dim", "head_dim", false, &c.head_dim));
    st.Update(read_int(root_, "max_position_embeddings", "max_position_embeddings", false,
                       &c.max_position_embeddings));
    st.Update(read_float(root_, "rms_norm_eps", "rms_norm_eps", false, &c.rms_norm_eps));
    st.Update(read_bool(root_, "tie_word_embeddings", &c.tie_word_embeddings));
    if (!st.ok()) return st;
    if (absl::Status s = read_family(&c); !s.ok()) return s;
    if (absl::Status s = read_rope(&c); !s.ok()) return s;
    if (absl::Status s = read_quantization(&c.quantization); !s.ok()) return s;
    if (absl::Status s = c.validate(); !s.ok()) {
      return absl::InvalidArgumentError(str_cat(path_, ": invalid model config: ", s.message()));
    }
    return c;
  }

 private:
  static const json* find(const json& obj, std::string_view key) {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }

  absl::Status missing(std::string_view key) const {
    return absl::InvalidArgumentError(str_cat(path_, ": key '", key, "' is missing"));
  }

  absl::Status wrong_type(std::string_view key, std::string_view want, const json& v) const {
    // dump() with `replace` cannot throw on invalid UTF-8; long values are cut for the message.
    std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
    if (text.size() > 60) text = str_cat(text.substr(0, 57), "...");
    return absl::InvalidArgumentError(
        str_cat(path_, ": key '", key, "' must be ", want, ", got ", v.type_name(), " ", text));
  }

  // `name` is the key as shown in messages (dotted for nested objects). Absent or null keeps the
  // default unless `required`.
  absl::Status read_int(const json& obj, std::string_view key, std::string_view name, bool required,
                        int64_t* out) const {
    const json* v = find(obj, key);
    if (v == nullptr || v->is_null()) return required ? missing(name) : absl::OkStatus();
    if (v->is_number_unsigned()) {
      const uint64_t u = v->get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return wrong_type(name, "an integer that fits in 64 bits", *v);
      }
      *out = static_cast<int64_t>(u);
      return absl::OkStatus();
    }
    if (v->is_number_integer()) {
      *out = v->get<int64_t>();
      return absl::OkStatus();
    }
    if (v->is_number_float()) {
      // Some exporters write 4096.0; accept integral values only.
      const double d = v->get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) {
        *out = static_cast<int64_t>(d);
        return absl::OkStatus();
      }
    }
    return wrong_type(name, "an integer", *v);
  }

  absl::Status read_float(const json& obj, std::string_view key, std::string_view name,
                          bool required, float* out) const {
    const json* v = find(obj, key);
    if (v == nullptr || v->is_null()) return required ? missing(name) : absl::OkStatus();
    if (!v->is_number()) return wrong_type(name, "a number", *v);
    *out = static_cast<float>(v->get<double>());
    return absl::OkStatus();
  }

  absl::Status read_bool(const json& obj, std::string_view key, bool* out) const {
    const json* v = find(obj, key);
    if (v == nullptr || v->is_null()) return absl::OkStatus();
    if (!v->is_boolean()) return wrong_type(key, "true or false", *v);
    *out = v->get<bool>();
    return absl::OkStatus();
  }

  absl::Status read_string(const json& obj, std::string_view key, std::string_view name,
                           std::string* out) const {
    const json* v = find(obj, key);
    if (v == nullptr || v->is_null()) return absl::OkStatus();
    if (!v->is_string()) return wrong_type(name, "a string", *v);
    *out = v->get<std::string>();
    return absl::OkStatus();
  }

  // The family, from model_type (or the architectures list when model_type is absent).
  absl::Status read_architecture(ModelConfig* c) const {
    struct Family {
      std::string_view model_type;
      std::string_view hf_class;
      std::string_view name;
    };
    static constexpr Family kFamilies[] = {
        {"llama", "LlamaForCausalLM", "llama"},      {"mistral", "MistralForCausalLM", "mistral"},
        {"qwen2", "Qwen2ForCausalLM", "qwen2"},      {"qwen3", "Qwen3ForCausalLM", "qwen3"},
        {"gemma2", "Gemma2ForCausalLM", "gemma2"},   {"gemma3_text", "Gemma3ForCausalLM", "gemma3"},
        {"phi3", "Phi3ForCausalLM", "phi3"},
    };
    std::vector<std::string> archs;
    if (const json* a = find(root_, "architectures"); a != nullptr && !a->is_null()) {
      if (!a->is_array()) return wrong_type("architectures", "an array of strings", *a);
      for (const json& e : *a) {
        if (!e.is_string()) return wrong_type("architectures", "an array of strings", *a);
        archs.push_back(e.get<std::string>());
      }
    }
    std::string model_type;
    if (absl::Status st = read_string(root_, "model_type", "model_type", &model_type); !st.ok()) {
      return st;
    }
    for (const Family& f : kFamilies) {
      const bool by_class = std::find(archs.begin(), archs.end(), f.hf_class) != archs.end();
      if (model_type == f.model_type || (model_type.empty() && by_class)) {
        c->architecture = std::string(f.name);
        return absl::OkStatus();
      }
    }
    std::vector<std::string> supported;
    for (const Family& f : kFamilies) supported.push_back(str_cat(f.hf_class, " (", f.model_type, ")"));
    return absl::InvalidArgumentError(
        str_cat(path_, ": architectures [", absl::StrJoin(archs, ", "), "] / model_type '",
                model_type, "' is not a supported architecture (supported: ",
                absl::StrJoin(supported, ", "), ")"));
  }

  // A key whose only value tessera computes is `expected`: any other is an error naming it, never
  // silently ignored (it changes the math).
  absl::Status require_value(std::string_view key, const json& expected) const {
    const json* v = find(root_, key);
    if (v == nullptr || v->is_null() || *v == expected) return absl::OkStatus();
    std::string text = v->dump(-1, ' ', false, json::error_handler_t::replace);
    if (text.size() > 60) text = str_cat(text.substr(0, 57), "...");
    return absl::InvalidArgumentError(str_cat(path_, ": key '", key, "' is ", text, "; tessera's ",
                                              c_->architecture, " forward supports only ",
                                              expected.dump()));
  }

  // The activation named by `key` (hidden_act or hidden_activation), `fallback` when absent.
  absl::Status read_activation(std::string_view key, Activation fallback, ModelConfig* c) const {
    c->activation = fallback;
    std::string name;
    if (absl::Status st = read_string(root_, key, key, &name); !st.ok()) return st;
    if (name.empty()) return absl::OkStatus();
    if (name == "silu" || name == "swish") {
      c->activation = Activation::kSilu;
    } else if (name == "gelu_pytorch_tanh" || name == "gelu_new" || name == "gelu_fast") {
      c->activation = Activation::kGeluTanh;
    } else {
      return absl::InvalidArgumentError(str_cat(path_, ": key '", key, "' is '", name,
                                                "', which is not supported (supported: silu, "
                                                "gelu_pytorch_tanh)"));
    }
    return absl::OkStatus();
  }

  // layer_types ("sliding_attention" / "full_attention" per layer) when given, else `fallback`.
  absl::Status read_layer_types(const std::vector<bool>& fallback, ModelConfig* c) const {
    const json* v = find(root_, "layer_types");
    if (v == nullptr || v->is_null()) {
      c->sliding_layers = fallback;
      return absl::OkStatus();
    }
    if (!v->is_array()) return wrong_type("layer_types", "an array of strings", *v);
    c->sliding_layers.clear();
    for (const json& e : *v) {
      const std::string t = e.is_string() ? e.get<std::string>() : std::string();
      if (t != "sliding_attention" && t != "full_attention") {
        return wrong_type("layer_types", "an array of \"sliding_attention\" / \"full_attention\"", *v);
      }
      c->sliding_layers.push_back(t == "sliding_attention");
    }
    return absl::OkStatus();
  }

  // sliding_window (null = none), applied to the layers `pattern(i)` marks.
  template <typename Pattern>
  absl::Status read_sliding_window(Pattern pattern, ModelConfig* c) const {
    if (absl::Status st = read_int(root_, "sliding_window", "sliding_window", false, &c->sliding_window);
        !st.ok()) {
      return st;
    }
    if (c->sliding_window <= 0) {
      c->sliding_window = 0;
      c->sliding_layers.clear();
      return absl::OkStatus();
    }
    std::vector<bool> layers(static_cast<size_t>(std::max<int64_t>(c->num_layers, 0)));
    for (size_t i = 0; i < layers.size(); ++i) layers[i] = pattern(static_cast<int64_t>(i));
    if (absl::Status st = read_layer_types(layers, c); !st.ok()) return st;
    if (std::find(c->sliding_layers.begin(), c->sliding_layers.end(), true) == c->sliding_layers.end()) {
      c->sliding_window = 0;
      c->sliding_layers.clear();
    }
    return absl::OkStatus();
  }

  // What each family adds to the Llama shape, with transformers' defaults.
  absl::Status read_family(ModelConfig* c) const {
    const std::string& f = c->architecture;
    absl::Status st;
    if (f == "llama" || f == "mistral" || f == "qwen2" || f == "qwen3" || f == "phi3") {
      st.Update(read_activation("hidden_act", Activation::kSilu, c));
      st.Update(require_value("mlp_bias", false));
    }
    if (f == "llama" || f == "mistral" || f == "phi3" || f == "gemma2" || f == "gemma3") {
      st.Update(require_value("attention_bias", false));
    }
    if (f == "phi3") {
      st.Update(require_value("partial_rotary_factor", 1.0));
      st.Update(read_sliding_window([](int64_t) { return true; }, c));
    }
    if (f == "mistral") st.Update(read_sliding_window([](int64_t) { return true; }, c));
    if (f == "qwen2" || f == "qwen3") {
      // Qwen2's q/k/v always carry a bias; Qwen3's never (attention_bias would add o_proj's too).
      c->qkv_bias = f == "qwen2";
      if (f == "qwen3") {
        c->qk_norm = true;
        st.Update(require_value("attention_bias", false));
      }
      bool use_sliding = false;
      int64_t max_window_layers = c->num_layers;
      st.Update(read_bool(root_, "use_sliding_window", &use_sliding));
      st.Update(read_int(root_, "max_window_layers", "max_window_layers", false, &max_window_layers));
      if (st.ok() && use_sliding) {
        st.Update(read_sliding_window([&](int64_t i) { return i >= max_window_layers; }, c));
      }
    }
    if (f == "gemma2" || f == "gemma3") {
      c->norm_weight_offset = 1.0f;
      c->sandwich_norms = true;
      c->embedding_scale = std::sqrt(static_cast<float>(c->hidden_size));
      c->head_dim = 256;
      c->tie_word_embeddings = true;
      c->query_pre_attn_scalar = 256.0f;
      st.Update(read_int(root_, "head_dim", "head_dim", false, &c->head_dim));
      st.Update(read_bool(root_, "tie_word_embeddings", &c->tie_word_embeddings));
      st.Update(read_float(root_, "query_pre_attn_scalar", "query_pre_attn_scalar", false,
                           &c->query_pre_attn_scalar));
      st.Update(read_activation("hidden_activation", Activation::kGeluTanh, c));
      if (f == "gemma2") {
        c->attn_logit_softcap = 50.0f;
        c->final_logit_softcap = 30.0f;
        c->sliding_window = 4096;
        // transformers' Gemma2: even layers slide.
        st.Update(read_sliding_window([](int64_t i) { return i % 2 == 0; }, c));
      } else {
        c->qk_norm = true;
        int64_t pattern = 6;
        st.Update(read_int(root_, "sliding_window_pattern", "sliding_window_pattern", false, &pattern));
        c->rope_local_theta = 10000.0f;
        st.Update(read_float(root_, "rope_local_base_freq", "rope_local_base_freq", false,
                             &c->rope_local_theta));
        // Every pattern-th layer is global, the rest slide.
        st.Update(read_sliding_window(
            [&](int64_t i) { return pattern <= 0 || (i + 1) % pattern != 0; }, c));
      }
      st.Update(read_optional_float("attn_logit_softcapping", &c->attn_logit_softcap));
      st.Update(read_optional_float("final_logit_softcapping", &c->final_logit_softcap));
    }
    return st;
  }

  // A float key where an explicit null means "off" (0).
  absl::Status read_optional_float(std::string_view key, float* out) const {
    const json* v = find(root_, key);
    if (v == nullptr) return absl::OkStatus();
    if (v->is_null()) {
      *out = 0.0f;
      return absl::OkStatus();
    }
    return read_float(root_, key, key, false, out);
  }

  // rope_theta and rope_scaling at the top level (transformers 4.x), or both inside
  // rope_parameters (transformers 5).
  absl::Status read_rope(ModelConfig* c) const {
    const json* params = find(root_, "rope_parameters");
    if (params != nullptr && !params->is_null() && !params->is_object()) {
      return wrong_type("rope_parameters", "an object", *params);
    }
    if (params != nullptr && params->is_null()) params = nullptr;
    if (params != nullptr) {
      if (absl::Status st = read_float(*params, "rope_theta", "rope_parameters.rope_theta", false,
                                       &c->rope_theta);
          !st.ok()) {
        return st;
      }
    }
    if (absl::Status st = read_float(root_, "rope_theta", "rope_theta", false, &c->rope_theta);
        !st.ok()) {
      return st;
    }
    const json* scaling = find(root_, "rope_scaling");
    std::string label = "rope_scaling";
    if (scaling == nullptr || scaling->is_null()) {
      scaling = params;
      label = "rope_parameters";
    }
    if (scaling == nullptr || scaling->is_null()) return absl::OkStatus();
    if (!scaling->is_object()) return wrong_type(label, "an object or null", *scaling);

    std::string type;
    const std::string type_key = scaling->contains("rope_type") ? "rope_type" : "type";
    if (absl::Status st = read_string(*scaling, type_key, label + "." + type_key, &type);
        !st.ok()) {
      return st;
    }
    RopeScaling& s = c->rope_scaling;
    if (type.empty() || type == "default") {
      s.type = RopeScaling::Type::kNone;
      return absl::OkStatus();
    }
    absl::Status st;
    if (type == "linear") {
      s.type = RopeScaling::Type::kLinear;
      st.Update(read_float(*scaling, "factor", label + ".factor", true, &s.factor));
      return st;
    }
    if (type == "llama3") {
      s.type = RopeScaling::Type::kLlama3;
      st.Update(read_float(*scaling, "factor", label + ".factor", true, &s.factor));
      st.Update(read_float(*scaling, "low_freq_factor", label + ".low_freq_factor", true,
                           &s.low_freq_factor));
      st.Update(read_float(*scaling, "high_freq_factor", label + ".high_freq_factor", true,
                           &s.high_freq_factor));
      st.Update(read_int(*scaling, "original_max_position_embeddings",
                         label + ".original_max_position_embeddings", true,
                         &s.original_max_position));
      return st;
    }
    if (type == "yarn") {
      s.type = RopeScaling::Type::kYarn;
      s.original_max_position = c->max_position_embeddings;
      st.Update(read_float(*scaling, "factor", label + ".factor", true, &s.factor));
      st.Update(read_int(*scaling, "original_max_position_embeddings",
                         label + ".original_max_position_embeddings", false,
                         &s.original_max_position));
      st.Update(read_float(*scaling, "beta_fast", label + ".beta_fast", false, &s.beta_fast));
      st.Update(read_float(*scaling, "beta_slow", label + ".beta_slow", false, &s.beta_slow));
      st.Update(read_float(*scaling, "attention_factor", label + ".attention_factor", false,
                           &s.attention_factor));
      // DeepSeek's variant and an untruncated correction range change the frequencies.
      for (std::string_view key : {"mscale", "mscale_all_dim"}) {
        if (scaling->contains(key)) {
          st.Update(absl::InvalidArgumentError(str_cat(path_, ": key '", label, ".", key,
                                                       "' (DeepSeek's yarn) is not supported")));
        }
      }
      if (const json* t = find(*scaling, "truncate"); t != nullptr && !(t->is_boolean() && t->get<bool>())) {
        st.Update(absl::InvalidArgumentError(
            str_cat(path_, ": key '", label, ".truncate' must be true (untruncated yarn is not supported)")));
      }
      return st;
    }
    return absl::InvalidArgumentError(
        str_cat(path_, ": key '", label, ".", type_key, "' is '", type,
                "', which is not supported (supported: default, linear, llama3, yarn)"));
  }

  // --- quantization_config (FP8 checkpoints) ------------------------------------------------

  static std::string short_dump(const json& v) {
    std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
    if (text.size() > 60) text = str_cat(text.substr(0, 57), "...");
    return text;
  }

  // "<path>: key 'name' is <value>; <why>".
  absl::Status refuse(std::string_view name, const json& v, std::string_view why) const {
    return absl::InvalidArgumentError(
        str_cat(path_, ": key '", name, "' is ", short_dump(v), "; ", why));
  }

  // An optional array of strings (null = empty).
  absl::Status read_strings(const json& obj, std::string_view key, const std::string& name,
                            std::vector<std::string>* out) const {
    const json* v = find(obj, key);
    if (v == nullptr || v->is_null()) return absl::OkStatus();
    if (!v->is_array()) return wrong_type(name, "an array of strings", *v);
    for (const json& e : *v) {
      if (!e.is_string()) return wrong_type(name, "an array of strings", *v);
      out->push_back(e.get<std::string>());
    }
    return absl::OkStatus();
  }

  // [rows, cols] of positive integers (a 2-D block shape).
  absl::Status read_block(const json& v, const std::string& name, WeightQuantization* q) const {
    if (!v.is_array() || v.size() != 2 || !v[0].is_number_unsigned() ||
        !v[1].is_number_unsigned() || v[0].get<uint64_t>() == 0 || v[1].get<uint64_t>() == 0 ||
        v[0].get<uint64_t>() > (1u << 20) || v[1].get<uint64_t>() > (1u << 20)) {
      return wrong_type(name, "[rows, columns] of positive integers", v);
    }
    const int64_t rows = static_cast<int64_t>(v[0].get<uint64_t>());
    const int64_t cols = static_cast<int64_t>(v[1].get<uint64_t>());
    if ((q->block_rows > 0 && q->block_rows != rows) || (q->block_cols > 0 && q->block_cols != cols)) {
      return refuse(name, v, str_cat("another group has blocks of ", q->block_rows, "x",
                                     q->block_cols, " (one block shape per checkpoint is supported)"));
    }
    q->block_rows = rows;
    q->block_cols = cols;
    return absl::OkStatus();
  }

  // quantization_config (or compressed-tensors' older name, compression_config). Absent: not
  // quantized. FP8 weights load; every other method changes the math tessera computes and is an
  // error naming the key and its value.
  absl::Status read_quantization(WeightQuantization* q) const {
    std::string key = "quantization_config";
    const json* v = find(root_, key);
    if (v == nullptr || v->is_null()) {
      key = "compression_config";
      v = find(root_, key);
    }
    if (v == nullptr || v->is_null()) return absl::OkStatus();
    if (!v->is_object()) return wrong_type(key, "an object", *v);
    std::string method;
    if (absl::Status st = read_string(*v, "quant_method", key + ".quant_method", &method); !st.ok()) {
      return st;
    }
    if (method.empty()) return missing(key + ".quant_method");
    if (method == "fp8") return read_fp8(*v, key, q);
    if (method == "compressed-tensors") return read_compressed_tensors(*v, key, q);
    return refuse(key + ".quant_method", v->at("quant_method"),
                  "tessera loads only FP8 checkpoints (quant_method \"fp8\", or "
                  "\"compressed-tensors\" with 8-bit float weights)");
  }

  // quant_method "fp8": AutoFP8's per-tensor checkpoints (weight_scale, input_scale when static)
  // and transformers' FineGrainedFP8 / DeepSeek block-wise ones (weight_block_size,
  // weight_scale_inv).
  absl::Status read_fp8(const json& v, const std::string& key, WeightQuantization* q) const {
    q->method = WeightQuantization::Method::kFp8;
    std::string scheme = "dynamic";
    if (absl::Status st = read_string(v, "activation_scheme", key + ".activation_scheme", &scheme);
        !st.ok()) {
      return st;
    }
    if (scheme == "dynamic") {
      q->activations = WeightQuantization::Activations::kDynamic;
    } else if (scheme == "static") {
      q->activations = WeightQuantization::Activations::kStatic;
    } else {
      return refuse(key + ".activation_scheme", v.at("activation_scheme"),
                    "supported: \"static\", \"dynamic\"");
    }
    if (const json* b = find(v, "weight_block_size"); b != nullptr && !b->is_null()) {
      if (absl::Status st = read_block(*b, key + ".weight_block_size", q); !st.ok()) return st;
      q->scale_suffix = "weight_scale_inv";
      q->activation_strategy = "group";
    } else {
      q->scale_suffix = "weight_scale";
      q->per_tensor = true;
      q->per_channel = true;
      q->activation_strategy = "tensor";
    }
    if (const json* fmt = find(v, "fmt"); fmt != nullptr && !fmt->is_null() && *fmt != "e4m3") {
      return refuse(key + ".fmt", *fmt, "supported: \"e4m3\"");
    }
    absl::Status st;
    st.Update(read_strings(v, "ignored_layers", key + ".ignored_layers", &q->ignore));
    st.Update(read_strings(v, "modules_to_not_convert", key + ".modules_to_not_convert", &q->ignore));
    return st;
  }

  // quant_method "compressed-tensors" (llm-compressor): every config group must quantize its
  // weights to 8-bit float, per tensor, per channel or per 2-D block.
  absl::Status read_compressed_tensors(const json& v, const std::string& key,
                                       WeightQuantization* q) const {
    q->method = WeightQuantization::Method::kCompressedTensors;
    q->scale_suffix = "weight_scale";
    auto check_format = [&](const json& obj, const std::string& name) -> absl::Status {
      const json* f = find(obj, "format");
      if (f == nullptr || f->is_null()) return absl::OkStatus();
      if (*f == "float-quantized" || *f == "naive-quantized") return absl::OkStatus();
      return refuse(name, *f,
                    "supported: \"float-quantized\", \"naive-quantized\" (FP8 weights stored as "
                    "FP8)");
    };
    if (absl::Status st = check_format(v, key + ".format"); !st.ok()) return st;
    // {} (what llm-compressor writes for dense weights) or format "dense" is no sparsity.
    if (const json* sp = find(v, "sparsity_config");
        sp != nullptr && !sp->is_null() && !(sp->is_object() && sp->empty())) {
      const json* f = sp->is_object() ? find(*sp, "format") : nullptr;
      if (f == nullptr || *f != "dense") {
        return refuse(key + ".sparsity_config", *sp, "sparse weights are not supported");
      }
    }
    if (const json* t = find(v, "transform_config"); t != nullptr && !t->is_null()) {
      return refuse(key + ".transform_config", *t,
                    "transforms (rotations) of the weights are not supported");
    }
    const json* groups = find(v, "config_groups");
    if (groups == nullptr || groups->is_null()) return missing(key + ".config_groups");
    if (!groups->is_object() || groups->empty()) {
      return wrong_type(key + ".config_groups", "a non-empty object", *groups);
    }
    for (const auto& [group_name, group] : groups->items()) {
      const std::string g = str_cat(key, ".config_groups.", group_name);
      if (!group.is_object()) return wrong_type(g, "an object", group);
      if (absl::Status st = check_format(group, g + ".format"); !st.ok()) return st;
      if (absl::Status st = read_ct_weights(group, g, q); !st.ok()) return st;
      if (absl::Status st = read_ct_inputs(group, g, q); !st.ok()) return st;
      if (const json* o = find(group, "output_activations"); o != nullptr && !o->is_null()) {
        return refuse(g + ".output_activations", *o, "output quantization is not supported");
      }
    }
    if (const json* kv = find(v, "kv_cache_scheme"); kv != nullptr && !kv->is_null()) {
      q->kv_cache_scales = true;
    }
    return read_strings(v, "ignore", key + ".ignore", &q->ignore);
  }

  // A group's "weights": {num_bits 8, type "float", strategy "tensor" | "channel" | "block"}.
  absl::Status read_ct_weights(const json& group, const std::string& g, WeightQuantization* q) const {
    const std::string name = g + ".weights";
    const json* w = find(group, "weights");
    if (w == nullptr || w->is_null()) return missing(name);
    if (!w->is_object()) return wrong_type(name, "an object", *w);
    std::string type;
    int64_t bits = 0;
    std::string strategy;
    absl::Status st;
    st.Update(read_int(*w, "num_bits", name + ".num_bits", true, &bits));
    st.Update(read_string(*w, "type", name + ".type", &type));
    st.Update(read_string(*w, "strategy", name + ".strategy", &strategy));
    if (!st.ok()) return st;
    if (bits != 8 || type != "float") {
      return refuse(name, *w,
                    str_cat(bits, "-bit ", type.empty() ? "int" : type,
                            " weights are not supported (only 8-bit float, FP8)"));
    }
    for (std::string_view flag : {"dynamic", "symmetric"}) {
      const json* f = find(*w, flag);
      const bool want = flag == "symmetric";
      if (f != nullptr && !f->is_null() && *f != want) {
        return refuse(str_cat(name, ".", flag), *f,
                      str_cat("FP8 weights must be ", want ? "symmetric" : "stored (not dynamic)"));
      }
    }
    if (strategy.empty()) return missing(name + ".strategy");
    if (strategy == "tensor") {
      q->per_tensor = true;
    } else if (strategy == "channel") {
      q->per_channel = true;
    } else if (strategy == "block") {
      const json* b = find(*w, "block_structure");
      if (b == nullptr || b->is_null()) return missing(name + ".block_structure");
      if (absl::Status s = read_block(*b, name + ".block_structure", q); !s.ok()) return s;
    } else {
      return refuse(name + ".strategy", w->at("strategy"),
                    "supported: \"tensor\", \"channel\", \"block\"");
    }
    return absl::OkStatus();
  }

  // A group's "input_activations": null (weight-only) or 8-bit float, dynamic or static.
  absl::Status read_ct_inputs(const json& group, const std::string& g, WeightQuantization* q) const {
    const std::string name = g + ".input_activations";
    const json* a = find(group, "input_activations");
    if (a == nullptr || a->is_null()) return absl::OkStatus();
    if (!a->is_object()) return wrong_type(name, "an object or null", *a);
    int64_t bits = 0;
    std::string type;
    std::string strategy;
    bool dynamic = false;
    absl::Status st;
    st.Update(read_int(*a, "num_bits", name + ".num_bits", true, &bits));
    st.Update(read_string(*a, "type", name + ".type", &type));
    st.Update(read_string(*a, "strategy", name + ".strategy", &strategy));
    if (const json* d = find(*a, "dynamic"); d != nullptr && !d->is_null()) {
      if (!d->is_boolean()) {
        st.Update(wrong_type(name + ".dynamic", "true or false", *d));
      } else {
        dynamic = d->get<bool>();
      }
    }
    if (!st.ok()) return st;
    if (bits != 8 || type != "float") {
      return refuse(name, *a,
                    str_cat(bits, "-bit ", type.empty() ? "int" : type,
                            " activations are not supported (only 8-bit float, FP8)"));
    }
    // Static wins over dynamic when groups differ: then every quantized linear needs its stored
    // input_scale.
    if (!dynamic) {
      q->activations = WeightQuantization::Activations::kStatic;
    } else if (q->activations == WeightQuantization::Activations::kNone) {
      q->activations = WeightQuantization::Activations::kDynamic;
    }
    if (q->activation_strategy.empty()) q->activation_strategy = strategy;
    return absl::OkStatus();
  }

  const json& root_;
  const std::string& path_;
  const ModelConfig* c_ = nullptr;  // the config being read (for messages)
};

}  // namespace

absl::StatusOr<ModelConfig> config_from_hf_json(std::string_view json_text,
                                                const std::string& path) {
  // nlohmann reports errors by exception; none may leave this module.
  try {
    const json root = json::parse(json_text.begin(), json_text.end());
    return HfConfigReader(root, path).read();
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(str_cat(path, ": invalid JSON: ", e.what()));
  } catch (const std::exception& e) {
    return absl::InternalError(str_cat(path, ": ", e.what()));
  }
}

absl::StatusOr<ModelConfig> config_from_hf_file(const std::string& path) {
  absl::StatusOr<std::unique_ptr<MappedFile>> file = MappedFile::open(path);
  if (!file.ok()) return file.status();
  if ((*file)->size() > kMaxConfigBytes) {
    return absl::InvalidArgumentError(
        str_cat(path, ": ", (*file)->size(), " bytes is too large for a config.json"));
  }
  const auto* text = reinterpret_cast<const char*>((*file)->data());
  return config_from_hf_json(std::string_view(text, (*file)->size()), path);
}

}  // namespace tessera
