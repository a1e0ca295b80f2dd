// Scalar activation quantizers. Each row is quantized alone, so a row's bytes never depend on
// the batch it arrives in (a precondition for batch-invariant matmul results).
#include "deepinfer/kernels/cpu/quantize_activation.h"

#include <cmath>

#include "deepinfer/tensor/quant.h"

namespace deepinfer::kernels {

void quantize_act_q8_32(const float* x, ActBlock32* out, int64_t n, ActSign sign) {
  const int bias = sign == ActSign::kUnsigned ? 128 : 0;
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) {
      const int8_t q = static_cast<int8_t>(std::round(x[j] * id));
      out[b].qs[j] = static_cast<int8_t>(static_cast<uint8_t>(q + bias));
      sum += q;
    }
    out[b].d = d;
    out[b].sum = sum;
    out[b].dsum = d * static_cast<float>(sum);
    out[b].pad = 0;
  }
}

void quantize_act_q8_k(const float* x, void* out, int64_t n) { quant_detail::quantize_q8_k(x, out, n); }

}  // namespace deepinfer::kernels
