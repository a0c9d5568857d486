// Each CPU kernel against a straightforward double-precision reference.
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/cpu_ops.h"

namespace tessera {
namespace {

std::vector<float> random_vector(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// ||a - b|| / ||b||
double relative_error(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

TEST(CpuOps, RmsNormMatchesReference) {
  for (int64_t hidden : {1, 7, 64, 576, 4096}) {
    const int64_t n = 5;
    auto x = random_vector(n * hidden, 1, 3.0f), w = random_vector(hidden, 2);
    std::vector<float> out(n * hidden, NAN);
    cpu::rms_norm(x.data(), w.data(), n, hidden, NormSpec{1e-5f}, out.data());
    std::vector<double> ref(n * hidden);
    for (int64_t t = 0; t < n; ++t) {
      double ss = 0;
      for (int64_t i = 0; i < hidden; ++i) ss += double(x[t * hidden + i]) * x[t * hidden + i];
      const double inv = 1.0 / std::sqrt(ss / hidden + 1e-5);
      for (int64_t i = 0; i < hidden; ++i) ref[t * hidden + i] = x[t * hidden + i] * inv * w[i];
    }
    EXPECT_LT(relative_error(out, ref), 1e-6) << "hidden=" << hidden;
  }
}

TEST(CpuOps, AddRmsNormUpdatesResidualAndNormalizes) {
  const int64_t n = 3, hidden = 96;
  auto residual = random_vector(n * hidden, 3), x = random_vector(n * hidden, 4),
       w = random_vector(hidden, 5);
  std::vector<float> summed(n * hidden);
  for (size_t i = 0; i < summed.size(); ++i) summed[i] = residual[i] + x[i];
  std::vector<float> expected(n * hidden), out(n * hidden, NAN);
  cpu::rms_norm(summed.data(), w.data(), n, hidden, NormSpec{1e-6f}, expected.data());
  cpu::add_rms_norm(residual.data(), x.data(), w.data(), n, hidden, NormSpec{1e-6f}, out.data());
  for (size_t i = 0; i < summed.size(); ++i) {
    EXPECT_FLOAT_EQ(residual[i], summed[i]);
    EXPECT_NEAR(out[i], expected[i], 1e-5);
  }
}

TEST(CpuOps, LinearMatchesReferenceForGemvAndGemm) {
  for (int64_t m : {1, 3, 17}) {
    const int64_t n = 37, k = 65;
    auto x = random_vector(m * k, 6), w = random_vector(n * k, 7);
    std::vector<float> out(m * n, NAN);
    cpu::linear(x.data(), w.data(), m, n, k, out.data());
    std::vector<double> ref(m * n, 0.0);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t l = 0; l < k; ++l) ref[i * n + j] += double(x[i * k + l]) * w[j * k + l];
    EXPECT_LT(relative_error(out, ref), 1e-5) << "m=" << m;
  }
}

TEST(CpuOps, SiluMulMatchesReference) {
  const int64_t n = 4, inter = 33;
  auto gu = random_vector(n * 2 * inter, 8, 4.0f);
  std::vector<float> out(n * inter, NAN);
  cpu::gated_activation(gu.data(), n, inter, Activation::kSilu, out.data());
  std::vector<double> ref(n * inter);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t i = 0; i < inter; ++i) {
      const double g = gu[t * 2 * inter + i], u = gu[t * 2 * inter + inter + i];
      ref[t * inter + i] = g / (1.0 + std::exp(-g)) * u;
    }
  EXPECT_LT(relative_error(out, ref), 1e-6);
}

TEST(CpuOps, EmbeddingGathersRows) {
  const int64_t vocab = 10, hidden = 6;
  auto table = random_vector(vocab * hidden, 9);
  const std::vector<int32_t> ids = {3, 0, 9, 3};
  std::vector<float> out(ids.size() * hidden, NAN);
  cpu::embedding(table.data(), 0, vocab, hidden, ids.data(), ids.size(), 1.0f, out.data());
  for (size_t t = 0; t < ids.size(); ++t)
    for (int64_t i = 0; i < hidden; ++i) EXPECT_EQ(out[t * hidden + i], table[ids[t] * hidden + i]);
}

TEST(CpuOps, EmbeddingOfAVocabularySliceZeroesOtherRanksTokens) {
  const int64_t rows = 4, hidden = 5, first_id = 3;  // the slice holds ids 3..6
  auto table = random_vector(rows * hidden, 11);
  const std::vector<int32_t> ids = {2, 3, 6, 7, 5};
  std::vector<float> out(ids.size() * hidden, NAN);
  cpu::embedding(table.data(), first_id, rows, hidden, ids.data(), ids.size(), 2.0f, out.data());
  for (size_t t = 0; t < ids.size(); ++t) {
    const bool held = ids[t] >= first_id && ids[t] < first_id + rows;
    for (int64_t i = 0; i < hidden; ++i) {
      EXPECT_EQ(out[t * hidden + i], held ? 2.0f * table[(ids[t] - first_id) * hidden + i] : 0.0f)
          << "token " << t;
    }
  }
}

// A ragged batch over a paged cache, against dense causal attention computed per sequence.
struct AttentionCase {
  int32_t num_heads, num_kv_heads, head_dim, block_size;
  std::vector<int32_t> cached;  // tokens already in the cache per sequence
  std::vector<int32_t> fresh;   // new tokens this step per sequence
};

// One token, two query heads and one KV head of dimension 8 at position 7; slot 3, or -1.
struct RopeCase {
  AttentionShape shape{2, 1, 8};
  StepBatch batch;
  std::vector<float> inv_freq = {1.0f, 0.3f, 0.05f, 0.01f};
  explicit RopeCase(int32_t slot) {
    batch.token_ids = {0};
    batch.positions = {7};
    batch.slot_mapping = {slot};
    batch.query_start = {0, 1};
    batch.context_len = {8};
    batch.block_tables = {0};
    batch.max_blocks = 1;
  }
};

TEST(CpuOps, InterleavedRopeIsRotateHalfOnPairedDimensions) {
  // Dimension 2i of an interleaved head plays the part of dimension i of a rotate-half head,
  // and 2i + 1 that of i + 4: the same input so permuted must come out so permuted.
  RopeCase c(3);
  const int32_t d = 8, width = c.shape.qkv_width();
  const std::vector<float> qkv = random_vector(width, 7);
  auto to_half = [&](const std::vector<float>& v) {
    std::vector<float> out(v);
    for (int32_t h = 0; h < width / d; ++h) {
      for (int32_t i = 0; i < d / 2; ++i) {
        out[h * d + i] = v[h * d + 2 * i];
        out[h * d + i + d / 2] = v[h * d + 2 * i + 1];
      }
    }
    return out;
  };
  std::vector<float> interleaved = qkv, half = to_half(qkv);
  std::vector<float> k_interleaved(4 * d, 0.0f), v_interleaved(4 * d, 0.0f);
  std::vector<float> k_half(4 * d, 0.0f), v_half(4 * d, 0.0f);
  AttentionShape s = c.shape;
  s.rope_style = RopeStyle::kInterleaved;
  cpu::rope_and_cache(interleaved.data(), c.inv_freq.data(), c.batch, s, {}, k_interleaved.data(),
                      v_interleaved.data());
  cpu::rope_and_cache(half.data(), c.inv_freq.data(), c.batch, c.shape, {}, k_half.data(), v_half.data());
  EXPECT_EQ(to_half(interleaved), half);
  EXPECT_EQ(to_half(k_interleaved), k_half);
  EXPECT_EQ(to_half(v_interleaved), v_half);
  EXPECT_NE(interleaved, qkv);  // it did rotate
}

TEST(CpuOps, PaddingSlotWritesNoCacheEntry) {
  RopeCase c(-1);
  std::vector<float> qkv = random_vector(c.shape.qkv_width(), 8);
  std::vector<float> k(4 * 8, 5.0f), v(4 * 8, 5.0f);
  cpu::rope_and_cache(qkv.data(), c.inv_freq.data(), c.batch, c.shape, {}, k.data(), v.data());
  EXPECT_EQ(k, std::vector<float>(4 * 8, 5.0f));
  EXPECT_EQ(v, std::vector<float>(4 * 8, 5.0f));
}

class PagedAttention : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(PagedAttention, MatchesDenseCausalReference) {
  const AttentionCase& c = GetParam();
  const AttentionShape s{c.num_heads, c.num_kv_heads, c.head_dim};
  const int32_t n_seqs = static_cast<int32_t>(c.cached.size());
  const int32_t width = s.qkv_width(), kv_row = c.num_kv_heads * c.head_dim;

