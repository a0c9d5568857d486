// Stored weight blocks to bf16 or fp16 on the GPU (dequant_gpu.h): one thread per output element,
// each decoding its own block's scales and, when asked, checking that what it wrote is finite.
// Byte offsets and arithmetic follow runtime/model/dequant.cc type by type (its comments describe
// the bit layouts); blocks are read byte by byte, since GGML blocks (18, 20, 22... bytes) leave
// their fields unaligned.
#define TESSERA_GPU_KERNELS_ONLY
#include <algorithm>

#include "kernels/dequant_gpu.h"

namespace tessera::gpu {
namespace {

constexpr int kThreads = 256;

// Arithmetic goes through gpu.h's mul_rn / add_rn / sub_rn: the host reference rounds after
// every operation, so no fma may fuse two of them.

// Little-endian loads at any alignment.
__device__ __forceinline__ uint32_t load_u16(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8);
}

__device__ __forceinline__ uint32_t load_u32(const uint8_t* p) {
  return load_u16(p) | (load_u16(p + 2) << 16);
}

// IEEE fp16 bits to fp32, as base/half.h's half_to_float (exact; NaN payloads kept).
__device__ __forceinline__ float f16_to_f32(uint32_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24 is exact in fp32.
    const float mag = mul_rn(static_cast<float>(mant), 5.9604644775390625e-8f);
    return __uint_as_float(__float_as_uint(mag) | sign);
  }
  if (exp == 31) return __uint_as_float(sign | 0x7f800000u | (mant << 13));
  return __uint_as_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

__device__ __forceinline__ float load_f16(const uint8_t* p) {
  return f16_to_f32(load_u16(p));
}

// The 6-bit scale and min of K-quant sub-block j (of 8), packed in 12 bytes (dequant.cc's
// scale_min_k4).
__device__ __forceinline__ void scale_min_k4(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// One struct per stored type: kBlockElems elements in kBlockBytes bytes (runtime/model/dtype.cc's
// traits); element(b, i) is element i of the block at b, in fp32.

struct PlainF32 {
  static constexpr int kBlockElems = 1, kBlockBytes = 4;
  __device__ static float element(const uint8_t* b, int) { return __uint_as_float(load_u32(b)); }
};

struct PlainF16 {
  static constexpr int kBlockElems = 1, kBlockBytes = 2;
  __device__ static float element(const uint8_t* b, int) { return load_f16(b); }
};

struct PlainBF16 {
  static constexpr int kBlockElems = 1, kBlockBytes = 2;
  __device__ static float element(const uint8_t* b, int) {
    return __uint_as_float(load_u16(b) << 16);
  }
};

// The 4-bit quant of element i (of 32) in 16 bytes: low nibbles hold 0..15, high nibbles 16..31.
__device__ __forceinline__ int nibble_of_32(const uint8_t* qs, int i) {
  const int byte = qs[i % 16];
  return i < 16 ? (byte & 0x0f) : (byte >> 4);
}

// [d f16][qs 16]; (q - 8) * d.
struct Q4_0 {
  static constexpr int kBlockElems = 32, kBlockBytes = 18;
  __device__ static float element(const uint8_t* b, int i) {
    const float d = load_f16(b);
    return mul_rn(static_cast<float>(nibble_of_32(b + 2, i) - 8), d);
  }
};

// [d f16][m f16][qs 16]; q * d + m.
struct Q4_1 {
  static constexpr int kBlockElems = 32, kBlockBytes = 20;
  __device__ static float element(const uint8_t* b, int i) {
    const float d = load_f16(b);
    const float m = load_f16(b + 2);
    return add_rn(mul_rn(static_cast<float>(nibble_of_32(b + 4, i)), d), m);
  }
};

// [d f16][qh u32: bit i is the 5th bit of element i][qs 16]; (q - 16) * d.
struct Q5_0 {
  static constexpr int kBlockElems = 32, kBlockBytes = 22;
  __device__ static float element(const uint8_t* b, int i) {
    const float d = load_f16(b);
    const uint32_t qh = load_u32(b + 2);
    const int q = nibble_of_32(b + 6, i) | static_cast<int>(((qh >> i) & 1u) << 4);
    return mul_rn(static_cast<float>(q - 16), d);
  }
};

// [d f16][m f16][qh u32][qs 16]; q * d + m.
struct Q5_1 {
  static constexpr int kBlockElems = 32, kBlockBytes = 24;
  __device__ static float element(const uint8_t* b, int i) {
    const float d = load_f16(b);
    const float m = load_f16(b + 2);
    const uint32_t qh = load_u32(b + 4);
    const int q = nibble_of_32(b + 8, i) | static_cast<int>(((qh >> i) & 1u) << 4);
    return add_rn(mul_rn(static_cast<float>(q), d), m);
  }
};

// [d f16][qs int8 32]; q * d.
struct Q8_0 {
  static constexpr int kBlockElems = 32, kBlockBytes = 34;
  __device__ static float element(const uint8_t* b, int i) {
    const float d = load_f16(b);
    return mul_rn(static_cast<float>(static_cast<int8_t>(b[2 + i])), d);
  }
};

// The 2 low bits of K-quant element i (of 256) in 64 bytes: two halves of 128; in a half, element
// 32s + l is bits 2s..2s+1 of byte 32 * half + l.
__device__ __forceinline__ int two_bits_of_256(const uint8_t* qs, int i) {
  const int half = i / 128, j = i % 128;
  return (qs[32 * half + j % 32] >> (2 * (j / 32))) & 3;
}

// [scales 16: low nibble scale, high nibble min][qs 64][d f16][dmin f16];
// (d * scale) * q - dmin * min.
struct Q2_K {
  static constexpr int kBlockElems = 256, kBlockBytes = 84;
  __device__ static float element(const uint8_t* b, int i) {
    const float d = load_f16(b + 80);
    const float dmin = load_f16(b + 82);
    const int sc = b[i / 16];
    const float dl = mul_rn(d, static_cast<float>(sc & 0x0f));
    const float ml = mul_rn(dmin, static_cast<float>(sc >> 4));
    return sub_rn(mul_rn(dl, static_cast<float>(two_bits_of_256(b + 16, i))), ml);
  }
};

// [hmask 32][qs 64][scales 12: sixteen 6-bit scales][d f16]; (d * (scale - 32)) * (q - 4 * h)
// where h is set when bit i / 32 of hmask[i % 32] is clear.
struct Q3_K {
  static constexpr int kBlockElems = 256, kBlockBytes = 110;
  __device__ static float element(const uint8_t* b, int i) {
    const uint8_t* s = b + 96;
    const float d = load_f16(b + 108);
    const int k = i / 16;
    const int lo = k < 8 ? (s[k] & 0x0f) : (s[k - 8] >> 4);
    const int hi = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
    const float dl = mul_rn(d, static_cast<float>((lo | (hi << 4)) - 32));
    const int high_clear = ((b[i % 32] >> (i / 32)) & 1) == 0;
    return mul_rn(dl, static_cast<float>(two_bits_of_256(b + 32, i) - 4 * high_clear));
  }
};

// The 4 low bits of K-quant element i (of 256) in 128 bytes: sub-blocks 2c and 2c + 1 (of 32) are
// the low and high nibbles of bytes 32c .. 32c + 31.
__device__ __forceinline__ int nibble_of_256(const uint8_t* qs, int i) {
  const int sb = i / 32;
  return (qs[32 * (sb / 2) + i % 32] >> (4 * (sb % 2))) & 0x0f;
}

// [d f16][dmin f16][scales 12][qs 128]; (d * scale) * q - dmin * min per sub-block of 32.
struct Q4_K {
  static constexpr int kBlockElems = 256, kBlockBytes = 144;
  __device__ static float element(const uint8_t* b, int i) {
    const float d = load_f16(b);
    const float dmin = load_f16(b + 2);
    int sc, m;
    scale_min_k4(i / 32, b + 4, &sc, &m);
    const float d1 = mul_rn(d, static_cast<float>(sc));
    const float m1 = mul_rn(dmin, static_cast<float>(m));
    return sub_rn(mul_rn(d1, static_cast<float>(nibble_of_256(b + 16, i))), m1);
  }
};

// Q4_K with [qh 32] before qs: bit i / 32 of qh[i % 32] is the 5th bit of element i.
struct Q5_K {
  static constexpr int kBlockElems = 256, kBlockBytes = 176;
  __device__ static float element(const uint8_t* b, int i) {
    const float d = load_f16(b);
    const float dmin = load_f16(b + 2);
    int sc, m;
    scale_min_k4(i / 32, b + 4, &sc, &m);
    const float d1 = mul_rn(d, static_cast<float>(sc));
    const float m1 = mul_rn(dmin, static_cast<float>(m));
    const int q = nibble_of_256(b + 48, i) | (((b[16 + i % 32] >> (i / 32)) & 1) << 4);
    return sub_rn(mul_rn(d1, static_cast<float>(q)), m1);
  }
};

// [ql 128][qh 64][scales int8 16][d f16]; (d * scale) * (q - 32). In half h of 128, element j
// takes its low nibble from ql[64h + j % 64] (low nibbles for j < 64) and its top 2 bits from bits
// 2 * (j / 32) of qh[32h + j % 32].
struct Q6_K {
  static constexpr int kBlockElems = 256, kBlockBytes = 210;
  __device__ static float element(const uint8_t* b, int i) {
    const float d = load_f16(b + 208);
    const int half = i / 128, j = i % 128;
    const int lo = (b[64 * half + j % 64] >> (4 * (j / 64))) & 0x0f;
    const int hi = (b[128 + 32 * half + j % 32] >> (2 * (j / 32))) & 3;
    const float ds = mul_rn(d, static_cast<float>(static_cast<int8_t>(b[192 + i / 16])));
    return mul_rn(ds, static_cast<float>((lo | (hi << 4)) - 32));
  }
};

// [d f32][qs int8 256][bsums int16 16 (unused)]; d * q.
struct Q8_K {
  static constexpr int kBlockElems = 256, kBlockBytes = 292;
  __device__ static float element(const uint8_t* b, int i) {
    const float d = __uint_as_float(load_u32(b));
    return mul_rn(d, static_cast<float>(static_cast<int8_t>(b[4 + i])));
  }
};

// runtime/model/gguf_weights.cc's qk_unpermuted_row: stored row h * head_dim + 2j + t holds HF
// row h * head_dim + t * head_dim / 2 + j.
__device__ __forceinline__ int64_t qk_unpermuted_row(int64_t stored_row, int64_t head_dim) {
  const int64_t head = stored_row / head_dim;
  const int64_t r = stored_row % head_dim;
  return head * head_dim + (r % 2) * (head_dim / 2) + r / 2;
}

template <typename Format, typename T>
__global__ void dequantize_kernel(const uint8_t* src, int64_t first_block, int64_t n_elems,
                                  DequantTarget<T> target) {
  const int64_t blocks_per_row = target.row_elems / Format::kBlockElems;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n_elems;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t local_block = e / Format::kBlockElems;
    const int i = static_cast<int>(e % Format::kBlockElems);
    const float v = Format::element(src + local_block * Format::kBlockBytes, i);
    const int64_t block = first_block + local_block;
    const int64_t stored_row = block / blocks_per_row;
    const int64_t row =
        target.qk_head_dim > 0 ? qk_unpermuted_row(stored_row, target.qk_head_dim) : stored_row;
    const int64_t col = (block % blocks_per_row) * Format::kBlockElems + i;
    const T out = from_float<T>(v);
    target.dst[row * target.row_elems + col] = out;
    if (target.first_non_finite != nullptr) {
      note_non_finite(out, static_cast<unsigned long long>(block * Format::kBlockElems + i),
                      target.first_non_finite);
    }
  }
}

template <typename Format, typename T>
gpuError_t launch(const uint8_t* src, int64_t first_block, int64_t n_blocks,
                  const DequantTarget<T>& target, gpuStream_t stream) {
  if (target.row_elems <= 0 || target.row_elems % Format::kBlockElems != 0) {
    return gpuErrorInvalidValue;
  }
  const int64_t n_elems = n_blocks * Format::kBlockElems;
  if (n_elems <= 0) return gpuSuccess;
  const int64_t grid = std::min<int64_t>((n_elems + kThreads - 1) / kThreads, 65536);
  dequantize_kernel<Format, T>
      <<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(src, first_block, n_elems, target);
  return gpuGetLastError();
}

// Calls fn(Format{}) with the format of `type`; false, without calling it, when there is none.
template <typename Fn>
bool visit_format(DType type, Fn&& fn) {
  switch (type) {
    case DType::kF32:
      fn(PlainF32{});
      return true;
    case DType::kF16:
      fn(PlainF16{});
      return true;
    case DType::kBF16:
      fn(PlainBF16{});
      return true;
    case DType::kQ4_0:
      fn(Q4_0{});
      return true;
    case DType::kQ4_1:
      fn(Q4_1{});
      return true;
    case DType::kQ5_0:
      fn(Q5_0{});
      return true;
    case DType::kQ5_1:
      fn(Q5_1{});
      return true;
    case DType::kQ8_0:
      fn(Q8_0{});
      return true;
    case DType::kQ2_K:
      fn(Q2_K{});
      return true;
    case DType::kQ3_K:
      fn(Q3_K{});
      return true;
    case DType::kQ4_K:
      fn(Q4_K{});
      return true;
    case DType::kQ5_K:
      fn(Q5_K{});
      return true;
    case DType::kQ6_K:
      fn(Q6_K{});
      return true;
    case DType::kQ8_K:
      fn(Q8_K{});
      return true;
    default:
      return false;
  }
}

}  // namespace

bool dequantizes_on_device(DType type) {
  return visit_format(type, [](auto) {});
}

template <typename T>
gpuError_t dequantize(DType type, const uint8_t* src, int64_t first_block, int64_t n_blocks,
                      const DequantTarget<T>& target, gpuStream_t stream) {
  gpuError_t err = gpuErrorInvalidValue;
  visit_format(type, [&](auto format) {
    err = launch<decltype(format), T>(src, first_block, n_blocks, target, stream);
  });
  return err;
}

#define TESSERA_DEQUANT_LAUNCHER(T)                                                       \
  template gpuError_t dequantize(DType, const uint8_t*, int64_t, int64_t, const DequantTarget<T>&, \
                                 gpuStream_t);
TESSERA_FOR_EACH_ELEMENT_TYPE(TESSERA_DEQUANT_LAUNCHER)
#undef TESSERA_DEQUANT_LAUNCHER

}  // namespace tessera::gpu
