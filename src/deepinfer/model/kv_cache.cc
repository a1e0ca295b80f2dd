// KvCache allocation (zero-filled by AlignedBuffer) and the sizes a spec implies.
#include "deepinfer/model/kv_cache.h"

#include "deepinfer/base/check.h"

namespace deepinfer::model {

bool KvCacheSpec::has_recent() const {
  for (const StateKind& k : state_kinds)
    if (k.recent) return true;
  return false;
}

int64_t KvCacheSpec::block_floats(int layer, int block_size) const {
  int64_t n = 0;
  for (const StateKind& k : state_kinds)
    if (k.layer == layer && !k.recent) n += int64_t{block_size / k.tokens_per_entry} * k.floats;
  return n;
}

int64_t KvCacheSpec::recent_row_floats(int layer) const {
  int64_t n = 0;
  for (const StateKind& k : state_kinds)
    if (k.layer == layer && k.recent) n += k.floats;
  return n;
}

double KvCacheSpec::paged_bytes_per_token() const {
  double floats = 0;
  for (const StateKind& k : state_kinds)
    if (!k.recent) floats += double(k.floats) / k.tokens_per_entry;
  return double(num_layers) * num_kv_heads * (head_dim + v_head_dim) * double(kv_elem_bytes()) +
         floats * sizeof(float);
}

double KvCacheSpec::recent_bytes_per_sequence() const {
  double floats = 0;
  for (const StateKind& k : state_kinds)
    if (k.recent) floats += double(k.floats);
  return floats * recent_tokens * sizeof(float);
}

Result<DType> resolve_kv_cache_dtype(std::string_view name, const KvCacheSpec& spec,
                                     std::string_view model) {
  DType t;
  if (name == "auto" || name == "f32") t = DType::kF32;
  else if (name == "bf16") t = DType::kBF16;
  else if (name == "f16") t = DType::kF16;
  else return invalid_argument("--kv-cache-dtype: '{}' is not one of auto, f32, bf16, f16", name);
  if (t != DType::kF32 && spec.hybrid())
    return invalid_argument("--kv-cache-dtype {}: {} keeps hybrid KV state (compressed entries, "
                            "window rows) that is stored in f32 only; use f32 or auto",
                            name, model);
  return t;
}

KvCache KvCache::allocate(const KvCacheSpec& spec, int num_blocks, int block_size,
                          int num_recent_slabs) {
  DI_CHECK(spec.dtype == DType::kF32 || spec.dtype == DType::kF16 || spec.dtype == DType::kBF16,
           "KV cache dtype {} unsupported", dtype_name(spec.dtype));
  DI_CHECK(spec.dtype == DType::kF32 || !spec.hybrid(), "hybrid KV state is f32 only");
  KvCache c;
  c.spec = spec;
  c.num_blocks = num_blocks;
  c.block_size = block_size;
  const size_t eb = spec.kv_elem_bytes();
  const size_t per_layer_k = size_t(num_blocks) * block_size * spec.num_kv_heads * spec.head_dim * eb;
  const size_t per_layer_v = size_t(num_blocks) * block_size * spec.num_kv_heads * spec.v_head_dim * eb;
  c.k.resize(spec.num_layers);
  c.v.resize(spec.num_layers);
  for (int l = 0; l < spec.num_layers; ++l) {
    c.k[l].resize(per_layer_k);
    c.v[l].resize(per_layer_v);
  }
  if (!spec.hybrid()) return c;
  c.num_recent_slabs = spec.has_recent() ? num_recent_slabs : 0;
  c.block_state.resize(spec.num_layers);
  c.recent.resize(spec.num_layers);
  for (int l = 0; l < spec.num_layers; ++l) {
    c.block_state[l].resize(size_t(num_blocks) * spec.block_floats(l, block_size));
    c.recent[l].resize(size_t(c.num_recent_slabs) * block_size * spec.recent_row_floats(l));
  }
  return c;
}

size_t KvCache::bytes_per_block(const KvCacheSpec& spec, int block_size) {
  const size_t kv_elems = size_t(block_size) * spec.num_layers * spec.num_kv_heads *
                          (spec.head_dim + spec.v_head_dim);
  size_t floats = 0;
  for (int l = 0; l < spec.num_layers && spec.hybrid(); ++l)
    floats += size_t(spec.block_floats(l, block_size));
  return kv_elems * spec.kv_elem_bytes() + floats * sizeof(float);
}

size_t KvCache::bytes_per_recent_slab(const KvCacheSpec& spec, int block_size) {
  size_t floats = 0;
  for (int l = 0; l < spec.num_layers && spec.hybrid(); ++l)
    floats += size_t(block_size) * spec.recent_row_floats(l);
  return floats * sizeof(float);
}

}  // namespace deepinfer::model