  // Blocks handed out in a scrambled order so that block tables are not contiguous.
  int32_t total_blocks = 0;
  std::vector<int32_t> blocks_of(n_seqs);
  for (int32_t q = 0; q < n_seqs; ++q) {
    blocks_of[q] = (c.cached[q] + c.fresh[q] + c.block_size - 1) / c.block_size;
    total_blocks += blocks_of[q];
  }
  std::vector<int32_t> pool(total_blocks);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), std::mt19937(11));

  StepBatch batch;
  batch.max_blocks = *std::max_element(blocks_of.begin(), blocks_of.end());
  batch.query_start.push_back(0);
  int32_t next = 0;
  std::vector<std::vector<int32_t>> tables(n_seqs);
  for (int32_t q = 0; q < n_seqs; ++q) {
    for (int32_t b = 0; b < blocks_of[q]; ++b) tables[q].push_back(pool[next++]);
    std::vector<int32_t> row = tables[q];
    row.resize(batch.max_blocks, -1);
    batch.block_tables.insert(batch.block_tables.end(), row.begin(), row.end());
    for (int32_t i = 0; i < c.fresh[q]; ++i) {
      const int32_t pos = c.cached[q] + i;
      batch.token_ids.push_back(0);
      batch.positions.push_back(pos);
      batch.slot_mapping.push_back(tables[q][pos / c.block_size] * c.block_size + pos % c.block_size);
    }
    batch.query_start.push_back(batch.num_tokens());
    batch.context_len.push_back(c.cached[q] + c.fresh[q]);
  }
  const int32_t n = batch.num_tokens();

