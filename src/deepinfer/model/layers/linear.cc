// Linear dispatch: FP8 block-scaled weights to kernels::fp8_matmul, everything else to
// kernels::matmul; the bias is added row by row afterwards.
#include "deepinfer/model/layers/linear.h"

#include <algorithm>
#include <array>

#include "deepinfer/base/check.h"
#include "deepinfer/kernels/cpu/fp8_matmul.h"
#include "deepinfer/kernels/cpu/matmul.h"
#include "deepinfer/model/weight_map.h"

namespace deepinfer::model {
namespace {

void add_bias(const Tensor& bias, int64_t rows, int64_t n_out, float* out, int64_t out_stride) {
  const float* b = static_cast<const float*>(bias.data);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < n_out; ++o) out[r * out_stride + o] += b[o];
}

kernels::MatmulParams matmul_params(const LinearWeight& w, const float* in, int64_t rows, int64_t in_stride,
                                    float* out, int64_t out_stride, const ForwardContext& ctx) {
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
  return p;
}

}  // namespace

void linear_forward(const LinearWeight& w, const float* in, int64_t rows, int64_t in_stride, float* out,
                    int64_t out_stride, ForwardContext& ctx) {
  if (rows == 0) return;
  if (w.weight.dtype == DType::kF8_E4M3) {
    kernels::Fp8MatmulParams f;
    f.weight = static_cast<const uint8_t*>(w.weight.data);
    f.weight_row_bytes = w.weight.row_stride_bytes();
    f.scale_inv = static_cast<const float*>(w.scale_inv.data);
    f.scale_stride = w.scale_inv.shape[1];
    f.block = w.fp8_block;
    f.n_out = w.n_out();
    f.n_in = w.n_in();
    f.input = in;
    f.n_rows = rows;
    f.input_stride = in_stride;
    f.output = out;
    f.output_stride = out_stride;
    kernels::fp8_matmul(f, *ctx.pool);
  } else {
    kernels::matmul(matmul_params(w, in, rows, in_stride, out, out_stride, ctx), *ctx.pool);
  }
  if (!w.bias.empty()) add_bias(w.bias, rows, w.n_out(), out, out_stride);
}

void linear_forward_shared(std::span<const LinearTarget> targets, const float* in, int64_t rows, int64_t in_stride,
                           ForwardContext& ctx) {
  if (rows == 0) return;
  DI_CHECK(targets.size() <= static_cast<size_t>(kernels::kMaxMatmulGroup), "linear_forward_shared: {} targets",
           targets.size());
  std::array<kernels::MatmulParams, kernels::kMaxMatmulGroup> group;
  size_t n = 0;
  for (const LinearTarget& t : targets) {
    if (t.weight->weight.dtype == DType::kF8_E4M3) linear_forward(*t.weight, in, rows, in_stride, t.out, t.out_stride, ctx);
    else group[n++] = matmul_params(*t.weight, in, rows, in_stride, t.out, t.out_stride, ctx);
  }
  kernels::matmul_group(std::span<const kernels::MatmulParams>(group.data(), n), *ctx.pool);
  for (const LinearTarget& t : targets)
    if (t.weight->weight.dtype != DType::kF8_E4M3 && !t.weight->bias.empty())
      add_bias(t.weight->bias, rows, t.weight->n_out(), t.out, t.out_stride);
}

void linear_f32(const float* w, int64_t n_out, int64_t n_in, const float* in, int64_t rows, int64_t in_stride,
                float* out, int64_t out_stride, ForwardContext& ctx) {
  kernels::MatmulParams p;
  p.weight = w;
  p.weight_type = DType::kF32;
  p.n_out = n_out;
  p.n_in = n_in;
  p.weight_row_bytes = sizeof(float) * n_in;
  p.input = in;
  p.n_rows = rows;
  p.input_stride = in_stride;
  p.output = out;
  p.output_stride = out_stride;
  p.batch_invariant = ctx.batch_invariant;
  kernels::matmul(p, *ctx.pool);
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
        out[o * n_in + i] =
            kernels::fp8_e4m3_to_float(q[o * n_in + i]) * s[(o / w.fp8_block) * bi + i / w.fp8_block];
    return out;
  }
  DI_ASSIGN_OR_RETURN(Tensor f, to_f32(w.weight, name));
  const auto* src = static_cast<const float*>(f.data);
  std::copy(src, src + n_out * n_in, out.begin());
  return out;
}

ThreadPool& inline_pool() {
  static ThreadPool pool(1);
  return pool;
}

}  // namespace deepinfer::model
