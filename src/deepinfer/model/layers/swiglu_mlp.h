// The SwiGLU feed-forward block: down(silu(gate x) * up x), optionally with DeepSeek-V4's clamp
// of the gate and up activations. Dense MLPs, MoE experts and shared experts all run it.
#pragma once

#include <cstdint>

#include "deepinfer/model/layers/linear.h"

namespace deepinfer::model {

struct MlpWeights {
  LinearWeight gate, up, down;
};

// x [rows, hidden] -> out [rows, hidden]. gate_buf and up_buf hold rows * intermediate floats
// each (the caller owns them, so each model keeps its own activation buffers). clamp_limit > 0:
// gate = min(gate, L) and up = clamp(up, -L, L) before the SwiGLU.
void swiglu_mlp_forward(const MlpWeights& m, const float* x, int64_t rows, int64_t hidden, float* out,
                        float* gate_buf, float* up_buf, ForwardContext& ctx, float clamp_limit = 0.0f);

}  // namespace deepinfer::model
