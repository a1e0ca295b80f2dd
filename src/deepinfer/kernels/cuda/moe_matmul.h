// MoE grouped matmul on the GPU: rows sorted by expert (the CPU's moe_forward order: expert e
// owns sorted rows [offsets[e], offsets[e + 1])), each expert's rows multiplied by that
// expert's weight, all experts in one launch. The arithmetic of a row is warp_matmul's /
// fp8_matmul's / fp4_matmul's for the same weight, bitwise, so a row's result depends on that
// row and its expert alone. Every pointer, the arrays of pointers included, is device memory.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace deepinfer::cuda {

// One weight format for all experts of a launch.
enum class GroupedWeight : uint8_t { kF32, kF16, kBF16, kQ8_0, kQ4_1, kFp8Block, kFp4 };

struct GroupedMatmulParams {
  GroupedWeight format = GroupedWeight::kF32;
  const void* const* weights = nullptr;  // [n_groups] each [n_out] rows of weight_row_bytes
  // [n_groups] kFp8Block: float scale_inv [ceil(n_out / block), scale_stride];
  // kFp4: ue8m0 bytes [n_out, scale_stride]; unused (may be null) for the other formats.
  const void* const* scales = nullptr;
  size_t weight_row_bytes = 0;  // as the format's single-weight params
  int64_t scale_stride = 0;
  int block = 128;       // kFp8Block only
  int64_t n_groups = 0;  // experts, at most 65535
  int64_t n_out = 0;
  int64_t n_in = 0;
  const int64_t* group_offsets = nullptr;  // [n_groups + 1] non-decreasing, [0] = 0, last = n_rows
  const int32_t* input_rows = nullptr;     // [n_rows] input row of sorted row j; null: row j itself
  const float* input = nullptr;            // [*, input_stride]
  int64_t input_stride = 0;
  int64_t n_rows = 0;          // group_offsets[n_groups]: total (token, expert) pairs
  int64_t max_group_rows = 0;  // 0 or a bound on any group's rows: splits the rows of a group
                               // across ceil(max_group_rows / 4) thread blocks (at most 65535)
  float* output = nullptr;     // [n_rows, output_stride] in sorted order
  int64_t output_stride = 0;
};

void grouped_matmul(const GroupedMatmulParams& p, cudaStream_t stream);

}  // namespace deepinfer::cuda
