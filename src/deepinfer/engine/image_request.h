// Images of a chat prompt into a GenerationRequest, for every surface (HTTP, generate's JSONL):
// once the chat template has placed one placeholder per image, expands the placeholders and
// encodes the images (vision::ImageService, cached), filling request.images.
#pragma once

#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/engine/request.h"
#include "deepinfer/vision/image_service.h"

namespace deepinfer::engine {

// `images`: the encoded bytes of each image, in the order the template places them. Errors
// (invalid argument, naming the image by its 1-based number): too many images, a template that
// did not place every image, an image that does not decode.
Status add_prompt_images(vision::ImageService& service, const std::vector<const std::string*>& images,
                         GenerationRequest& request);

}  // namespace deepinfer::engine
