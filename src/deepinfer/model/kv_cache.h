// Paged KV storage that models write into during forward(): its per-layer shape (what a model
// asks for) and the pools themselves (what the engine allocates and hands to every step).
//
// Two kinds of architecture:
// - plain K/V (Llama, DeepSeek-V3's MLA latents): one K and one V row per (layer, token), kept
//   for the whole sequence, paged in blocks of block_size tokens, stored as f32, f16 or bf16
//   (KvCacheSpec::dtype, --kv-cache-dtype);
// - hybrid state (DeepSeek-V4): the architecture declares its state kinds (StateKind). Kinds
//   that grow with the sequence ("paged": compressed entries, indexer keys, one entry per r
//   tokens) live in the blocks, like K/V. Kinds only read near the sequence's end ("recent":
//   the sliding window's rows, the compressors' unfinished-window inputs) live in recent slabs
//   of block_size tokens that the engine pairs with a block only while the block is within
//   `recent_tokens` of a sequence's end (or cached for a prefix hit), so a long sequence holds
//   a bounded number of them. Hybrid state is f32 only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/base/aligned_buffer.h"
#include "deepinfer/base/status.h"
#include "deepinfer/tensor/dtype.h"

namespace deepinfer::model {

// One kind of per-layer state of a hybrid architecture.
struct StateKind {
  std::string name;           // for reports: "compressed_entries", "window_rows", ...
  int layer = 0;
  int64_t floats = 0;         // per entry
  int tokens_per_entry = 1;   // 1 = per token; r = one entry per r tokens (block_size % r == 0)
  bool recent = false;        // only read within recent_tokens of the end: lives in recent slabs
};

// Shape of the per-token KV state of one layer.
struct KvCacheSpec {
  KvCacheSpec() = default;
  // A plain K/V cache.
  KvCacheSpec(int layers, int kv_heads, int k_dim, int v_dim)
      : num_layers(layers), num_kv_heads(kv_heads), head_dim(k_dim), v_head_dim(v_dim) {}

  int num_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;    // K channels per head
  int v_head_dim = 0;  // V channels per head
  // Hybrid state (empty for plain K/V). Within a layer's block, paged kinds follow in this
  // order, each [block_size / tokens_per_entry, floats]; a layer's recent row per token is its
  // recent kinds' floats in this order.
  std::vector<StateKind> state_kinds;
  // A new token at position p reads recent rows of positions >= p - recent_tokens only.
  int recent_tokens = 0;
  int block_size_multiple = 1;  // the block size must be a multiple (the compression ratios)
  // How many token ids before each sequence's first new token a forward reads
  // (ForwardBatch::seq_token_history; DeepSeek-V4.1's Engram n-grams); 0: none.
  int token_history = 0;
  // Decoder-side saving (DeepSeek-V4.1): when > 0, a prompt computed in swa_restore "bounded"
  // mode may run some of its last layers only over its last saving_window tokens
  // (ForwardBatch::seq_tail_from); 0: no such layers, every layer runs over every token.
  int saving_window = 0;
  // Element type of the plain K/V pools: kF32, kF16 or kBF16. Models declare kF32; the engine
  // sets what --kv-cache-dtype resolves to. Hybrid state (block_state, recent) is always f32.
  DType dtype = DType::kF32;

  bool hybrid() const { return !state_kinds.empty(); }
  size_t kv_elem_bytes() const { return dtype == DType::kF32 ? 4 : 2; }
  bool has_recent() const;
  int64_t block_floats(int layer, int block_size) const;  // paged kinds of one block
  int64_t recent_row_floats(int layer) const;             // recent kinds per token
  // Bytes per token of the state that grows with the sequence (K/V in `dtype`, or paged kinds).
  double paged_bytes_per_token() const;
  // Bytes of recent rows a sequence keeps at most (recent_tokens of them), f32.
  double recent_bytes_per_sequence() const;
};

// The engine's --kv-cache-dtype for a model's spec: "f32", "bf16", "f16", or "auto" (f32: the
// K/V rows a forward computes are f32 in every precision mode, so f32 keeps them exactly, as
// vLLM's "auto" keeps the model's dtype). Hybrid specs take f32 only (an error names `model`).
Result<DType> resolve_kv_cache_dtype(std::string_view name, const KvCacheSpec& spec,
                                     std::string_view model);

// Paged KV storage: for each layer, K and V pools laid out [num_blocks, block_size, kv_heads,
// head_dim] of spec.dtype elements (raw bytes here: kernels take the pointer and the dtype);
// for hybrid specs, a block-state pool [num_blocks, block_floats] and a
// recent pool [num_recent_slabs, block_size, recent_row_floats] per layer. Block and slab ids
// come from the engine's block manager.
struct KvCache {
  KvCacheSpec spec;
  int num_blocks = 0;
  int block_size = 0;
  int num_recent_slabs = 0;
  std::vector<AlignedBuffer<std::byte>> k;        // [num_layers] spec.dtype elements
  std::vector<AlignedBuffer<std::byte>> v;        // [num_layers] spec.dtype elements
  std::vector<AlignedBuffer<float>> block_state;  // [num_layers] hybrid only
  std::vector<AlignedBuffer<float>> recent;       // [num_layers] hybrid only

  static KvCache allocate(const KvCacheSpec& spec, int num_blocks, int block_size,
                          int num_recent_slabs = 0);
  // K, V and paged state of one block, all layers.
  size_t bytes_per_block() const { return bytes_per_block(spec, block_size); }
  static size_t bytes_per_block(const KvCacheSpec& spec, int block_size);
  // Recent rows of one slab, all layers.
  size_t bytes_per_recent_slab() const { return bytes_per_recent_slab(spec, block_size); }
  static size_t bytes_per_recent_slab(const KvCacheSpec& spec, int block_size);
  DType dtype() const { return spec.dtype; }
  // Elements (of dtype()) between tokens of a block.
  int64_t k_token_stride() const { return int64_t{spec.num_kv_heads} * spec.head_dim; }
  int64_t v_token_stride() const { return int64_t{spec.num_kv_heads} * spec.v_head_dim; }
};

}  // namespace deepinfer::model
