// Block layouts follow ggml's block_q* structs (ggml-common.h); each function converts one block.
// Arithmetic is ordered as in ggml's reference dequantize_row_* (scale products first, then the
// quant), so results match gguf-py / ggml bit for bit on the same inputs.
#include "runtime/model_io/dequant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/fp8.h"
#include "base/half.h"
#include "base/str_cat.h"

namespace tessera {
namespace {

constexpr int kQK = 32;    // elements per Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 block
constexpr int kQKK = 256;  // elements per K-quant super-block

inline float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return half_to_float(h);
}

// Q4_0: [d f16][qs 16 bytes]; element j in the low nibble of qs[j], j+16 in the high nibble.
void block_q4_0(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = static_cast<float>((qs[j] & 0x0f) - 8) * d;
    y[j + kQK / 2] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

// Q4_1: [d f16][m f16][qs 16 bytes]; value = q * d + m.
void block_q4_1(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float m = load_f16(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = static_cast<float>(qs[j] & 0x0f) * d + m;
    y[j + kQK / 2] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

// Q5_0: [d f16][qh u32: bit j = 5th bit of element j][qs 16 bytes]; value = (q - 16) * d.
void block_q5_0(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < kQK / 2; ++j) {
    const int h0 = static_cast<int>((qh >> j) & 1u) << 4;
    const int h1 = static_cast<int>((qh >> (j + kQK / 2)) & 1u) << 4;
    y[j] = static_cast<float>(((qs[j] & 0x0f) | h0) - 16) * d;
    y[j + kQK / 2] = static_cast<float>(((qs[j] >> 4) | h1) - 16) * d;
  }
}

// Q5_1: [d f16][m f16][qh u32][qs 16 bytes]; value = q * d + m.
void block_q5_1(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float m = load_f16(b + 2);
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < kQK / 2; ++j) {
    const int h0 = static_cast<int>((qh >> j) & 1u) << 4;
    const int h1 = static_cast<int>((qh >> (j + kQK / 2)) & 1u) << 4;
    y[j] = static_cast<float>((qs[j] & 0x0f) | h0) * d + m;
    y[j + kQK / 2] = static_cast<float>((qs[j] >> 4) | h1) * d + m;
  }
}

// Q8_0: [d f16][qs int8 x 32].
void block_q8_0(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
}

// Q2_K: [scales 16: low nibble scale, high nibble min, per 16 elements][qs 64][d f16][dmin f16].
// The 256 elements are two halves of 128; in a half, element 32*s + l is bits 2s..2s+1 of
// qs[32*half + l].
void block_q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* qs = b + 16;
  const float d = load_f16(b + 80);
  const float dmin = load_f16(b + 82);
  for (int i = 0; i < kQKK; ++i) {
    const int half = i / 128, j = i % 128;
    const int q = (qs[32 * half + j % 32] >> (2 * (j / 32))) & 3;
    const uint8_t sc = scales[i / 16];
    const float dl = d * static_cast<float>(sc & 0x0f);
    const float ml = dmin * static_cast<float>(sc >> 4);
    y[i] = dl * static_cast<float>(q) - ml;
  }
}

// Q3_K: [hmask 32][qs 64][scales 12: sixteen 6-bit scales][d f16]. The low 2 bits of a quant are
// laid out as in Q2_K; bit (i / 32) of hmask[i % 32] *clear* means subtract 4.
void block_q3_k(const uint8_t* b, float* y) {
  const uint8_t* hmask = b;
  const uint8_t* qs = b + 32;
  const uint8_t* s = b + 96;
  const float d = load_f16(b + 108);
  float dl[16];
  for (int k = 0; k < 16; ++k) {
    // Low 4 bits: nibbles of s[0..7] (low nibbles first); high 2 bits: 2-bit fields of s[8..11].
    const int lo = k < 8 ? (s[k] & 0x0f) : (s[k - 8] >> 4);
    const int hi = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
    dl[k] = d * static_cast<float>((lo | (hi << 4)) - 32);
  }
  for (int i = 0; i < kQKK; ++i) {
    const int half = i / 128, j = i % 128;
    const int low = (qs[32 * half + j % 32] >> (2 * (j / 32))) & 3;
    const int high_clear = ((hmask[i % 32] >> (i / 32)) & 1) == 0;
    y[i] = dl[i / 16] * static_cast<float>(low - 4 * high_clear);
  }
}

// The 6-bit scale and min of sub-block j (of 8) packed in 12 bytes (ggml get_scale_min_k4):
// bytes 0..3 hold scales 0..3 (low 6 bits), bytes 4..7 mins 0..3; sub-blocks 4..7 take their low
// 4 bits from bytes 8..11 and their high 2 bits from the top bits of bytes 0..7.
inline void scale_min_k4(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q4_K: [d f16][dmin f16][scales 12][qs 128]; 8 sub-blocks of 32. Sub-blocks 2c and 2c+1 are the
// low and high nibbles of qs[32c .. 32c+31].
void block_q4_k(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float dmin = load_f16(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qs = b + 16;
  for (int sb = 0; sb < 8; ++sb) {
    int sc, m;
    scale_min_k4(sb, scales, &sc, &m);
    const float d1 = d * static_cast<float>(sc);
    const float m1 = dmin * static_cast<float>(m);
    const uint8_t* q = qs + 32 * (sb / 2);
    const int shift = 4 * (sb % 2);
    for (int l = 0; l < 32; ++l) {
      y[32 * sb + l] = d1 * static_cast<float>((q[l] >> shift) & 0x0f) - m1;
    }
  }
}

// Q5_K: Q4_K plus [qh 32] before qs: bit sb of qh[l] is the 5th bit of element 32*sb + l.
void block_q5_k(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float dmin = load_f16(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  for (int sb = 0; sb < 8; ++sb) {
    int sc, m;
    scale_min_k4(sb, scales, &sc, &m);
    const float d1 = d * static_cast<float>(sc);
    const float m1 = dmin * static_cast<float>(m);
    const uint8_t* q = qs + 32 * (sb / 2);
    const int shift = 4 * (sb % 2);
    for (int l = 0; l < 32; ++l) {
      const int v = ((q[l] >> shift) & 0x0f) | (((qh[l] >> sb) & 1) << 4);
      y[32 * sb + l] = d1 * static_cast<float>(v) - m1;
    }
  }
}

// Q6_K: [ql 128][qh 64][scales int8 16][d f16]; value = d * scale[i/16] * (q - 32). Two halves of
// 128: in half h, element j takes its low nibble from ql[64h + j%64] (low nibbles for j < 64) and
// its top 2 bits from bits 2*(j/32) of qh[32h + j%32].
void block_q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* scales = reinterpret_cast<const int8_t*>(b + 192);
  const float d = load_f16(b + 208);
  for (int i = 0; i < kQKK; ++i) {
    const int half = i / 128, j = i % 128;
    const int lo = (ql[64 * half + j % 64] >> (4 * (j / 64))) & 0x0f;
    const int hi = (qh[32 * half + j % 32] >> (2 * (j / 32))) & 3;
    const float ds = d * static_cast<float>(scales[i / 16]);
    y[i] = ds * static_cast<float>((lo | (hi << 4)) - 32);
  }
}

// Q8_K: [d f32][qs int8 256][bsums int16 16 (sums for dot products; unused here)].
void block_q8_k(const uint8_t* b, float* y) {
  float d;
  std::memcpy(&d, b, 4);
  for (int i = 0; i < kQKK; ++i) y[i] = d * static_cast<float>(static_cast<int8_t>(b[4 + i]));
}

using BlockFn = void (*)(const uint8_t*, float*);

BlockFn block_fn(DType type) {
  switch (type) {
    case DType::kQ4_0:
      return block_q4_0;
    case DType::kQ4_1:
      return block_q4_1;
    case DType::kQ5_0:
      return block_q5_0;
    case DType::kQ5_1:
      return block_q5_1;
    case DType::kQ8_0:
      return block_q8_0;
    case DType::kQ2_K:
      return block_q2_k;
    case DType::kQ3_K:
      return block_q3_k;
    case DType::kQ4_K:
      return block_q4_k;
    case DType::kQ5_K:
      return block_q5_k;
    case DType::kQ6_K:
      return block_q6_k;
    case DType::kQ8_K:
      return block_q8_k;
    default:
      return nullptr;
  }
}

// Plain element types: one element per "block", read unaligned.
template <typename T>
void convert_plain(const uint8_t* src, size_t n, float* out) {
  for (size_t k = 0; k < n; ++k) {
    T v;
    std::memcpy(&v, src + k * sizeof(T), sizeof(T));
    out[k] = static_cast<float>(v);
  }
}

bool convert_plain_type(DType type, const uint8_t* src, size_t n, float* out) {
  switch (type) {
    case DType::kF32:
      if (n != 0) std::memcpy(out, src, n * sizeof(float));
      return true;
    case DType::kF16:
      for (size_t k = 0; k < n; ++k) out[k] = load_f16(src + 2 * k);
      return true;
    case DType::kBF16:
      for (size_t k = 0; k < n; ++k) {
        uint16_t v;
        std::memcpy(&v, src + 2 * k, 2);
        out[k] = bf16_to_float(v);
      }
      return true;
    case DType::kF64:
      convert_plain<double>(src, n, out);
      return true;
    case DType::kF8_E4M3:
      for (size_t k = 0; k < n; ++k) out[k] = fp8_e4m3fn_to_float(src[k]);
      return true;
    case DType::kF8_E5M2:
      for (size_t k = 0; k < n; ++k) out[k] = fp8_e5m2_to_float(src[k]);
      return true;
    case DType::kI8:
      convert_plain<int8_t>(src, n, out);
      return true;
    case DType::kI16:
      convert_plain<int16_t>(src, n, out);
      return true;
    case DType::kI32:
      convert_plain<int32_t>(src, n, out);
      return true;
    case DType::kI64:
      convert_plain<int64_t>(src, n, out);
      return true;
    default:
      return false;
  }
}

}  // namespace

absl::StatusOr<size_t> dtype_nbytes(DType type, int64_t n_elements) {
  const DTypeTraits* traits = dtype_traits(static_cast<uint32_t>(type));
  if (traits == nullptr) {
    return absl::InvalidArgumentError(str_cat("unknown dtype id ", static_cast<uint32_t>(type)));
  }
  if (n_elements < 0 || static_cast<uint64_t>(n_elements) % traits->block_elems != 0) {
    return absl::InvalidArgumentError(str_cat(n_elements, " elements of ", traits->name,
                                              " are not a whole number of ", traits->block_elems,
                                              "-element blocks"));
  }
  size_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(n_elements) / traits->block_elems,
                             traits->block_bytes, &bytes)) {
    return absl::InvalidArgumentError(
        str_cat(n_elements, " elements of ", traits->name, " overflow a byte count"));
  }
  return bytes;
}

