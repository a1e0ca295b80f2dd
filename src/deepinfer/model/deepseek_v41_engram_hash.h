// DeepSeek-V4.1 Engram n-gram hashing: which rows of a layer's Engram table a position reads.
// Token ids are normalized (a token map from the tokenizer), then for n = 2..max_ngram the n-gram
// ending at the position mixes as x0*m0 ^ x1*m1 ^ ... (x_k: the id k positions back, the pad id
// before position 0; m: the layer's odd multipliers), and each of n_heads hash heads takes it
// modulo its own prime; a column's row is that residue plus the column's offset in the table.
// Only the last max_ngram token ids matter, so the engine derives them from the sequence's token
// history: Engram needs no per-sequence state of its own.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v41_config.h"

namespace deepinfer::model {

struct EngramLayerHash {
  int layer = -1;                          // backbone layer index
  std::vector<uint64_t> multipliers = {};  // [max_ngram], odd
  std::vector<int64_t> primes = {};        // [n_cols]: column (n - 2) * n_heads + head
  std::vector<int64_t> offsets = {};       // [n_cols]: first table row of each column
  int64_t table_rows = 0;                  // sum of primes: rows of layers.N.engram.embed
};

struct EngramHashLayout {
  int max_ngram = 0;
  int n_heads = 0;
  int n_cols = 0;                            // (max_ngram - 1) * n_heads
  std::vector<int32_t> token_map = {};       // [vocab] normalized id of each token id
  int64_t pad_id = 0;                        // normalized id standing before position 0
  std::vector<EngramLayerHash> layers = {};  // in engram_layer_ids order
};

// The layout of `cfg`: primes derived from engram_vocab_size (each the next prime above the last,
// distinct over all layers and n-grams), the token map, normalized pad id and multipliers read
// from the sidecar `sidecar_path` (engram_hash.json: {"token_map": [...], "pad_id": p,
// "multipliers": {"<layer>": ["<uint64>", ...]}}). Errors name the file and the field.
Result<EngramHashLayout> engram_hash_layout(const DeepseekV41Config& cfg,
                                            const std::string& sidecar_path);

// Table rows for the position whose token is recent.back(); `recent` holds the ids of up to the
// last max_ngram positions, oldest first (fewer at the start of a sequence). out: [n_cols].
void engram_rows_at(const EngramHashLayout& layout, const EngramLayerHash& layer,
                    std::span<const int32_t> recent, std::span<int64_t> out);

// engram_rows_at for every position of a sequence starting at position 0. out: [ids.size() *
// n_cols].
void engram_rows_for_sequence(const EngramHashLayout& layout, const EngramLayerHash& layer,
                              std::span<const int32_t> ids, std::span<int64_t> out);

}  // namespace deepinfer::model
