// Entry encode/decode on top of ErasureCode and the shard format.
#include "deepinfer/kvstore/entry_codec.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <new>

namespace deepinfer::kvstore {

ShardImages::ShardImages(int count, size_t shard_bytes)
    : count_(count), shard_bytes_(shard_bytes), file_bytes_(shard_file_bytes(shard_bytes)) {
  size_t total = file_bytes_ * static_cast<size_t>(count);
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(kIoAlign, std::max(total, kIoAlign)));
  if (!p) throw std::bad_alloc();
  mem_.reset(p);
}

void encode_entry(const ErasureCode& code, const ShardHeader& proto, const uint8_t* block,
                  ShardImages& images) {
  const int k = code.data_shards(), m = code.parity_shards();
  const size_t sb = images.shard_bytes();
  std::vector<uint8_t*> data(k), parity(m);
  for (int i = 0; i < k + m; ++i) {
    uint8_t* f = images.file(i);
    // Zero the padding so files are deterministic and the tail past block_bytes is defined.
    std::memset(f + kShardHeaderBytes + sb, 0, images.file_bytes() - kShardHeaderBytes - sb);
    if (i < k) {
      size_t off = static_cast<size_t>(i) * sb;
      size_t n = off < proto.block_bytes ? std::min(sb, proto.block_bytes - off) : 0;
      if (n) std::memcpy(images.payload(i), block + off, n);
      if (n < sb) std::memset(images.payload(i) + n, 0, sb - n);
      data[i] = images.payload(i);
    } else {
      parity[i - k] = images.payload(i);
    }
  }
  code.encode(sb, data.data(), parity.data());
  ShardHeader h = proto;
  h.block_hash = checksum64(block, proto.block_bytes);
  h.shard_bytes = static_cast<uint32_t>(sb);
  h.data_shards = static_cast<uint8_t>(k);
  h.parity_shards = static_cast<uint8_t>(m);
  for (int i = 0; i < k + m; ++i) {
    h.shard_index = static_cast<uint16_t>(i);
    h.payload_hash = checksum64(images.payload(i), sb);
    write_shard_header(h, images.file(i));
  }
}

DecodeOutcome decode_entry(const ErasureCode& code, const BlockKey& key, size_t block_bytes,
                           ShardImages& images, const std::vector<bool>& present,
                           const std::vector<size_t>& file_len, const std::vector<int64_t>& mtime,
                           uint8_t* dst) {
  const int k = code.data_shards(), m = code.parity_shards(), n = k + m;
  DecodeOutcome out;
  out.valid.assign(n, false);
  std::vector<ShardHeader> headers(n);
  std::map<uint64_t, int> votes;  // write_id -> intact shards
  for (int i = 0; i < n; ++i) {
    if (!present[i]) continue;
    auto h = parse_shard_file(images.file(i), file_len[i], "");
    bool good = h.is_ok() && h->key == key && h->shard_index == i && h->data_shards == k &&
                h->parity_shards == m && h->block_bytes == block_bytes &&
                h->shard_bytes == images.shard_bytes();
    if (!good) {
      ++out.corrupt_shards;
      continue;
    }
    headers[i] = *h;
    out.valid[i] = true;
    ++votes[h->write_id];
  }
  uint64_t best_id = 0;
  int best = 0;
  for (auto [id, c] : votes) {
    if (c > best) best = c, best_id = id;
  }
  out.intact_shards = best;
  out.writes_seen = static_cast<int>(votes.size());
  if (best < k) {
    out.valid.assign(n, false);
    return out;
  }
  for (int i = 0; i < n; ++i) {
    if (out.valid[i] && headers[i].write_id != best_id) out.valid[i] = false;
    if (out.valid[i]) {
      out.header = headers[i];
      out.max_mtime = std::max(out.max_mtime, mtime[i]);
    }
  }
  for (int i = 0; i < k; ++i) out.reconstructed |= !out.valid[i];
  if (out.reconstructed || std::count(out.valid.begin(), out.valid.end(), true) < n) {
    std::vector<uint8_t*> ptrs(n);
    for (int i = 0; i < n; ++i) ptrs[i] = images.payload(i);
    if (!code.reconstruct(images.shard_bytes(), ptrs.data(), out.valid)) return out;
  }
  const size_t sb = images.shard_bytes();
  for (int i = 0; i < k; ++i) {
    size_t off = static_cast<size_t>(i) * sb;
    if (off >= block_bytes) break;
    std::memcpy(dst + off, images.payload(i), std::min(sb, block_bytes - off));
  }
  // With every data shard intact and from one write, the per-shard checksums already cover
  // every byte; after decoding, check end to end (catches anything decoding could get wrong).
  out.ok = !out.reconstructed || checksum64(dst, block_bytes) == out.header.block_hash;
  return out;
}

}  // namespace deepinfer::kvstore
