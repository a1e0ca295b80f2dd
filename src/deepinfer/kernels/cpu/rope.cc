// RoPE frequency scalings (following the Hugging Face rope_init functions), the scalar
// reference and the table-driven path shared by the SIMD variants.
#include "deepinfer/kernels/cpu/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "deepinfer/base/check.h"

namespace deepinfer::kernels {
namespace {

double yarn_mscale(double scale, double mscale) { return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

// Dimension index at which a frequency completes `rotations` turns over the original context.
double yarn_correction_dim(double rotations, int dim, double base, double max_pos) {
  return dim * std::log(max_pos / (rotations * 2 * std::numbers::pi)) / (2 * std::log(base));
}

void check(const RopeParams& p) {
  DI_CHECK(p.rot_dim > 0 && p.rot_dim % 2 == 0 && p.rot_dim <= p.head_dim, "rope: rot_dim {} head_dim {}",
           p.rot_dim, p.head_dim);
}

// Per-token cos/sin in double, multiplied by the YaRN factor.
void angles(const RopeParams& p, const double* inv_freq, int64_t t, double* c, double* s, double mul) {
  const double pos = p.positions[t];
  for (int i = 0; i < p.rot_dim / 2; ++i) {
    const double a = pos * inv_freq[i];
    c[i] = std::cos(a) * mul;
    s[i] = std::sin(a) * mul;
  }
}

}  // namespace

void rope_inv_freq(const RopeScaling& sc, float theta, int rot_dim, double* out) {
  const int half = rot_dim / 2;
  for (int i = 0; i < half; ++i) out[i] = 1.0 / std::pow(static_cast<double>(theta), 2.0 * i / rot_dim);
  switch (sc.type) {
    case RopeScalingType::kNone: return;
    case RopeScalingType::kLinear:
      for (int i = 0; i < half; ++i) out[i] /= sc.factor;
      return;
    case RopeScalingType::kLlama3: {
      const double old_ctx = static_cast<double>(sc.original_max_pos);
      const double low_wavelen = old_ctx / sc.low_freq_factor, high_wavelen = old_ctx / sc.high_freq_factor;
      for (int i = 0; i < half; ++i) {
        const double wavelen = 2 * std::numbers::pi / out[i];
        if (wavelen > low_wavelen) {
          out[i] /= sc.factor;
        } else if (wavelen >= high_wavelen) {
          const double smooth = (old_ctx / wavelen - sc.low_freq_factor) / (sc.high_freq_factor - sc.low_freq_factor);
          out[i] = (1 - smooth) * out[i] / sc.factor + smooth * out[i];
        }
      }
      return;
    }
    case RopeScalingType::kYarn: {
      const double mp = static_cast<double>(sc.original_max_pos);
      double low = std::floor(yarn_correction_dim(sc.beta_fast, rot_dim, theta, mp));
      double high = std::ceil(yarn_correction_dim(sc.beta_slow, rot_dim, theta, mp));
      low = std::max(low, 0.0);
      high = std::min(high, rot_dim - 1.0);
      if (low == high) high += 0.001;  // avoid a zero-width ramp
      for (int i = 0; i < half; ++i) {
        const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
        const double extrap = 1.0 - ramp;  // share of the original (extrapolated) frequency
        out[i] = out[i] / sc.factor * (1 - extrap) + out[i] * extrap;
      }
      return;
    }
  }
}

float rope_cos_sin_scale(const RopeScaling& s) {
  if (s.type != RopeScalingType::kYarn) return 1.0f;
  if (s.attention_factor > 0.0f) return s.attention_factor;
  if (s.mscale != 0.0f && s.mscale_all_dim != 0.0f)
    return static_cast<float>(yarn_mscale(s.factor, s.mscale) / yarn_mscale(s.factor, s.mscale_all_dim));
  return static_cast<float>(yarn_mscale(s.factor, 1.0));
}

float rope_attention_scale_multiplier(const RopeScaling& s) {
  if (s.type != RopeScalingType::kYarn || s.mscale_all_dim == 0.0f) return 1.0f;
  const double m = yarn_mscale(s.factor, s.mscale_all_dim);
  return static_cast<float>(m * m);
}

void rope_reference(const RopeParams& p) {
  check(p);
  const int h = p.rot_dim / 2;
  std::vector<double> inv(h), c(h), s(h);
  rope_inv_freq(p.scaling, p.theta, p.rot_dim, inv.data());
  const double mul = rope_cos_sin_scale(p.scaling);
  for (int64_t t = 0; t < p.n_tokens; ++t) {
    angles(p, inv.data(), t, c.data(), s.data(), mul);
    for (int head = 0; head < p.n_heads; ++head) {
      float* x = p.x + t * p.token_stride + static_cast<int64_t>(head) * p.head_dim;
      for (int i = 0; i < h; ++i) {
        const int a = p.layout == RopeLayout::kHalf ? i : 2 * i;
        const int b = p.layout == RopeLayout::kHalf ? i + h : 2 * i + 1;
        const double x0 = x[a], x1 = x[b];
        x[a] = static_cast<float>(x0 * c[i] - x1 * s[i]);
        x[b] = static_cast<float>(x1 * c[i] + x0 * s[i]);
      }
    }
  }
}

void rope_with_isa(const RopeParams& p, IsaLevel isa) {
  if (isa == IsaLevel::kScalar) return rope_reference(p);
  check(p);
  const bool avx512 = isa >= IsaLevel::kAvx512;
  const detail::RopeHalfFn half_fn = avx512 ? detail::rope_half_avx512 : detail::rope_half_avx2;
  const detail::RopeInterleavedFn il_fn = avx512 ? detail::rope_interleaved_avx512 : detail::rope_interleaved_avx2;
  const int h = p.rot_dim / 2;
  thread_local std::vector<double> inv, c, s;
  thread_local std::vector<float> ct, st;  // tables in the layout the SIMD kernel wants
  inv.resize(h);
  c.resize(h);
  s.resize(h);
  ct.resize(p.rot_dim);
  st.resize(p.rot_dim);
  rope_inv_freq(p.scaling, p.theta, p.rot_dim, inv.data());
  const double mul = rope_cos_sin_scale(p.scaling);
  for (int64_t t = 0; t < p.n_tokens; ++t) {
    angles(p, inv.data(), t, c.data(), s.data(), mul);
    if (p.layout == RopeLayout::kHalf) {
      for (int i = 0; i < h; ++i) {
        ct[i] = static_cast<float>(c[i]);
        st[i] = static_cast<float>(s[i]);
      }
    } else {
      for (int i = 0; i < h; ++i) {
        ct[2 * i] = ct[2 * i + 1] = static_cast<float>(c[i]);
        st[2 * i] = -static_cast<float>(s[i]);
        st[2 * i + 1] = static_cast<float>(s[i]);
      }
    }
    for (int head = 0; head < p.n_heads; ++head) {
      float* x = p.x + t * p.token_stride + static_cast<int64_t>(head) * p.head_dim;
      if (p.layout == RopeLayout::kHalf) {
        half_fn(x, ct.data(), st.data(), h);
      } else {
        il_fn(x, ct.data(), st.data(), p.rot_dim);
      }
    }
  }
}

void rope(const RopeParams& p) { rope_with_isa(p, best_isa()); }

}  // namespace deepinfer::kernels
