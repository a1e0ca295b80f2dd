// Host-side validation of the CUDA kernels' params (no GPU needed): invalid_argument naming the
// field and the problem, or ok. The launchers themselves treat invalid params as bugs.
#pragma once

#include "deepinfer/base/status.h"
#include "deepinfer/kernels/cuda/attention.h"
#include "deepinfer/kernels/cuda/elementwise.h"
#include "deepinfer/kernels/cuda/matmul.h"
#include "deepinfer/kernels/cuda/moe_matmul.h"
#include "deepinfer/kernels/cuda/sampling.h"

namespace deepinfer::cuda {

Status check_rms_norm(const RmsNormParams& p);
Status check_rope(const RopeParams& p);
Status check_softmax(const SoftmaxParams& p);
bool embedding_supports(DType type);
Status check_embedding(const EmbeddingParams& p);
// For warp_matmul: a supported type, whole blocks, rows long and aligned enough for the loads.
Status check_matmul(const MatmulParams& p);
// FP8 / FP4 block-scaled matmuls: the CPU's checks, plus FP8 blocks a multiple of 32 (a lane's
// 32-input chunk sits inside one scale block).
Status check_fp8_matmul(const Fp8MatmulParams& p);
Status check_fp4_matmul(const Fp4MatmulParams& p);
// The grouped (MoE) matmul's scalar fields and pointers; the offsets and per-expert pointers
// live on the device and are not read (each expert's weight must be laid out and aligned as the
// single-weight params require).
Status check_grouped_matmul(const GroupedMatmulParams& p);
// Device sampling: sizes, strides, scratch and the pointers; the rows' settings live on the
// device (check_sample_row checks one before it is uploaded).
Status check_sample_rows(const SampleParams& p);
Status check_sample_row(const SampleRow& r);
// The scalar fields of paged attention (the sequences live on the device and are not read).
Status check_paged_attention(const kernels::AttentionParams& p, int64_t n_rows);

}  // namespace deepinfer::cuda
