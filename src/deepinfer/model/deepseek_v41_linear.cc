// V4.1 linear weights: loading with the configured FP8 block edge, and the forward.
#include "deepinfer/model/deepseek_v41_linear.h"

#include "deepinfer/kernels/cpu/fp8_matmul.h"
#include "deepinfer/kernels/cpu/matmul.h"

namespace deepinfer::model {

Result<V41Linear> load_v41_linear(const V4Names& names, const std::string& prefix, int64_t n_out,
                                  int64_t n_in, int fp8_block) {
  V41Linear l;
  DI_ASSIGN_OR_RETURN(l.w.weight, names.get(prefix + ".weight", {n_out, n_in}));
  if (l.w.weight.dtype != DType::kF8_E4M3) {
    if (!kernels::matmul_supports(l.w.weight.dtype))
      return unsupported("{}: tensor '{}.weight' has unsupported type {}",
                         names.source().description, prefix, dtype_name(l.w.weight.dtype));
    return l;
  }
  if (fp8_block <= 0)
    return corrupt("{}: tensor '{}.weight' is FP8 but config.json has no FP8 quantization_config",
                   names.source().description, prefix);
  l.fp8_block = fp8_block;
  const int64_t bo = (n_out + fp8_block - 1) / fp8_block, bi = (n_in + fp8_block - 1) / fp8_block;
  DI_ASSIGN_OR_RETURN(l.w.scale_inv, names.get_scale(prefix + ".scale", {bo, bi}));
  return l;
}

void v41_linear_forward(const V41Linear& l, const float* in, int64_t rows, float* out,
                        ForwardContext& ctx) {
  if (l.w.weight.dtype != DType::kF8_E4M3) {
    linear_forward(l.w, in, rows, l.w.n_in(), out, l.w.n_out(), ctx);
    return;
  }
  if (rows == 0) return;
  kernels::Fp8MatmulParams f;
  f.weight = static_cast<const uint8_t*>(l.w.weight.data);
  f.weight_row_bytes = l.w.weight.row_stride_bytes();
  f.scale_inv = static_cast<const float*>(l.w.scale_inv.data);
  f.scale_stride = l.w.scale_inv.shape[1];
  f.block = l.fp8_block;
  f.n_out = l.w.n_out();
  f.n_in = l.w.n_in();
  f.input = in;
  f.n_rows = rows;
  f.input_stride = l.w.n_in();
  f.output = out;
  f.output_stride = l.w.n_out();
  kernels::fp8_matmul(f, *ctx.pool);
}

}  // namespace deepinfer::model
