#include "runtime/kv_cache/block_hash.h"

#include "base/splitmix64.h"

namespace tessera {

BlockHash hash_block(BlockHash parent, std::span<const int32_t> block_tokens) {
  // One SplitMix64 step per token: for a given state, different token ids give different next
  // states (the mix is a bijection), and any change spreads through every later step.
  uint64_t h = splitmix64(parent + kSplitMix64Gamma);
  for (int32_t token : block_tokens) {
    h = splitmix64(h + kSplitMix64Gamma + static_cast<uint32_t>(token));
  }
  return h;
}

void extend_block_hashes(std::span<const int32_t> tokens, int32_t block_size,
                         std::vector<BlockHash>& hashes) {
  const size_t full_blocks = tokens.size() / static_cast<size_t>(block_size);
  while (hashes.size() < full_blocks) {
    const BlockHash parent = hashes.empty() ? kRootBlockHash : hashes.back();
    hashes.push_back(hash_block(parent, tokens.subspan(hashes.size() * block_size, block_size)));
  }
}

}  // namespace tessera