namespace {

// Index of the first non-finite value in `v`, or -1.
int64_t first_non_finite(std::span<const float> v) {
  for (size_t k = 0; k < v.size(); ++k) {
    if (!std::isfinite(v[k])) return static_cast<int64_t>(k);
  }
  return -1;
}

// Plain elements are converted (and checked) in runs of this many, so that a run is still in
// cache when it is checked.
constexpr size_t kPlainRun = 4096;

// dequantize_f32, checking for non-finite outputs when `check`: the first one's index, or -1.
absl::StatusOr<int64_t> convert(DType type, std::span<const uint8_t> src, std::span<float> out,
                                bool check) {
  const DTypeTraits* traits = dtype_traits(static_cast<uint32_t>(type));
  if (traits == nullptr || !traits->dequantizable) {
    const std::string name =
        traits != nullptr ? std::string(traits->name) : str_cat("id ", static_cast<uint32_t>(type));
    return absl::UnimplementedError(
        str_cat("dtype ", name, " cannot be converted to fp32 by this build"));
  }
  absl::StatusOr<size_t> want = dtype_nbytes(type, static_cast<int64_t>(out.size()));
  if (!want.ok()) return want.status();
  if (src.size() != *want) {
    return absl::InvalidArgumentError(str_cat(out.size(), " elements of ", traits->name, " need ",
                                              *want, " bytes, got ", src.size()));
  }
  const BlockFn fn = block_fn(type);
  if (fn == nullptr) {
    if (traits->block_elems != 1) {
      return absl::InternalError(
          str_cat("dtype ", traits->name, " is marked dequantizable but has no converter"));
    }
    for (size_t done = 0; done < out.size(); done += kPlainRun) {
      const size_t n = std::min(kPlainRun, out.size() - done);
      if (!convert_plain_type(type, src.data() + done * traits->block_bytes, n,
                              out.data() + done)) {
        return absl::InternalError(
            str_cat("dtype ", traits->name, " is marked dequantizable but has no converter"));
      }
      if (!check) continue;
      if (const int64_t bad = first_non_finite(out.subspan(done, n)); bad >= 0) {
        return static_cast<int64_t>(done) + bad;
      }
    }
    return -1;
  }
  const size_t n_blocks = out.size() / traits->block_elems;
  for (size_t blk = 0; blk < n_blocks; ++blk) {
    float* y = out.data() + blk * traits->block_elems;
    fn(src.data() + blk * traits->block_bytes, y);
    if (!check) continue;
    if (const int64_t bad = first_non_finite({y, traits->block_elems}); bad >= 0) {
      return static_cast<int64_t>(blk * traits->block_elems) + bad;
    }
  }
  return -1;
}

}  // namespace

