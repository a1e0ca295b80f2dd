// Reed-Solomon k+m erasure code over GF(2^8) (ISA-L, Cauchy matrix): any k of the k+m shards
// rebuild the others.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::kvstore {

class ErasureCode {
 public:
  // k >= 1, m >= 0, k + m <= 64 (ISA-L limit on the Cauchy construction we rely on).
  static Result<ErasureCode> create(int data_shards, int parity_shards);

  int data_shards() const { return k_; }
  int parity_shards() const { return m_; }

  // parity[j] = sum_i matrix[k + j][i] * data[i], each `len` bytes.
  void encode(size_t len, uint8_t* const* data, uint8_t* const* parity) const;

  // shards: k + m buffers of `len` bytes; present[i] says which hold valid bytes. Rewrites every
  // absent shard. Returns false (touching nothing) when fewer than k are present.
  bool reconstruct(size_t len, uint8_t* const* shards, const std::vector<bool>& present) const;

 private:
  ErasureCode(int k, int m);
  int k_ = 0, m_ = 0;
  std::vector<uint8_t> matrix_;         // [(k + m) * k], top k rows = identity
  std::vector<uint8_t> encode_tables_;  // [32 * k * m], ISA-L expanded tables for the parity rows
};

}  // namespace deepinfer::kvstore
