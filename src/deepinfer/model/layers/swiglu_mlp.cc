// SwiGLU MLP: gate and up projections, the activation, the down projection.
#include "deepinfer/model/layers/swiglu_mlp.h"

#include <algorithm>

#include "deepinfer/kernels/cpu/activation.h"

namespace deepinfer::model {

void swiglu_mlp_forward(const MlpWeights& m, const float* x, int64_t rows, int64_t hidden, float* out,
                        float* gate_buf, float* up_buf, ForwardContext& ctx, float clamp_limit) {
  const int64_t I = m.gate.n_out();
  const LinearTarget gate_up[] = {{&m.gate, gate_buf, I}, {&m.up, up_buf, I}};
  linear_forward_shared(gate_up, x, rows, hidden, ctx);
  if (clamp_limit > 0)
    for (int64_t i = 0; i < rows * I; ++i) {
      gate_buf[i] = std::min(gate_buf[i], clamp_limit);
      up_buf[i] = std::clamp(up_buf[i], -clamp_limit, clamp_limit);
    }
  kernels::swiglu(gate_buf, up_buf, gate_buf, rows * I);
  linear_forward(m.down, gate_buf, rows, I, out, hidden, ctx);
}

}  // namespace deepinfer::model
