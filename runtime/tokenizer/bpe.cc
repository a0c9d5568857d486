#include "runtime/tokenizer/bpe.h"

#include <algorithm>
#include <bit>

#include "base/splitmix64.h"

namespace tessera {
namespace {

// Hashed through splitmix64 before probing: ids are small dense integers, so the raw key would
// cluster badly.
uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// Min-heap order on (rank, left position): the lowest rank first, the leftmost among equals.
struct CandidateAfter {
  bool operator()(const Bpe::Scratch::Candidate& a, const Bpe::Scratch::Candidate& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

Bpe::Bpe(std::span<const Merge> merges) {
  const size_t capacity = std::bit_ceil(std::max<size_t>(16, merges.size() * 2));
  slots_.resize(capacity);
  mask_ = capacity - 1;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const Merge& m = merges[rank];
    const uint64_t key = pair_key(m.left, m.right);
    for (uint64_t i = splitmix64(key) & mask_;; i = (i + 1) & mask_) {
      Slot& slot = slots_[i];
      if (slot.key == kEmpty) {
        ++count_;
      } else if (slot.key != key) {
        continue;
      }
      slot.key = key;
      slot.rank = static_cast<int32_t>(rank);
      slot.merge = m;
      break;
    }
  }
}

const Bpe::Slot* Bpe::lookup(int32_t left, int32_t right) const {
  if (slots_.empty()) return nullptr;
  const uint64_t key = pair_key(left, right);
  for (uint64_t i = splitmix64(key) & mask_;; i = (i + 1) & mask_) {
    const Slot& slot = slots_[i];
    if (slot.key == key) return &slot;
    if (slot.key == kEmpty) return nullptr;
  }
}

const Bpe::Merge* Bpe::find(int32_t left, int32_t right) const {
  const Slot* slot = lookup(left, right);
  return slot == nullptr ? nullptr : &slot->merge;
}

void Bpe::encode(std::span<const int32_t> symbols, Scratch* scratch,
                 std::vector<int32_t>* out) const {
  const auto n = static_cast<int32_t>(symbols.size());
  if (n <= 1) {
    out->insert(out->end(), symbols.begin(), symbols.end());
    return;
  }
  auto& sym = scratch->symbols;
  auto& heap = scratch->heap;
  sym.resize(static_cast<size_t>(n));
  heap.clear();
  for (int32_t i = 0; i < n; ++i) sym[i] = {symbols[i], i - 1, i + 1 < n ? i + 1 : -1};

  auto add_candidate = [&](int32_t left) {
    const int32_t right = sym[left].next;
    const Slot* slot = lookup(sym[left].id, sym[right].id);
    if (slot == nullptr) return;
    heap.push_back({slot->rank, left, sym[left].id, sym[right].id, slot->merge.result});
    std::push_heap(heap.begin(), heap.end(), CandidateAfter{});
  };
  for (int32_t i = 0; i + 1 < n; ++i) add_candidate(i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), CandidateAfter{});
    const Scratch::Candidate c = heap.back();
    heap.pop_back();
    Scratch::Symbol& left = sym[c.left];
    // A merge always makes a longer token, so a symbol whose id is unchanged has not absorbed
    // anything and still has the same right neighbour; comparing both ids detects stale pairs.
    if (left.id != c.left_id || left.next < 0 || sym[left.next].id != c.right_id) continue;
    const int32_t right = left.next;
    left.id = c.result;
    left.next = sym[right].next;
    if (left.next >= 0) sym[left.next].prev = c.left;
    sym[right].id = -1;
    if (left.prev >= 0) add_candidate(left.prev);
    if (left.next >= 0) add_candidate(c.left);
  }
  // Symbol 0 is never absorbed (merges fold the right symbol into the left one).
  for (int32_t i = 0; i >= 0; i = sym[i].next) out->push_back(sym[i].id);
}

}  // namespace tessera
