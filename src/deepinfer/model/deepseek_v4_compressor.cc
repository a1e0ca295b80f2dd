// The compressor's pooling, scalar (a few entries per step; an entry reads r or 2r rows).
#include "deepinfer/model/deepseek_v4_compressor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace deepinfer::model {

void v4_pool_entry(const V4CompressorDims& d, const V4Compressor& w, const V4SeqState& st,
                   int64_t entry_index, float* entry) {
  const int r = d.ratio;
  const int64_t dim = d.dim;
  // Slots: CSA: Ca (first half of each projection) of window w-1, then Cb (second half) of
  // window w; window 0 has no Ca slots (transformers fills them with -inf scores). HCA: window w.
  std::vector<const float*> slot_rows;
  std::vector<int64_t> slot_off;
  if (d.overlap && entry_index > 0)
    for (int j = 0; j < r; ++j) {
      slot_rows.push_back(st.row((entry_index - 1) * r + j));
      slot_off.push_back(0);
    }
  for (int j = 0; j < r; ++j) {
    slot_rows.push_back(st.row(entry_index * r + j));
    slot_off.push_back(d.overlap ? dim : 0);
  }
  const size_t n = slot_rows.size();
  for (int64_t c = 0; c < dim; ++c) {
    float m = -std::numeric_limits<float>::infinity();
    for (size_t s = 0; s < n; ++s) m = std::max(m, slot_rows[s][d.score_off + slot_off[s] + c]);
    double sum = 0, acc = 0;
    for (size_t s = 0; s < n; ++s) {
      const double e = std::exp(double(slot_rows[s][d.score_off + slot_off[s] + c]) - m);
      sum += e;
      acc += e * slot_rows[s][d.kv_off + slot_off[s] + c];
    }
    entry[c] = static_cast<float>(acc / sum);
  }
  double ss = 0;
  for (int64_t c = 0; c < dim; ++c) ss += double(entry[c]) * entry[c];
  const float inv = static_cast<float>(1.0 / std::sqrt(ss / double(dim) + d.eps));
  const auto* nw = static_cast<const float*>(w.norm.data);
  for (int64_t c = 0; c < dim; ++c) entry[c] = entry[c] * inv * nw[c];
}

void v4_rotate_entry(const V4CompressorDims& d, int64_t entry_index, float* entry) {
  const int64_t dim = d.dim;
  const int32_t pos = static_cast<int32_t>(entry_index * d.ratio);
  kernels::RopeParams p{};
  p.x = entry + (dim - d.rope_dim);
  p.n_tokens = 1;
  p.n_heads = 1;
  p.head_dim = d.rope_dim;
  p.rot_dim = d.rope_dim;
  p.token_stride = dim;
  p.positions = &pos;
  p.theta = d.theta;
  p.layout = kernels::RopeLayout::kInterleaved;
  p.scaling = d.scaling;
  kernels::rope(p);
}

void v4_compress_entry(const V4CompressorDims& d, const V4Compressor& w, const V4SeqState& st,
                       int64_t entry_index, float* entry) {
  v4_pool_entry(d, w, st, entry_index, entry);
  v4_rotate_entry(d, entry_index, entry);
}

void v4_compressor_step(const V4CompressorDims& d, const V4Compressor& w, const V4SeqState& st,
                        const float* kv, const float* score, const int32_t* pos, int64_t n) {
  const int64_t width = d.width();
  const auto* ape = static_cast<const float*>(w.ape.data);
  for (int64_t i = 0; i < n; ++i) {
    float* row = st.row(pos[i]);
    std::memcpy(row + d.kv_off, kv + i * width, sizeof(float) * width);
    float* srow = row + d.score_off;
    if (!score) {  // one slot a window (V4.1's ratio 1): its softmax weight is 1 whatever it is
      std::fill_n(srow, width, 0.0f);
      continue;
    }
    std::memcpy(srow, score + i * width, sizeof(float) * width);
    if (!ape) continue;  // V4.1 has no position bias
    const float* a = ape + (pos[i] % d.ratio) * width;
    for (int64_t c = 0; c < width; ++c) srow[c] += a[c];
  }
  for (int64_t i = 0; i < n; ++i)
    if ((pos[i] + 1) % d.ratio == 0 && pos[i] >= st.entries_from)
      v4_compress_entry(d, w, st, pos[i] / d.ratio,
                        st.entry(d.entry_off, d.dim, d.ratio, pos[i] / d.ratio));
}

}  // namespace deepinfer::model
