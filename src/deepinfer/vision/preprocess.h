// The Hugging Face image processors of the SigLIP and CLIP families (their PIL-based "slow"
// implementation), read from a model's preprocessor_config.json: convert to RGB, resize (SigLIP:
// to a fixed height x width; CLIP: shortest edge then centre crop), rescale, normalize, and lay
// out channels first. The result is what `pixel_values` holds for one image.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/vision/image.h"
#include "deepinfer/vision/resize.h"

namespace deepinfer::vision {

struct ImageProcessorConfig {
  std::string processor_type;  // "SiglipImageProcessor", "CLIPImageProcessor"
  bool do_resize = true;
  int height = 224, width = 224;  // size {"height","width"} (SigLIP)
  int shortest_edge = 0;          // size {"shortest_edge"} (CLIP); 0 = fixed height x width
  bool do_center_crop = false;
  int crop_height = 0, crop_width = 0;
  ResampleFilter resample = ResampleFilter::kBicubic;
  bool do_rescale = true;
  double rescale_factor = 1.0 / 255.0;
  bool do_normalize = true;
  std::array<float, 3> image_mean{0.5f, 0.5f, 0.5f};
  std::array<float, 3> image_std{0.5f, 0.5f, 0.5f};

  // Height and width of the processed image.
  int out_height() const;
  int out_width() const;
};

// Reads `path` (a preprocessor_config.json). Processors other than the SigLIP / CLIP image
// processors, and resample filters other than bilinear / bicubic, are refused naming them.
Result<ImageProcessorConfig> read_image_processor_config(const std::string& path);
// The same from JSON text; `where` names it in errors.
Result<ImageProcessorConfig> parse_image_processor_config(const std::string& json_text, const std::string& where);

// One image's pixel values, [3, out_height, out_width] float32, channels first.
std::vector<float> preprocess_image(const Image& img, const ImageProcessorConfig& config);

}  // namespace deepinfer::vision
