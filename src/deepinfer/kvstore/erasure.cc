// ISA-L wrapper. Decoding inverts the k x k submatrix of surviving rows; missing data shards
// come from the inverse, missing parity from re-encoding the now complete data.
#include "deepinfer/kvstore/erasure.h"

#include <isa-l/erasure_code.h>

#include "deepinfer/base/check.h"

namespace deepinfer::kvstore {

Result<ErasureCode> ErasureCode::create(int data_shards, int parity_shards) {
  if (data_shards < 1 || parity_shards < 0 || data_shards + parity_shards > 64) {
    return invalid_argument("erasure code {}+{}: need k >= 1, m >= 0, k + m <= 64", data_shards,
                            parity_shards);
  }
  return ErasureCode(data_shards, parity_shards);
}

ErasureCode::ErasureCode(int k, int m) : k_(k), m_(m) {
  matrix_.resize(static_cast<size_t>(k + m) * k);
  gf_gen_cauchy1_matrix(matrix_.data(), k + m, k);
  if (m > 0) {
    encode_tables_.resize(static_cast<size_t>(32) * k * m);
    ec_init_tables(k, m, matrix_.data() + static_cast<size_t>(k) * k, encode_tables_.data());
  }
}

void ErasureCode::encode(size_t len, uint8_t* const* data, uint8_t* const* parity) const {
  if (m_ == 0 || len == 0) return;
  ec_encode_data(static_cast<int>(len), k_, m_, const_cast<uint8_t*>(encode_tables_.data()),
                 const_cast<uint8_t**>(data), const_cast<uint8_t**>(parity));
}

bool ErasureCode::reconstruct(size_t len, uint8_t* const* shards,
                              const std::vector<bool>& present) const {
  const int n = k_ + m_;
  DI_CHECK(static_cast<int>(present.size()) == n, "present has {} flags for {} shards",
           present.size(), n);
  std::vector<int> survivors, lost_data;
  bool lost_parity = false;
  for (int i = 0; i < n; ++i) {
    if (present[i]) {
      if (static_cast<int>(survivors.size()) < k_) survivors.push_back(i);
    } else if (i < k_) {
      lost_data.push_back(i);
    } else {
      lost_parity = true;
    }
  }
  if (static_cast<int>(survivors.size()) < k_) return false;
  if (!lost_data.empty()) {
    std::vector<uint8_t> sub(static_cast<size_t>(k_) * k_), inv(static_cast<size_t>(k_) * k_);
    for (int r = 0; r < k_; ++r) {
      for (int c = 0; c < k_; ++c) sub[r * k_ + c] = matrix_[survivors[r] * k_ + c];
    }
    // Any k rows of a Cauchy-extended identity are independent; failure is a broken invariant.
    DI_CHECK(gf_invert_matrix(sub.data(), inv.data(), k_) == 0, "singular RS submatrix");
    const int rows = static_cast<int>(lost_data.size());
    std::vector<uint8_t> decode(static_cast<size_t>(rows) * k_);
    for (int r = 0; r < rows; ++r) {
      for (int c = 0; c < k_; ++c) decode[r * k_ + c] = inv[lost_data[r] * k_ + c];
    }
    std::vector<uint8_t> tables(static_cast<size_t>(32) * k_ * rows);
    ec_init_tables(k_, rows, decode.data(), tables.data());
    std::vector<uint8_t*> src(k_), dst(rows);
    for (int r = 0; r < k_; ++r) src[r] = shards[survivors[r]];
    for (int r = 0; r < rows; ++r) dst[r] = shards[lost_data[r]];
    ec_encode_data(static_cast<int>(len), k_, rows, tables.data(), src.data(), dst.data());
  }
  if (lost_parity) {
    // Recompute all parity from complete data; surviving parity is rewritten with equal bytes.
    encode(len, shards, shards + k_);
  }
  return true;
}

}  // namespace deepinfer::kvstore
