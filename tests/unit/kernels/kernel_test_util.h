// Helpers for comparing kernel variants against their scalar references.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "deepinfer/base/cpu_features.h"

namespace deepinfer::kernels::testing {

// The SIMD levels this machine can run (scalar is the reference itself).
inline std::vector<IsaLevel> simd_levels() {
  std::vector<IsaLevel> v;
  if (cpu_features().has_avx2()) v.push_back(IsaLevel::kAvx2);
  if (cpu_features().has_avx512()) v.push_back(IsaLevel::kAvx512);
  return v;
}

inline std::vector<float> random_vec(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Largest |a-b| relative to the largest |ref| (normalized error, as llama.cpp's NMSE-style checks).
inline double max_norm_err(const float* got, const float* ref, size_t n) {
  double scale = 1e-30, err = 0;
  for (size_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(static_cast<double>(ref[i])));
  for (size_t i = 0; i < n; ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - ref[i]);
    if (std::isnan(got[i]) != std::isnan(ref[i])) return INFINITY;
    err = std::max(err, d);
  }
  return err / scale;
}

// Largest per-element relative error with an absolute floor.
inline double max_rel_err(const float* got, const float* ref, size_t n, double floor = 1e-6) {
  double err = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(got[i]) || std::isnan(ref[i])) return INFINITY;
    err = std::max(err, std::fabs(static_cast<double>(got[i]) - ref[i]) / std::max(floor, std::fabs(static_cast<double>(ref[i]))));
  }
  return err;
}

}  // namespace deepinfer::kernels::testing
