#include "runtime/model_io/hf_config.h"

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
    if (absl::Status s = read_rope(&c); !s.ok()) return s;
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

  absl::Status read_architecture(ModelConfig* c) const {
    bool llama = false;
    std::vector<std::string> archs;
    if (const json* a = find(root_, "architectures"); a != nullptr && !a->is_null()) {
      if (!a->is_array()) return wrong_type("architectures", "an array of strings", *a);
      for (const json& e : *a) {
        if (!e.is_string()) return wrong_type("architectures", "an array of strings", *a);
        archs.push_back(e.get<std::string>());
        if (archs.back() == "LlamaForCausalLM") llama = true;
      }
    }
    std::string model_type;
    if (absl::Status st = read_string(root_, "model_type", "model_type", &model_type); !st.ok()) {
      return st;
    }
    if (model_type == "llama") llama = true;
    if (!llama) {
      return absl::InvalidArgumentError(
          str_cat(path_, ": architectures [", absl::StrJoin(archs, ", "), "] / model_type '",
                  model_type, "' is not a supported architecture (supported: LlamaForCausalLM / ",
                  absl::StrJoin(supported_architectures(), ", "), ")"));
    }
    c->architecture = "llama";
    return absl::OkStatus();
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
    return absl::InvalidArgumentError(
        str_cat(path_, ": key '", label, ".", type_key, "' is '", type,
                "', which is not supported (supported: default, linear, llama3)"));
  }

  const json& root_;
  const std::string& path_;
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
