// DeepSeek-V3 tensor lookup by Hugging Face name with shape checks, and the linear dispatch to the
// float/quantized matmul or the FP8 block-scaled one.
#include "deepinfer/model/deepseek_v3_weights.h"

#include <cmath>
#include <limits>

#include "deepinfer/kernels/cpu/fp8_matmul.h"
#include "deepinfer/kernels/cpu/matmul.h"
#include "deepinfer/kernels/cpu/rms_norm.h"
#include "deepinfer/model/format/safetensors.h"
#include "deepinfer/model/weight_map.h"

namespace deepinfer::model {
namespace {

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

bool DeepseekWeights::has(const std::string& name) const {
  return source_.safetensors && source_.safetensors->find(name) != nullptr;
}

Result<Tensor> DeepseekWeights::get(const std::string& name, std::vector<int64_t> shape) const {
  const Tensor* t = source_.safetensors ? source_.safetensors->find(name) : nullptr;
  if (!t) return corrupt("{}: missing tensor '{}'", source_.description, name);
  bool match = t->ndim == static_cast<int>(shape.size());
  for (int i = 0; match && i < t->ndim; ++i) match = t->shape[i] == shape[i];
  if (!match && shape.size() == 1 && t->numel() == shape[0]) match = true;
  if (!match)
    return corrupt("{}: tensor '{}' has shape {} but the config implies {}", source_.description, name,
                   t->shape_string(), shape_str(shape));
  return *t;
}

Result<Tensor> DeepseekWeights::get_f32(const std::string& name, std::vector<int64_t> shape) const {
  DI_ASSIGN_OR_RETURN(Tensor t, get(name, std::move(shape)));
  return to_f32(t, name);
}

Result<LinearWeight> DeepseekWeights::linear(const std::string& prefix, int64_t n_out, int64_t n_in) const {
  LinearWeight w;
  DI_ASSIGN_OR_RETURN(w.weight, get(prefix + ".weight", {n_out, n_in}));
  if (w.weight.dtype == DType::kF8_E4M3) {
    const int64_t bo = (n_out + kFp8Block - 1) / kFp8Block, bi = (n_in + kFp8Block - 1) / kFp8Block;
    DI_ASSIGN_OR_RETURN(w.scale_inv, get_f32(prefix + ".weight_scale_inv", {bo, bi}));
    return w;
  }
  if (!kernels::matmul_supports(w.weight.dtype))
    return unsupported("{}: tensor '{}.weight' has unsupported type {}", source_.description, prefix,
                       dtype_name(w.weight.dtype));
  return w;
}

Result<std::vector<float>> linear_to_f32(const LinearWeight& w, const std::string& name) {
  const int64_t n_out = w.n_out(), n_in = w.n_in();
  std::vector<float> out(static_cast<size_t>(n_out * n_in));
  if (w.weight.dtype == DType::kF8_E4M3) {
    const auto* q = static_cast<const uint8_t*>(w.weight.data);
    const auto* s = static_cast<const float*>(w.scale_inv.data);
    const int64_t bi = w.scale_inv.shape[1];
    for (int64_t o = 0; o < n_out; ++o)
      for (int64_t i = 0; i < n_in; ++i)
        out[o * n_in + i] = kernels::fp8_e4m3_to_float(q[o * n_in + i]) * s[(o / kFp8Block) * bi + i / kFp8Block];
    return out;
  }
  DI_ASSIGN_OR_RETURN(Tensor f, to_f32(w.weight, name));
  const auto* src = static_cast<const float*>(f.data);
  std::copy(src, src + n_out * n_in, out.begin());
  return out;
}

void linear_forward(const LinearWeight& w, const float* in, int64_t rows, int64_t in_stride, float* out,
                    int64_t out_stride, ForwardContext& ctx) {
  if (rows == 0) return;
  if (w.weight.dtype == DType::kF8_E4M3) {
    kernels::Fp8MatmulParams f;
    f.weight = static_cast<const uint8_t*>(w.weight.data);
    f.weight_row_bytes = w.weight.row_stride_bytes();
    f.scale_inv = static_cast<const float*>(w.scale_inv.data);
    f.scale_stride = w.scale_inv.shape[1];
    f.block = static_cast<int>(kFp8Block);
    f.n_out = w.n_out();
    f.n_in = w.n_in();
    f.input = in;
    f.n_rows = rows;
    f.input_stride = in_stride;
    f.output = out;
    f.output_stride = out_stride;
    kernels::fp8_matmul(f, *ctx.pool);
    return;
  }
  kernels::MatmulParams p;
  p.weight = w.weight.data;
  p.weight_type = w.weight.dtype;
  p.n_out = w.n_out();
  p.n_in = w.n_in();
  p.weight_row_bytes = w.weight.row_stride_bytes();
  p.input = in;
  p.n_rows = rows;
  p.input_stride = in_stride;
  p.output = out;
  p.output_stride = out_stride;
  p.batch_invariant = ctx.batch_invariant;
  p.precision = ctx.int8_activations ? kernels::MatmulPrecision::kInt8 : kernels::MatmulPrecision::kHigh;
  kernels::matmul(p, *ctx.pool);
}

ThreadPool& inline_pool() {
  static ThreadPool pool(1);
  return pool;
}

void rms_norm_rows(const float* x, int64_t x_stride, const Tensor& w, float* y, int64_t y_stride,
                   int64_t rows, int64_t dim, float eps) {
  kernels::RmsNormParams p;
  p.x = x;
  p.w = static_cast<const float*>(w.data);
  p.y = y;
  p.rows = rows;
  p.dim = dim;
  p.x_stride = x_stride;
  p.y_stride = y_stride;
  p.eps = eps;
  kernels::rms_norm(p);
}

}  // namespace deepinfer::model
