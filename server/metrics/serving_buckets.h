// Histogram bucket boundaries for LLM serving, close to vLLM's so that dashboards and SLOs carry
// over, widened at the low end for GPUs and at the high end for the CPU backend.
#pragma once

#include "prometheus/histogram.h"

namespace tessera::server {

// Time to first token, seconds.
inline const prometheus::Histogram::BucketBoundaries& ttft_buckets() {
  static const prometheus::Histogram::BucketBoundaries b = {
      0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,  0.75,
      1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0};
  return b;
}

// Time between two tokens of one sequence, seconds.
inline const prometheus::Histogram::BucketBoundaries& inter_token_buckets() {
  static const prometheus::Histogram::BucketBoundaries b = {
      0.001, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1,
      0.15,  0.2,   0.3,  0.4,   0.5,  0.75,  1.0,  2.5,  5.0,  10.0,  20.0};
  return b;
}

// End-to-end request latency, seconds.
inline const prometheus::Histogram::BucketBoundaries& request_latency_buckets() {
  static const prometheus::Histogram::BucketBoundaries b = {
      0.05, 0.1,  0.3,  0.5,  0.8,  1.0,   1.5,   2.0,   2.5,   5.0,    10.0,  15.0,
      20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
  return b;
}

// Time a request waited before it was first scheduled, seconds.
inline const prometheus::Histogram::BucketBoundaries& queue_time_buckets() {
  static const prometheus::Histogram::BucketBoundaries b = {0.001, 0.005, 0.01,  0.025, 0.05,  0.1,
                                                         0.25,  0.5,   1.0,   2.5,   5.0,   10.0,
                                                         30.0,  60.0,  120.0, 300.0, 600.0, 1800.0};
  return b;
}

// One engine step (forward + sampling + emission), seconds.
inline const prometheus::Histogram::BucketBoundaries& step_duration_buckets() {
  static const prometheus::Histogram::BucketBoundaries b = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                         0.05,   0.075, 0.1,    0.25,  0.5,  1.0,
                                                         2.5,    5.0,   10.0,   30.0};
  return b;
}

// Sequences in one step's batch.
inline const prometheus::Histogram::BucketBoundaries& step_seqs_buckets() {
  static const prometheus::Histogram::BucketBoundaries b = {1,  2,   4,   8,   16,  32,
                                                         64, 128, 256, 512, 1024};
  return b;
}

// Tokens in one step's batch (decode tokens plus prefill chunks).
inline const prometheus::Histogram::BucketBoundaries& step_tokens_buckets() {
  static const prometheus::Histogram::BucketBoundaries b = {1,   8,    16,   32,   64,   128,  256,
                                                         512, 1024, 2048, 4096, 8192, 16384};
  return b;
}

}  // namespace tessera::server
