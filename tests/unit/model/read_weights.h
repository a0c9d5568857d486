// Test helper: a whole stored tensor as read_f32 gives it, at the tensor's own shape.
#pragma once

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/model_io/weight_source.h"

namespace tessera::testing {

inline std::vector<float> read_all(const WeightSource& w, const std::string& name) {
  absl::StatusOr<RawTensor> raw = w.raw(name);
  EXPECT_TRUE(raw.ok()) << raw.status();
  if (!raw.ok()) return {};
  size_t n = 1;
  for (int64_t d : raw->info.shape) n *= static_cast<size_t>(d);
  std::vector<float> out(n);
  const absl::Status s = w.read_f32(name, raw->info.shape, out);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

}  // namespace tessera::testing
