// Host-side validation of the CUDA kernels' params (no GPU needed): invalid_argument naming the
// field and the problem, or ok. The launchers themselves treat invalid params as bugs.
#pragma once

#include "deepinfer/base/status.h"
#include "deepinfer/kernels/cuda/attention.h"
#include "deepinfer/kernels/cuda/elementwise.h"
#include "deepinfer/kernels/cuda/matmul.h"

namespace deepinfer::cuda {

Status check_rms_norm(const RmsNormParams& p);
Status check_rope(const RopeParams& p);
Status check_softmax(const SoftmaxParams& p);
bool embedding_supports(DType type);
Status check_embedding(const EmbeddingParams& p);
// For warp_matmul: a supported type, whole blocks, rows long and aligned enough for the loads.
Status check_matmul(const MatmulParams& p);
// The scalar fields of paged attention (the sequences live on the device and are not read).
Status check_paged_attention(const kernels::AttentionParams& p, int64_t n_rows);

}  // namespace deepinfer::cuda
