// The prefix cache's hash chain: a full block of tokens is named by a hash of its parent block's
// hash and its own token ids, so a block's hash stands for every token before it too. Only full
// blocks are hashed: a partial block's contents are still growing.
//
// The hash is an index, not an identity: PrefixCache compares a hit's token ids and its link to
// the parent entry, so a collision costs a miss, never wrong K/V (prefix_cache.h says why the
// token ids alone would not be enough).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tessera {

using BlockHash = uint64_t;

// The parent hash of a sequence's first block.
inline constexpr BlockHash kRootBlockHash = 0;

// Hash of one full block. What else changes a block's K/V would be mixed in here (a LoRA adapter,
// multimodal inputs); the model, its weights and the cache dtype are fixed per cache.
BlockHash hash_block(BlockHash parent, std::span<const int32_t> block_tokens);

// Appends to `hashes` (the chain of `tokens`' first hashes.size() blocks) the hash of every
// further full block of `tokens`. Tokens are only ever appended, so earlier hashes stay valid.
void extend_block_hashes(std::span<const int32_t> tokens, int32_t block_size,
                         std::vector<BlockHash>& hashes);

}  // namespace tessera
