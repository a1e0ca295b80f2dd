// `deepinfer bench --mode vision`: images/s through a multimodal model's vision encoder (decode,
// preprocess, tower, projector) and what an image adds to time to first token, cold and with
// the embedding cache and the prefix cache warm.
#pragma once

#include <string>

#include "deepinfer/tools/cli_common.h"

namespace deepinfer::tools {

struct VisionBenchOptions {
  EngineFlags engine;
  std::string image;  // a JPEG, PNG or WebP file
  int repeat = 3;     // TTFT measurements per phase; the encode row runs 4x as many images
};

// Prints one JSON line per phase (encode, then text_only / image_cold / image_embedding_cached /
// image_prefix_cached TTFTs) and a summary; returns the exit status.
int run_vision_bench(const VisionBenchOptions& opts);

}  // namespace deepinfer::tools
