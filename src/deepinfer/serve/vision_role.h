// `serve --role vision`: a vision-encoder pool member. It loads only a LLaVA-layout model's
// vision tower and projector and answers the internal protocol (docs/vision.md):
//   GET  /internal/v1/info   {role: "vision", protocol, model, image_token_id, tokens_per_image,
//                             embedding_size, identity}   (identity: the weights' content digest)
//   POST /internal/v1/encode  the image's bytes (JPEG / PNG / WebP) -> 200 application/octet-stream,
//                             tokens_per_image x embedding_size little-endian float32; a bad image
//                             is 400 {"error": "..."}
//   GET  /health, GET /metrics (images encoded, failures, encode time).
// LLM servers use it with `--vision-encoder URL` (remote_image_encoder.h), so several engines
// share one encoder.
#pragma once

#include <string>

#include "deepinfer/base/status.h"
#include "deepinfer/vision/image.h"

namespace deepinfer::serve {

struct VisionRoleOptions {
  std::string model;  // catalogue name or Hugging Face directory
  std::string host = "127.0.0.1";
  int port = 8000;
  int threads = 0;        // tower compute threads; 0 = one per core
  int http_threads = 8;
  vision::DecodeLimits limits;
};

// Serves until SIGINT or SIGTERM; an error if the model has no vision tower or the port is taken.
Status run_vision_role(const VisionRoleOptions& options);

}  // namespace deepinfer::serve
