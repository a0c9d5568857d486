#include "runtime/model/decoder_layer.h"

#include <utility>

#include "base/status_macros.h"
#include "base/str_cat.h"

namespace tessera {

std::array<LinearWeightParts, kLinearProjections> decoder_layer_linear_parts(
    const ModelConfig& c, int64_t i, const TensorParallelShard& shard) {
  const int64_t h = c.hidden_size, d = c.head_dim;
  const int64_t q_rows = shard.heads * d, kv_rows = shard.kv_heads * d;
  const int64_t inter = shard.intermediate;
  auto name = [i](std::string_view suffix) { return layer_weight_name(i, suffix); };
  const bool fused = c.architecture == "phi3";  // qkv_proj and gate_up_proj stored fused
  const bool split = shard.size > 1;
  // A rank's rows of a column-parallel weight (all of them on one rank), `offset` rows into a
  // fused one.
  auto rows = [split](std::string n, int64_t first, int64_t count, int64_t offset = 0) {
    return split ? WeightPart{std::move(n), IndexRange{offset + first, count}, {}}
                 : WeightPart{std::move(n), {}, {}};
  };
  // A rank's columns of a row-parallel weight.
  auto cols = [split, h](std::string n, int64_t first, int64_t count) {
    return split ? WeightPart{std::move(n), IndexRange{0, h}, IndexRange{first, count}}
                 : WeightPart{std::move(n), {}, {}};
  };
  const int64_t q_first = shard.first_head * d, kv_first = shard.first_kv_head * d;
  const int64_t i_first = shard.first_intermediate;
  const auto shapes = decoder_layer_linear_shapes(c, shard);
  std::array<LinearWeightParts, kLinearProjections> p;
  for (int k = 0; k < kLinearProjections; ++k) p[k].shape = shapes[k];
  auto& qkv = p[static_cast<int>(LinearProjection::kQkv)].parts;
  auto& gate_up = p[static_cast<int>(LinearProjection::kGateUp)].parts;
  if (fused && split) {
    const std::string n = name("self_attn.qkv_proj.weight");
    qkv = {rows(n, q_first, q_rows), rows(n, kv_first, kv_rows, c.num_heads * d),
           rows(n, kv_first, kv_rows, (c.num_heads + c.num_kv_heads) * d)};
    const std::string g = name("mlp.gate_up_proj.weight");
    gate_up = {rows(g, i_first, inter), rows(g, i_first, inter, c.intermediate_size)};
  } else if (fused) {
    qkv = {WeightPart{name("self_attn.qkv_proj.weight"), {}, {}}};
    gate_up = {WeightPart{name("mlp.gate_up_proj.weight"), {}, {}}};
  } else {
    qkv = {rows(name("self_attn.q_proj.weight"), q_first, q_rows),
           rows(name("self_attn.k_proj.weight"), kv_first, kv_rows),
           rows(name("self_attn.v_proj.weight"), kv_first, kv_rows)};
    gate_up = {rows(name("mlp.gate_proj.weight"), i_first, inter),
               rows(name("mlp.up_proj.weight"), i_first, inter)};
  }
  p[static_cast<int>(LinearProjection::kO)].parts = {cols(name("self_attn.o_proj.weight"), q_first, q_rows)};
  p[static_cast<int>(LinearProjection::kDown)].parts = {cols(name("mlp.down_proj.weight"), i_first, inter)};
  return p;
}

absl::StatusOr<DecoderLayer> load_decoder_layer(WeightLoader& loader, Backend& b,
                                                const ModelConfig& c, int64_t i,
                                                const TensorParallelShard& shard,
                                                const std::array<bool, kLinearProjections>& skip) {
  const int64_t h = c.hidden_size, d = c.head_dim;
  const int64_t q_rows = shard.heads * d, kv_rows = shard.kv_heads * d;
  const int64_t qkv_rows = q_rows + 2 * kv_rows;
  auto name = [i](std::string_view suffix) { return layer_weight_name(i, suffix); };
  const bool split = shard.size > 1;
  auto rows = [split](std::string n, int64_t first, int64_t count) {
    return split ? WeightPart{std::move(n), IndexRange{first, count}, {}}
                 : WeightPart{std::move(n), {}, {}};
  };
  const int64_t q_first = shard.first_head * d, kv_first = shard.first_kv_head * d;
  const auto linears = decoder_layer_linear_parts(c, i, shard);
  auto linear = [&](LinearProjection p, Tensor& out) -> absl::Status {
    const LinearWeightParts& w = linears[static_cast<int>(p)];
    if (skip[static_cast<int>(p)]) return absl::OkStatus();
    TESSERA_ASSIGN_OR_RETURN(out, loader.load_parts(b, w.parts, {w.shape.rows, w.shape.cols}));
    return absl::OkStatus();
  };
  DecoderLayer l;
  TESSERA_ASSIGN_OR_RETURN(l.input_layernorm, loader.load(b, {name("input_layernorm.weight")}, {h}));
  TESSERA_RETURN_IF_ERROR(linear(LinearProjection::kQkv, l.qkv));
  if (c.qkv_bias) {
    TESSERA_ASSIGN_OR_RETURN(l.qkv_bias, loader.load_parts(b,
                                                           {rows(name("self_attn.q_proj.bias"), q_first, q_rows),
                                                            rows(name("self_attn.k_proj.bias"), kv_first, kv_rows),
                                                            rows(name("self_attn.v_proj.bias"), kv_first, kv_rows)},
                                                           {qkv_rows}));
  }
  if (c.qk_norm) {
    TESSERA_ASSIGN_OR_RETURN(l.q_norm, loader.load(b, {name("self_attn.q_norm.weight")}, {d}));
    TESSERA_ASSIGN_OR_RETURN(l.k_norm, loader.load(b, {name("self_attn.k_norm.weight")}, {d}));
  }
  TESSERA_RETURN_IF_ERROR(linear(LinearProjection::kO, l.o));
  TESSERA_ASSIGN_OR_RETURN(l.post_attention_layernorm,
                           loader.load(b, {name("post_attention_layernorm.weight")}, {h}));
  if (c.sandwich_norms) {
    TESSERA_ASSIGN_OR_RETURN(l.pre_feedforward_layernorm,
                             loader.load(b, {name("pre_feedforward_layernorm.weight")}, {h}));
    TESSERA_ASSIGN_OR_RETURN(l.post_feedforward_layernorm,
                             loader.load(b, {name("post_feedforward_layernorm.weight")}, {h}));
  }
  TESSERA_RETURN_IF_ERROR(linear(LinearProjection::kGateUp, l.gate_up));
  TESSERA_RETURN_IF_ERROR(linear(LinearProjection::kDown, l.down));
  return l;
}

std::array<LinearWeightShape, kLinearProjections> decoder_layer_linear_shapes(
    const ModelConfig& c, const TensorParallelShard& shard) {
  const int64_t h = c.hidden_size, d = c.head_dim;
  std::array<LinearWeightShape, kLinearProjections> s;
  s[static_cast<int>(LinearProjection::kQkv)] = {(shard.heads + 2 * shard.kv_heads) * d, h};
  s[static_cast<int>(LinearProjection::kO)] = {h, shard.heads * d};
  s[static_cast<int>(LinearProjection::kGateUp)] = {2 * shard.intermediate, h};
  s[static_cast<int>(LinearProjection::kDown)] = {h, shard.intermediate};
  return s;
}

absl::Status check_fp8_linear_shapes(const ModelConfig& c, const TensorParallelShard& shard,
                                     const QuantizationKeep& keep) {
  const auto shapes = decoder_layer_linear_shapes(c, shard);
  const auto kept = keep.kept_layers(c.num_layers);
  for (int p = 0; p < kLinearProjections; ++p) {
    const LinearWeightShape& s = shapes[p];
    if (kept[p] == c.num_layers || (s.rows % 16 == 0 && s.cols % 16 == 0)) continue;
    const std::string_view name = linear_projection_name(static_cast<LinearProjection>(p));
    return absl::InvalidArgumentError(
        str_cat("quantization: fp8: the ", name, " weights are ", s.rows, " x ", s.cols,
                shard.size > 1 ? " per tensor-parallel rank" : "",
                "; FP8 GEMMs take rows and columns in multiples of 16 (keep them in the "
                "compute dtype with quantization_keep: ",
                name, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<DecoderLayer> keep_layer_fp8(const DecoderLayer& staged, Backend& b,
                                            TensorArena& arena,
                                            const std::array<bool, kLinearProjections>& keep,
                                            const std::array<Tensor, kLinearProjections>& stored,
                                            size_t* bytes) {
  DecoderLayer kept;
  auto quantized = [&](const Tensor& w, Tensor& out) -> absl::Status {
    TESSERA_ASSIGN_OR_RETURN(out, arena.allocate(b, DType::kF8_E4M3, {w.dim(0), w.dim(1)}));
    TESSERA_ASSIGN_OR_RETURN(const Tensor scale, arena.allocate(b, DType::kF32, {w.dim(0)}));
    b.quantize_fp8(w, out, scale);
    out.scale = scale.as<float>();
    *bytes += out.nbytes() + scale.nbytes();
    return absl::OkStatus();
  };
  auto copied = [&](const Tensor& t, Tensor& out) -> absl::Status {
    if (t.data == nullptr) return absl::OkStatus();  // not in this family
    TESSERA_ASSIGN_OR_RETURN(out, arena.allocate(b, t.dtype, {t.numel()}));
    out.rank = t.rank;
    out.shape = t.shape;
    b.copy_to(b, out.data, t.data, t.nbytes());
    *bytes += t.nbytes();
    return absl::OkStatus();
  };
  const std::pair<LinearProjection, std::pair<const Tensor*, Tensor*>> linears[] = {
      {LinearProjection::kQkv, {&staged.qkv, &kept.qkv}},
      {LinearProjection::kO, {&staged.o, &kept.o}},
      {LinearProjection::kGateUp, {&staged.gate_up, &kept.gate_up}},
      {LinearProjection::kDown, {&staged.down, &kept.down}}};
  for (const auto& [projection, tensors] : linears) {
    const auto [from, to] = tensors;
    const int p = static_cast<int>(projection);
    if (stored[p].data != nullptr) {
      *to = stored[p];  // its bytes were counted when it was loaded
      continue;
    }
    TESSERA_RETURN_IF_ERROR(keep[p] ? copied(*from, *to) : quantized(*from, *to));
  }
  for (auto [from, to] : {std::pair{&staged.input_layernorm, &kept.input_layernorm},
                          std::pair{&staged.qkv_bias, &kept.qkv_bias},
                          std::pair{&staged.q_norm, &kept.q_norm},
                          std::pair{&staged.k_norm, &kept.k_norm},
                          std::pair{&staged.post_attention_layernorm, &kept.post_attention_layernorm},
                          std::pair{&staged.pre_feedforward_layernorm, &kept.pre_feedforward_layernorm},
                          std::pair{&staged.post_feedforward_layernorm, &kept.post_feedforward_layernorm}}) {
    TESSERA_RETURN_IF_ERROR(copied(*from, *to));
  }
  // The staged tensors are freed after this returns: the device must be done with them.
  TESSERA_RETURN_IF_ERROR(b.synchronize());
  return kept;
}

int64_t decoder_layer_elements(const ModelConfig& c, const TensorParallelShard& shard) {
  const auto linears = decoder_layer_linear_shapes(c, shard);
  const int64_t qkv_rows = linears[static_cast<int>(LinearProjection::kQkv)].rows;
  int64_t elements = (c.sandwich_norms ? 4 : 2) * c.hidden_size + (c.qk_norm ? 2 * c.head_dim : 0) +
                     (c.qkv_bias ? qkv_rows : 0);
  for (const LinearWeightShape& s : linears) elements += s.rows * s.cols;
  return elements;
}

}  // namespace tessera
