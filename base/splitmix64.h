// The splitmix64 finalizer (Steele, Lea and Flood; the constants of Vigna's SplitMix64): a cheap
// bijective 64-bit mix whose outputs look independent even for consecutive inputs. Sampling
// draws, request ids and hash keys all take it from here.
#pragma once

#include <cstdint>

namespace tessera {

// SplitMix64's state increment (the golden ratio in 64-bit fixed point).
inline constexpr uint64_t kSplitMix64Gamma = 0x9E3779B97F4A7C15ull;

constexpr uint64_t splitmix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace tessera
