// SigLIP tower + LLaVA projector forward, in float32. Attention inside the tower is full
// (non-causal) over one image's patches; each intermediate is named as in transformers.
#include "deepinfer/vision/vision_encoder.h"

#include <algorithm>
#include <cmath>

#include "deepinfer/kernels/cpu/activation.h"
#include "deepinfer/model/format/safetensors.h"
#include "deepinfer/vision/tower_weights.h"

namespace deepinfer::vision {
namespace {

void layer_norm(const float* x, const Tensor& w, const Tensor& b, float eps, int64_t rows, int64_t n, float* out) {
  const float* g = static_cast<const float*>(w.data);
  const float* beta = static_cast<const float*>(b.data);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i) mean += xr[i];
    mean /= static_cast<double>(n);
    for (int64_t i = 0; i < n; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= static_cast<double>(n);
    const float inv = static_cast<float>(1.0 / std::sqrt(var + eps));
    for (int64_t i = 0; i < n; ++i) out[r * n + i] = (xr[i] - static_cast<float>(mean)) * inv * g[i] + beta[i];
  }
}

// Full attention of one image: q, k, v [N, H] with `heads` heads -> out [N, H].
void attention(const float* q, const float* k, const float* v, int64_t N, int64_t H, int heads, float* out) {
  const int64_t d = H / heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<float> s(static_cast<size_t>(N));
  for (int h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < N; ++i) {
      const float* qi = q + i * H + h * d;
      float mx = -INFINITY;
      for (int64_t j = 0; j < N; ++j) {
        const float* kj = k + j * H + h * d;
        float dot = 0;
        for (int64_t e = 0; e < d; ++e) dot += qi[e] * kj[e];
        s[j] = dot * scale;
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < N; ++j) sum += (s[j] = std::exp(s[j] - mx));
      float* oi = out + i * H + h * d;
      std::fill(oi, oi + d, 0.0f);
      for (int64_t j = 0; j < N; ++j) {
        const float p = static_cast<float>(s[j] / sum);
        const float* vj = v + j * H + h * d;
        for (int64_t e = 0; e < d; ++e) oi[e] += p * vj[e];
      }
    }
  }
}

void add_rows(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

}  // namespace

VisionEncoder::~VisionEncoder() = default;

Result<std::unique_ptr<VisionEncoder>> VisionEncoder::load(const std::string& dir,
                                                           std::shared_ptr<const format::SafetensorsModel> weights) {
  std::unique_ptr<VisionEncoder> e(new VisionEncoder());
  DI_ASSIGN_OR_RETURN(e->config_, read_llava_config(dir + "/config.json"));
  DI_ASSIGN_OR_RETURN(e->processor_, read_image_processor_config(dir + "/preprocessor_config.json"));
  const int side = e->config_.tower.image_size;
  if (e->processor_.out_height() != side || e->processor_.out_width() != side)
    return unsupported("{}: the image processor makes {}x{} images but the vision tower takes {}x{}", dir,
                       e->processor_.out_width(), e->processor_.out_height(), side, side);
  DI_ASSIGN_OR_RETURN(e->w_, load_tower_weights(*weights, e->config_, dir));
  return e;
}

Result<std::vector<float>> VisionEncoder::encode(const std::vector<float>& pixels, model::ForwardContext& ctx) const {
  const VisionTowerConfig& t = config_.tower;
  const int64_t S = t.image_size, P = t.patch_size, G = S / P, N = t.num_patches(), H = t.hidden_size;
  const int64_t F = t.intermediate_size, K = 3 * P * P, T = config_.text_hidden_size;
  if (static_cast<int64_t>(pixels.size()) != 3 * S * S)
    return invalid_argument("pixel values hold {} floats, the vision tower takes 3x{}x{}", pixels.size(), S, S);
  // patch_embedding (a stride-P convolution) as a matmul over flattened patches.
  std::vector<float> patches(static_cast<size_t>(N * K));
  for (int64_t py = 0; py < G; ++py)
    for (int64_t px = 0; px < G; ++px)
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t y = 0; y < P; ++y)
          for (int64_t x = 0; x < P; ++x)
            patches[(py * G + px) * K + (c * P + y) * P + x] = pixels[(c * S + py * P + y) * S + px * P + x];
  std::vector<float> x(static_cast<size_t>(N * H)), h(x.size()), q(x.size()), k(x.size()), v(x.size()), a(x.size());
  std::vector<float> f(static_cast<size_t>(N * F));
  model::linear_f32(w_->patch_w.data(), H, K, patches.data(), N, K, x.data(), H, ctx);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < H; ++j) x[i * H + j] += w_->patch_b[j] + w_->pos[i * H + j];  // embeddings
  for (const TowerLayer& L : w_->layers) {
    layer_norm(x.data(), L.ln1_w, L.ln1_b, t.layer_norm_eps, N, H, h.data());  // layer_norm1
    model::linear_forward(L.q, h.data(), N, H, q.data(), H, ctx);
    model::linear_forward(L.k, h.data(), N, H, k.data(), H, ctx);
    model::linear_forward(L.v, h.data(), N, H, v.data(), H, ctx);
    attention(q.data(), k.data(), v.data(), N, H, t.num_heads, a.data());
    model::linear_forward(L.o, a.data(), N, H, h.data(), H, ctx);  // self_attn output
    add_rows(x.data(), h.data(), N * H);
    layer_norm(x.data(), L.ln2_w, L.ln2_b, t.layer_norm_eps, N, H, h.data());  // layer_norm2
    model::linear_forward(L.fc1, h.data(), N, H, f.data(), F, ctx);
    kernels::gelu(f.data(), f.data(), N * F);  // gelu_pytorch_tanh
    model::linear_forward(L.fc2, f.data(), N, F, h.data(), H, ctx);  // mlp output
    add_rows(x.data(), h.data(), N * H);
  }
  // Feature selection ("default" drops the first token), then the projector.
  const int64_t first = config_.keep_first_token ? 0 : 1, R = N - first;
  std::vector<float> p1(static_cast<size_t>(R * T)), out(static_cast<size_t>(R * T));
  model::linear_forward(w_->proj1, x.data() + first * H, R, H, p1.data(), T, ctx);  // linear_1
  for (float& e : p1) e = 0.5f * e * (1.0f + std::erf(e * 0.70710678118654752f));  // exact GELU
  model::linear_forward(w_->proj2, p1.data(), R, T, out.data(), T, ctx);  // linear_2
  return out;
}

}  // namespace deepinfer::vision
