// RopeScalingConfig -> kernels::RopeScaling.
#include "deepinfer/model/layers/rope_scaling.h"

namespace deepinfer::model {

Result<kernels::RopeScaling> rope_scaling_from_config(const RopeScalingConfig& rs, const std::string& where,
                                                      std::string_view architecture) {
  kernels::RopeScaling s;
  if (rs.type == "none") {
    s.type = kernels::RopeScalingType::kNone;
  } else if (rs.type == "linear") {
    s.type = kernels::RopeScalingType::kLinear;
  } else if (rs.type == "llama3") {
    s.type = kernels::RopeScalingType::kLlama3;
  } else if (rs.type == "yarn") {
    s.type = kernels::RopeScalingType::kYarn;
  } else {
    return unsupported("{}: unsupported RoPE scaling type '{}' for {} (supported: {})", where, rs.type,
                       architecture, kSupportedRopeScalings);
  }
  s.factor = rs.factor;
  s.low_freq_factor = rs.low_freq_factor;
  s.high_freq_factor = rs.high_freq_factor;
  if (rs.original_max_position > 0) s.original_max_pos = rs.original_max_position;
  s.beta_fast = rs.beta_fast;
  s.beta_slow = rs.beta_slow;
  s.mscale = rs.mscale;
  s.mscale_all_dim = rs.mscale_all_dim;
  s.attention_factor = rs.attention_factor;
  return s;
}

kernels::RopeLayout rope_layout_of(RopePairing pairing) {
  return pairing == RopePairing::kInterleaved ? kernels::RopeLayout::kInterleaved : kernels::RopeLayout::kHalf;
}

}  // namespace deepinfer::model
