// V4.1 linear weights, loaded with the configured FP8 block edge.
#include "deepinfer/model/deepseek_v41_linear.h"

#include "deepinfer/kernels/cpu/matmul.h"

namespace deepinfer::model {

Result<LinearWeight> load_v41_linear(const V4Names& names, const std::string& prefix, int64_t n_out,
                                     int64_t n_in, int fp8_block) {
  LinearWeight w;
  DI_ASSIGN_OR_RETURN(w.weight, names.get(prefix + ".weight", {n_out, n_in}));
  if (w.weight.dtype != DType::kF8_E4M3) {
    if (!kernels::matmul_supports(w.weight.dtype))
      return unsupported("{}: tensor '{}.weight' has unsupported type {}",
                         names.source().description, prefix, dtype_name(w.weight.dtype));
    return w;
  }
  if (fp8_block <= 0)
    return corrupt("{}: tensor '{}.weight' is FP8 but config.json has no FP8 quantization_config",
                   names.source().description, prefix);
  w.fp8_block = fp8_block;
  const int64_t bo = (n_out + fp8_block - 1) / fp8_block, bi = (n_in + fp8_block - 1) / fp8_block;
  DI_ASSIGN_OR_RETURN(w.scale_inv, names.get_scale(prefix + ".scale", {bo, bi}));
  return w;
}

}  // namespace deepinfer::model