  // Every sequence's full (already rotated) K/V history, dense, [pos, kv_head, dim].
  std::vector<std::vector<float>> dense_k(n_seqs), dense_v(n_seqs);
  std::vector<float> k_cache(static_cast<size_t>(total_blocks) * c.block_size * kv_row, NAN);
  std::vector<float> v_cache(k_cache.size(), NAN);
  for (int32_t q = 0; q < n_seqs; ++q) {
    const int32_t len = c.cached[q] + c.fresh[q];
    dense_k[q] = random_vector(static_cast<size_t>(len) * kv_row, 100 + q);
    dense_v[q] = random_vector(static_cast<size_t>(len) * kv_row, 200 + q);
    for (int32_t pos = 0; pos < c.cached[q]; ++pos) {  // the history already in the cache
      const int64_t slot = tables[q][pos / c.block_size] * c.block_size + pos % c.block_size;
      std::copy_n(&dense_k[q][pos * kv_row], kv_row, &k_cache[slot * kv_row]);
      std::copy_n(&dense_v[q][pos * kv_row], kv_row, &v_cache[slot * kv_row]);
    }
  }
  // New tokens' q/k/v: rope_and_cache rotates q and k; write the un-rotated k so that after the
  // kernel the cache holds rotate(k) — compare against rotating on the reference side.
  std::vector<float> qkv = random_vector(static_cast<size_t>(n) * width, 300);
  std::vector<float> inv_freq(c.head_dim / 2);
  for (int32_t i = 0; i < c.head_dim / 2; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / c.head_dim);
  auto rotate = [&](std::vector<double>& x, int32_t pos) {
    const int32_t half = c.head_dim / 2;
    for (int32_t i = 0; i < half; ++i) {
      const double a = double(pos) * inv_freq[i];
      const double x0 = x[i], x1 = x[i + half];
      x[i] = x0 * std::cos(a) - x1 * std::sin(a);
      x[i + half] = x0 * std::sin(a) + x1 * std::cos(a);
    }
  };
  std::vector<std::vector<double>> ref_q(n);  // rotated q per token, [n_heads * dim]
  for (int32_t q = 0; q < n_seqs; ++q) {
    for (int32_t t = batch.query_start[q]; t < batch.query_start[q + 1]; ++t) {
      const int32_t pos = batch.positions[t];
      for (int32_t h = 0; h < c.num_heads; ++h) {
        std::vector<double> x(qkv.begin() + t * width + h * c.head_dim,
                              qkv.begin() + t * width + (h + 1) * c.head_dim);
        rotate(x, pos);
        ref_q[t].insert(ref_q[t].end(), x.begin(), x.end());
      }
      for (int32_t h = 0; h < c.num_kv_heads; ++h) {
        const int64_t k_off = t * width + (c.num_heads + h) * c.head_dim;
        std::vector<double> k(qkv.begin() + k_off, qkv.begin() + k_off + c.head_dim);
        rotate(k, pos);
        for (int32_t i = 0; i < c.head_dim; ++i) {
          dense_k[q][pos * kv_row + h * c.head_dim + i] = static_cast<float>(k[i]);
          dense_v[q][pos * kv_row + h * c.head_dim + i] = qkv[k_off + kv_row + i];
        }
      }
    }
  }

