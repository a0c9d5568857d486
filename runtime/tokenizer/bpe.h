// Byte-pair encoding of one pre-token, over token ids.
//
// A pre-token starts as one symbol per byte (the byte's token id); the adjacent pair with the
// lowest merge rank is merged repeatedly (ties: leftmost first, as HF tokenizers and llama.cpp
// do) until no adjacent pair has a merge. Symbols sit in a linked list and candidate pairs in a
// min-heap whose stale entries are skipped when popped, so a piece of n bytes costs O(n log n).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tessera {

class Bpe {
 public:
  struct Merge {
    int32_t left = 0;
    int32_t right = 0;
    int32_t result = 0;  // the token that left + right spell
  };

  // Reusable buffers for encode(); one per thread (or per call), never shared.
  struct Scratch {
    struct Symbol {
      int32_t id;
      int32_t prev;
      int32_t next;
    };
    struct Candidate {
      int32_t rank;
      int32_t left;     // symbol index of the pair's left half
      int32_t left_id;  // ids the pair was built from, to recognize stale entries
      int32_t right_id;
      int32_t result;
    };
    std::vector<Symbol> symbols;
    std::vector<Candidate> heap;
  };

  Bpe() = default;
  // `merges[i]` has rank i (lower merges first). When a pair appears twice the later rank wins,
  // as in HF tokenizers (its merge map is built by inserting in order).
  explicit Bpe(std::span<const Merge> merges);

  // Appends the tokens of the pre-token whose initial symbols are `symbols` to `out`.
  // Thread-safe: reads only the merge table.
  void encode(std::span<const int32_t> symbols, Scratch* scratch, std::vector<int32_t>* out) const;

  // The merge for the pair (left, right), or nullptr.
  const Merge* find(int32_t left, int32_t right) const;

  size_t size() const { return count_; }

 private:
  // Open-addressed (linear probing) table keyed by the id pair: lookups are the inner loop of
  // encoding, and a flat table avoids std::unordered_map's node chasing.
  struct Slot {
    uint64_t key = kEmpty;
    int32_t rank = 0;
    Merge merge;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};

  const Slot* lookup(int32_t left, int32_t right) const;

  std::vector<Slot> slots_;
  uint64_t mask_ = 0;
  size_t count_ = 0;
};

}  // namespace tessera