absl::Status dequantize_f32(DType type, std::span<const uint8_t> src, std::span<float> out) {
  return convert(type, src, out, /*check=*/false).status();
}

absl::StatusOr<int64_t> dequantize_f32_checked(DType type, std::span<const uint8_t> src,
                                               std::span<float> out) {
  return convert(type, src, out, /*check=*/true);
}

absl::StatusOr<int64_t> dequantize_scaled_f32_checked(DType type, std::span<const uint8_t> src,
                                                      const WeightScales& scales,
                                                      int64_t row_elems, int64_t first_row,
                                                      std::span<float> out) {
  if (!scales.scaled()) return convert(type, src, out, /*check=*/true);
  const size_t n = out.size();
  if (row_elems <= 0 || n % static_cast<size_t>(row_elems) != 0 || first_row < 0) {
    return absl::InternalError(str_cat("scaled conversion of ", n, " elements in rows of ",
                                       row_elems, " from row ", first_row));
  }
  if (scales.values == nullptr || scales.values->empty()) {
    return absl::InternalError(str_cat(scales.describe(), " hold no values"));
  }
  const DTypeTraits* traits = dtype_traits(static_cast<uint32_t>(type));
  if (traits == nullptr || traits->block_elems != 1) {
    return absl::InvalidArgumentError(str_cat(scales.describe(), " apply to plain elements, not ",
                                              dtype_name(type), " blocks"));
  }
  const size_t elem_bytes = traits->block_bytes;
  if (src.size() != n * elem_bytes) {
    return absl::InvalidArgumentError(str_cat(n, " elements of ", traits->name, " need ",
                                              n * elem_bytes, " bytes, got ", src.size()));
  }
  // Convert (unchecked), scale, then check, run by run: a run is still in cache when it is
  // scaled and checked. Runs are whole rows for per-row and per-block scales.
  const size_t run = scales.kind == WeightScales::Kind::kTensor
                         ? kPlainRun
                         : static_cast<size_t>(row_elems) *
                               std::max<size_t>(1, kPlainRun / static_cast<size_t>(row_elems));
  for (size_t done = 0; done < n; done += run) {
    const size_t len = std::min(run, n - done);
    std::span<float> y = out.subspan(done, len);
    if (absl::Status st =
            convert(type, src.subspan(done * elem_bytes, len * elem_bytes), y, /*check=*/false)
                .status();
        !st.ok()) {
      return st;
    }
    switch (scales.kind) {
      case WeightScales::Kind::kNone:
        break;
      case WeightScales::Kind::kTensor: {
        const float s = (*scales.values)[0];
        for (float& v : y) v *= s;
        break;
      }
      case WeightScales::Kind::kRow:
      case WeightScales::Kind::kBlock:
        for (size_t k = 0; k < len; k += static_cast<size_t>(row_elems)) {
          const int64_t row = first_row + static_cast<int64_t>((done + k) / static_cast<size_t>(row_elems));
          float* r = y.data() + k;
          if (scales.kind == WeightScales::Kind::kRow) {
            const float s = scales.at(row, 0);
            for (int64_t c = 0; c < row_elems; ++c) r[c] *= s;
            continue;
          }
          // Along a row the block changes every block_cols columns of the stored tensor.
          for (int64_t c = 0; c < row_elems;) {
            const int64_t stored_col = scales.col0 + c;
            const int64_t end = std::min<int64_t>(
                row_elems, c + scales.block_cols - stored_col % scales.block_cols);
            const float s = scales.at(row, c);
            for (; c < end; ++c) r[c] *= s;
          }
        }
        break;
    }
    if (const int64_t bad = first_non_finite(y); bad >= 0) {
      return static_cast<int64_t>(done) + bad;
    }
  }
  return -1;
}

}  // namespace tessera
