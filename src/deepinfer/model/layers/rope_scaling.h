// RoPE configuration in one place: the config's scaling (none, linear, llama3, yarn, as read
// from GGUF metadata or config.json) translated to the kernel's parameters, and the channel
// pairing to the kernel's layout. Every architecture goes through here, so a scaling type that
// one architecture accepts is accepted and translated the same way by all of them.
#pragma once

#include <string>
#include <string_view>

#include "deepinfer/base/status.h"
#include "deepinfer/kernels/cpu/rope.h"
#include "deepinfer/model/model_config.h"

namespace deepinfer::model {

// The scaling types rope_scaling_from_config() accepts (for error messages and docs).
inline constexpr std::string_view kSupportedRopeScalings = "none, linear, llama3, yarn";

// Kernel parameters of `rs`. An unknown type is an error naming `where` (the checkpoint) and
// `architecture`. original_max_position 0 (not given) keeps the kernel's default.
Result<kernels::RopeScaling> rope_scaling_from_config(const RopeScalingConfig& rs, const std::string& where,
                                                      std::string_view architecture);

kernels::RopeLayout rope_layout_of(RopePairing pairing);

}  // namespace deepinfer::model
