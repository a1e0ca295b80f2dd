// Rotary position embedding applied in place to [n_tokens, n_heads, head_dim] rows, with the
// two pairings in use and the common frequency scalings (linear, Llama 3, YaRN).
//
// cos/sin are computed inline per token (in double, shared by all heads of the token) rather
// than cached: the cost is rot_dim/2 sincos per token, small next to the heads it serves, and
// no cache means no shared state and no invalidation when positions jump (prefix hits, chunks).
#pragma once

#include <cstdint>

#include "deepinfer/base/cpu_features.h"

namespace deepinfer::kernels {

enum class RopeLayout {
  kInterleaved,  // GGUF/ggml "normal": rotate pairs (2i, 2i+1); llama GGUFs (Q/K permuted)
  kHalf,         // Hugging Face rotate_half / ggml "neox": pairs (i, i + rot_dim/2)
};

enum class RopeScalingType { kNone, kLinear, kLlama3, kYarn };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  float factor = 1.0f;              // linear, llama3, yarn
  float low_freq_factor = 1.0f;     // llama3
  float high_freq_factor = 4.0f;    // llama3
  int64_t original_max_pos = 8192;  // llama3, yarn: original_max_position_embeddings
  float beta_fast = 32.0f;          // yarn
  float beta_slow = 1.0f;           // yarn
  float mscale = 1.0f;              // yarn (DeepSeek-V3 style when mscale_all_dim != 0)
  float mscale_all_dim = 0.0f;      // yarn
  float attention_factor = 0.0f;    // yarn: cos/sin multiplier; 0 = derive as Hugging Face does
};

struct RopeParams {
  float* x;                    // [n_tokens, token_stride]; token t's head h at t*token_stride + h*head_dim
  int64_t n_tokens;
  int n_heads;
  int head_dim;
  int rot_dim;                 // even, <= head_dim; dims >= rot_dim are left alone
  int64_t token_stride;        // floats between tokens
  const int32_t* positions;    // [n_tokens]
  float theta;                 // base, e.g. 10000 or 500000
  RopeLayout layout;
  RopeScaling scaling;
};

void rope(const RopeParams& p);
void rope_with_isa(const RopeParams& p, IsaLevel isa);
void rope_reference(const RopeParams& p);

// Inverse frequencies [rot_dim / 2] after scaling (exposed for tests and other back ends).
void rope_inv_freq(const RopeScaling& s, float theta, int rot_dim, double* out);
// YaRN's multiplier on cos/sin (1 for other scalings); applied inside rope().
float rope_cos_sin_scale(const RopeScaling& s);
// Multiplier the caller applies to the attention softmax scale: DeepSeek-V3's
// mscale(factor, mscale_all_dim)^2 for YaRN with mscale_all_dim != 0, else 1.
float rope_attention_scale_multiplier(const RopeScaling& s);

namespace detail {
// y[i] = x[i] c[i] - x[i+h] s[i]; y[i+h] = x[i+h] c[i] + x[i] s[i], i < h.
using RopeHalfFn = void (*)(float* x, const float* c, const float* s, int h);
// y = x * cd + swap_pairs(x) * sd, with cd = (c0,c0,c1,c1..), sd = (-s0,s0,-s1,s1..).
using RopeInterleavedFn = void (*)(float* x, const float* cd, const float* sd, int rot_dim);
void rope_half_avx2(float* x, const float* c, const float* s, int h);
void rope_interleaved_avx2(float* x, const float* cd, const float* sd, int rot_dim);
void rope_half_avx512(float* x, const float* c, const float* s, int h);
void rope_interleaved_avx512(float* x, const float* cd, const float* sd, int rot_dim);
}  // namespace detail

}  // namespace deepinfer::kernels