  cpu::rope_and_cache(qkv.data(), inv_freq.data(), batch, s, {}, k_cache.data(), v_cache.data());
  std::vector<float> out(static_cast<size_t>(n) * c.num_heads * c.head_dim, NAN);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  cpu::attention(qkv.data(), k_cache.data(), v_cache.data(), c.block_size, batch, s, AttentionSpec{scale}, out.data());

  std::vector<double> ref(out.size());
  const int32_t group = c.num_heads / c.num_kv_heads;
  for (int32_t q = 0; q < n_seqs; ++q) {
    for (int32_t t = batch.query_start[q]; t < batch.query_start[q + 1]; ++t) {
      const int32_t keys = batch.positions[t] + 1;
      for (int32_t h = 0; h < c.num_heads; ++h) {
        const int32_t kvh = h / group;
        std::vector<double> w(keys);
        double mx = -1e300;
        for (int32_t j = 0; j < keys; ++j) {
          double dot = 0;
          for (int32_t i = 0; i < c.head_dim; ++i)
            dot += ref_q[t][h * c.head_dim + i] * dense_k[q][j * kv_row + kvh * c.head_dim + i];
          w[j] = dot * scale;
          mx = std::max(mx, w[j]);
        }
        double den = 0;
        for (double& x : w) den += (x = std::exp(x - mx));
        for (int32_t i = 0; i < c.head_dim; ++i) {
          double acc = 0;
          for (int32_t j = 0; j < keys; ++j) acc += w[j] * dense_v[q][j * kv_row + kvh * c.head_dim + i];
          ref[(static_cast<size_t>(t) * c.num_heads + h) * c.head_dim + i] = acc / den;
        }
      }
    }
  }
  EXPECT_LT(relative_error(out, ref), 2e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PagedAttention,
    ::testing::Values(
        AttentionCase{4, 4, 64, 16, {0}, {1}},                  // first decode token, MHA
        AttentionCase{8, 2, 64, 16, {0, 0}, {17, 5}},           // ragged prefill, GQA 4
        AttentionCase{8, 1, 128, 16, {33, 0, 16}, {1, 40, 1}},  // decode + prefill mixed, GQA 8
        AttentionCase{9, 3, 64, 7, {20, 3}, {13, 1}},           // chunked prefill, odd block size
        AttentionCase{4, 4, 128, 32, {31, 32, 33}, {1, 1, 1}})); // page boundaries

}  // namespace
}  // namespace tessera
