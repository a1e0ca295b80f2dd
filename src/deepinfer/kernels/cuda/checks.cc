// Params validation for the CUDA kernels (checks.h).
#include "deepinfer/kernels/cuda/checks.h"

#include <cmath>
#include <cstdint>

namespace deepinfer::cuda {
namespace {

constexpr int64_t kMaxGridX = (int64_t{1} << 31) - 1;  // blocks along x in one launch

Status check_rows(const char* op, int64_t rows, int64_t dim, int64_t x_stride, int64_t y_stride) {
  if (rows < 0 || dim < 0)
    return invalid_argument("{}: negative size (rows {}, dim {})", op, rows, dim);
  if (rows > kMaxGridX)
    return invalid_argument("{}: {} rows exceed one launch ({})", op, rows, kMaxGridX);
  if (rows > 1 && (x_stride < dim || y_stride < dim))
    return invalid_argument("{}: strides {} and {} must be at least dim {}", op, x_stride, y_stride,
                            dim);
  return Status::ok();
}

bool aligned(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

}  // namespace

Status check_rms_norm(const RmsNormParams& p) {
  DI_RETURN_IF_ERROR(check_rows("rms_norm", p.rows, p.dim, p.x_stride, p.y_stride));
  if (p.rows > 0 && p.dim > 0 && (!p.x || !p.y))
    return invalid_argument("rms_norm: x and y must be set");
  if (!(p.eps >= 0)) return invalid_argument("rms_norm: eps must be >= 0, got {}", p.eps);
  return Status::ok();
}

Status check_rope(const RopeParams& p) {
  if (p.rot_dim <= 0 || p.rot_dim % 2 != 0 || p.rot_dim > p.head_dim)
    return invalid_argument("rope: rot_dim {} must be even, positive and at most head_dim {}",
                            p.rot_dim, p.head_dim);
  if (p.n_tokens < 0 || p.n_heads < 0)
    return invalid_argument("rope: negative n_tokens or n_heads");
  if (p.n_tokens > kMaxGridX)
    return invalid_argument("rope: {} tokens exceed one launch", p.n_tokens);
  if (p.n_tokens > 1 && p.token_stride < int64_t{p.n_heads} * p.head_dim)
    return invalid_argument("rope: token_stride {} < n_heads * head_dim = {}", p.token_stride,
                            int64_t{p.n_heads} * p.head_dim);
  if (p.n_tokens > 0 && (!p.x || !p.positions || !p.inv_freq))
    return invalid_argument("rope: x, positions and inv_freq must be set");
  return Status::ok();
}

Status check_softmax(const SoftmaxParams& p) {
  DI_RETURN_IF_ERROR(check_rows("softmax", p.rows, p.n, p.x_stride, p.y_stride));
  if (p.rows > 0 && p.n > 0 && (!p.x || !p.y))
    return invalid_argument("softmax: x and y must be set");
  return Status::ok();
}

bool embedding_supports(DType type) {
  return type == DType::kF32 || type == DType::kF16 || type == DType::kBF16 ||
         type == DType::kQ8_0 || type == DType::kQ4_1;
}

Status check_embedding(const EmbeddingParams& p) {
  if (!embedding_supports(p.type))
    return invalid_argument("embedding_lookup: no CUDA kernel for table type {}",
                            dtype_name(p.type));
  const auto info = dtype_info(p.type);
  if (p.dim < 0 || p.n < 0) return invalid_argument("embedding_lookup: negative dim or n");
  if (p.dim % info->block_elems != 0)
    return invalid_argument("embedding_lookup: dim {} is not a multiple of the {} block ({})",
                            p.dim, dtype_name(p.type), info->block_elems);
  if (p.row_bytes < row_bytes(p.type, p.dim))
    return invalid_argument("embedding_lookup: row_bytes {} < {} for {} x {}", p.row_bytes,
                            row_bytes(p.type, p.dim), p.dim, dtype_name(p.type));
  const size_t align = p.type == DType::kF32 ? 4 : 2;
  if (p.row_bytes % align != 0 || !aligned(p.table, align))
    return invalid_argument("embedding_lookup: table rows must be {}-byte aligned", align);
  if (p.n > kMaxGridX) return invalid_argument("embedding_lookup: {} ids exceed one launch", p.n);
  if (p.n > 0 && p.dim > 0 && (!p.table || !p.ids || !p.out))
    return invalid_argument("embedding_lookup: table, ids and out must be set");
  return Status::ok();
}

Status check_matmul(const MatmulParams& p) {
  if (!warp_matmul_supports(p.weight_type))
    return invalid_argument("matmul: no CUDA kernel for weight type {}", dtype_name(p.weight_type));
  const auto info = dtype_info(p.weight_type);
  if (p.n_out < 0 || p.n_in <= 0 || p.n_rows < 0)
    return invalid_argument("matmul: bad sizes n_out {} n_in {} n_rows {}", p.n_out, p.n_in,
                            p.n_rows);
  if (p.n_in % info->block_elems != 0)
    return invalid_argument("matmul: n_in {} is not a multiple of the {} block ({})", p.n_in,
                            dtype_name(p.weight_type), info->block_elems);
  if (p.weight_row_bytes < row_bytes(p.weight_type, p.n_in))
    return invalid_argument("matmul: weight_row_bytes {} < {} for {} x {}", p.weight_row_bytes,
                            row_bytes(p.weight_type, p.n_in), p.n_in, dtype_name(p.weight_type));
  const size_t align = p.weight_type == DType::kF32 ? 4 : 2;
  if (p.weight_row_bytes % align != 0 || !aligned(p.weight, align))
    return invalid_argument("matmul: weight rows must be {}-byte aligned for {}", align,
                            dtype_name(p.weight_type));
  if (p.input_stride < p.n_in || p.output_stride < p.n_out)
    return invalid_argument("matmul: input_stride {} < n_in {} or output_stride {} < n_out {}",
                            p.input_stride, p.n_in, p.output_stride, p.n_out);
  if ((p.n_out + 3) / 4 > kMaxGridX)
    return invalid_argument("matmul: n_out {} exceeds one launch", p.n_out);
  if (p.n_rows > 0 && p.n_out > 0 && (!p.weight || !p.input || !p.output))
    return invalid_argument("matmul: weight, input and output must be set");
  return Status::ok();
}

namespace {

// The weight layout a format needs for rows of n_in inputs (the part all matmul params share).
Status check_scaled_layout(const char* op, bool fp8, int block, int64_t n_in, size_t row_bytes,
                           int64_t scale_stride) {
  if (fp8) {
    if (block <= 0 || block % 32 != 0)
      return invalid_argument("{}: block {} must be a positive multiple of 32", op, block);
    if (row_bytes < static_cast<size_t>(n_in))
      return invalid_argument("{}: weight_row_bytes {} < n_in {}", op, row_bytes, n_in);
    if (scale_stride < (n_in + block - 1) / block)
      return invalid_argument("{}: scale_stride {} < ceil(n_in {} / block {})", op, scale_stride,
                              n_in, block);
    return Status::ok();
  }
  if (n_in % 2 != 0) return invalid_argument("{}: n_in {} must be even", op, n_in);
  if (row_bytes < static_cast<size_t>(n_in / 2))
    return invalid_argument("{}: weight_row_bytes {} < n_in / 2 = {}", op, row_bytes, n_in / 2);
  if (scale_stride < (n_in + 31) / 32)
    return invalid_argument("{}: scale_stride {} < ceil(n_in {} / 32)", op, scale_stride, n_in);
  return Status::ok();
}

Status check_product(const char* op, int64_t n_out, int64_t n_in, int64_t n_rows,
                     int64_t input_stride, int64_t output_stride) {
  if (n_out <= 0 || n_in <= 0 || n_rows < 0)
    return invalid_argument("{}: bad sizes n_out {} n_in {} n_rows {}", op, n_out, n_in, n_rows);
  if (input_stride < n_in || output_stride < n_out)
    return invalid_argument("{}: input_stride {} < n_in {} or output_stride {} < n_out {}", op,
                            input_stride, n_in, output_stride, n_out);
  if ((n_out + 3) / 4 > kMaxGridX)
    return invalid_argument("{}: n_out {} exceeds one launch", op, n_out);
  return Status::ok();
}

}  // namespace

Status check_fp8_matmul(const Fp8MatmulParams& p) {
  DI_RETURN_IF_ERROR(
      check_product("fp8_matmul", p.n_out, p.n_in, p.n_rows, p.input_stride, p.output_stride));
  DI_RETURN_IF_ERROR(
      check_scaled_layout("fp8_matmul", true, p.block, p.n_in, p.weight_row_bytes, p.scale_stride));
  if (p.n_rows > 0 && (!p.weight || !p.scale_inv || !p.input || !p.output))
    return invalid_argument("fp8_matmul: weight, scale_inv, input and output must be set");
  return Status::ok();
}

Status check_fp4_matmul(const Fp4MatmulParams& p) {
  DI_RETURN_IF_ERROR(
      check_product("fp4_matmul", p.n_out, p.n_in, p.n_rows, p.input_stride, p.output_stride));
  DI_RETURN_IF_ERROR(
      check_scaled_layout("fp4_matmul", false, 0, p.n_in, p.weight_row_bytes, p.scale_stride));
  if (p.n_rows > 0 && (!p.weight || !p.scale || !p.input || !p.output))
    return invalid_argument("fp4_matmul: weight, scale, input and output must be set");
  return Status::ok();
}

Status check_grouped_matmul(const GroupedMatmulParams& p) {
  constexpr const char* op = "grouped_matmul";
  DI_RETURN_IF_ERROR(check_product(op, p.n_out, p.n_in, p.n_rows, p.input_stride, p.output_stride));
  if (p.n_groups <= 0 || p.n_groups > 65535)
    return invalid_argument("{}: n_groups {} outside [1, 65535]", op, p.n_groups);
  if (p.max_group_rows < 0 || p.max_group_rows > p.n_rows)
    return invalid_argument("{}: max_group_rows {} outside [0, n_rows {}]", op, p.max_group_rows,
                            p.n_rows);
  switch (p.format) {
    case GroupedWeight::kFp8Block:
    case GroupedWeight::kFp4:
      DI_RETURN_IF_ERROR(check_scaled_layout(op, p.format == GroupedWeight::kFp8Block, p.block,
                                             p.n_in, p.weight_row_bytes, p.scale_stride));
      if (p.n_rows > 0 && !p.scales)
        return invalid_argument("{}: scales must be set for FP8/FP4", op);
      break;
    default: {
      const DType t = p.format == GroupedWeight::kF32    ? DType::kF32
                      : p.format == GroupedWeight::kF16  ? DType::kF16
                      : p.format == GroupedWeight::kBF16 ? DType::kBF16
                      : p.format == GroupedWeight::kQ8_0 ? DType::kQ8_0
                      : p.format == GroupedWeight::kQ4_1 ? DType::kQ4_1
                                                         : DType::kF64;
      if (t == DType::kF64)
        return invalid_argument("{}: format {} has no kernel", op, static_cast<int>(p.format));
      const int64_t blk = dtype_info(t)->block_elems;
      if (p.n_in % blk != 0)
        return invalid_argument("{}: n_in {} is not a multiple of the {} block ({})", op, p.n_in,
                                dtype_name(t), blk);
      if (p.weight_row_bytes < row_bytes(t, p.n_in))
        return invalid_argument("{}: weight_row_bytes {} < {} for {} x {}", op, p.weight_row_bytes,
                                row_bytes(t, p.n_in), p.n_in, dtype_name(t));
      if (p.weight_row_bytes % (t == DType::kF32 ? 4 : 2) != 0)
        return invalid_argument("{}: weight_row_bytes {} breaks the {} alignment", op,
                                p.weight_row_bytes, dtype_name(t));
    }
  }
  if (p.n_rows > 0 && (!p.weights || !p.group_offsets || !p.input || !p.output))
    return invalid_argument("{}: weights, group_offsets, input and output must be set", op);
  return Status::ok();
}

Status check_sample_row(const SampleRow& r) {
  if (!(r.inv_temperature > 0.0f) || std::isinf(r.inv_temperature))
    return invalid_argument("sample_rows: inv_temperature {} must be positive and finite",
                            r.inv_temperature);
  if (r.top_k < 0) return invalid_argument("sample_rows: top_k {} must be >= 0", r.top_k);
  if (!(r.top_p > 0.0f && r.top_p <= 1.0f))
    return invalid_argument("sample_rows: top_p {} outside (0, 1]", r.top_p);
  if (r.use_min_p && !(r.log_min_p <= 0.0f))
    return invalid_argument("sample_rows: log_min_p {} must be <= 0", r.log_min_p);
  return Status::ok();
}

Status check_sample_rows(const SampleParams& p) {
  if (p.rows < 0 || p.rows > kMaxGridX)
    return invalid_argument("sample_rows: rows {} outside [0, {}]", p.rows, kMaxGridX);
  if (p.vocab <= 0 || p.vocab > (int64_t{1} << 31) - 1)
    return invalid_argument("sample_rows: vocab {} outside [1, 2^31)", p.vocab);
  if (p.rows > 1 && p.stride < p.vocab)
    return invalid_argument("sample_rows: stride {} < vocab {}", p.stride, p.vocab);
  if (p.scratch_stride < sample_scratch_elems(p.vocab))
    return invalid_argument("sample_rows: scratch_stride {} < sample_scratch_elems(vocab) = {}",
                            p.scratch_stride, sample_scratch_elems(p.vocab));
  if (p.rows > 0 && (!p.logits || !p.row_params || !p.scratch || !p.tokens))
    return invalid_argument("sample_rows: logits, row_params, scratch and tokens must be set");
  return Status::ok();
}

Status check_paged_attention(const kernels::AttentionParams& p, int64_t n_rows) {
  if (p.kv_type != DType::kF32 && p.kv_type != DType::kF16 && p.kv_type != DType::kBF16)
    return invalid_argument("paged_attention: kv_type {} unsupported (f32, f16, bf16)",
                            dtype_name(p.kv_type));
  if (p.n_heads <= 0 || p.n_kv_heads <= 0 || p.n_heads % p.n_kv_heads != 0 || p.n_heads > 65535)
    return invalid_argument(
        "paged_attention: n_heads {} must be a multiple of n_kv_heads {} (at most 65535)",
        p.n_heads, p.n_kv_heads);
  if (p.head_dim <= 0 || p.head_dim > 8192)
    return invalid_argument("paged_attention: head_dim {} outside [1, 8192]", p.head_dim);
  if (p.v_head_dim <= 0 || p.v_head_dim > kMaxAttentionVDim)
    return invalid_argument("paged_attention: v_head_dim {} outside [1, {}]", p.v_head_dim,
                            kMaxAttentionVDim);
  if (p.block_size <= 0 || p.sliding_window < 0)
    return invalid_argument("paged_attention: bad block_size or window");
  if (n_rows < 0 || n_rows > kMaxGridX)
    return invalid_argument("paged_attention: {} rows exceed one launch", n_rows);
  if (n_rows > 0 && (!p.q || !p.k_cache || !p.v_cache || !p.out || !p.seqs || p.n_seqs <= 0))
    return invalid_argument("paged_attention: q, caches, out and seqs must be set");
  return Status::ok();
}

}  // namespace deepinfer::cuda
