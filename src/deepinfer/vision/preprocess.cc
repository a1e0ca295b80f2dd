// Pixel values as the Hugging Face image processors compute them: the resize goes through
// Pillow (resize.cc reproduces it bit for bit), rescale is float64 then float32 (numpy's
// astype), normalize is float32 (x - mean) / std.
#include "deepinfer/vision/preprocess.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace deepinfer::vision {

int ImageProcessorConfig::out_height() const {
  if (do_center_crop) return crop_height;
  return do_resize ? height : 0;
}
int ImageProcessorConfig::out_width() const {
  if (do_center_crop) return crop_width;
  return do_resize ? width : 0;
}

namespace {

Status parse(const nlohmann::json& j, ImageProcessorConfig& c, const std::string& path) {
  c.processor_type = j.value("image_processor_type", std::string());
  if (c.processor_type != "SiglipImageProcessor" && c.processor_type != "SiglipImageProcessorFast" &&
      c.processor_type != "CLIPImageProcessor" && c.processor_type != "CLIPImageProcessorFast")
    return unsupported("{}: image_processor_type '{}' is not supported (supported: SiglipImageProcessor, "
                       "CLIPImageProcessor)", path, c.processor_type);
  c.do_resize = j.value("do_resize", true);
  if (auto s = j.find("size"); s != j.end() && s->is_object()) {
    if (s->contains("shortest_edge")) {
      c.shortest_edge = s->at("shortest_edge").get<int>();
    } else {
      c.height = s->value("height", 224);
      c.width = s->value("width", 224);
    }
  }
  c.do_center_crop = j.value("do_center_crop", false);
  if (auto s = j.find("crop_size"); s != j.end() && s->is_object()) {
    c.crop_height = s->value("height", 0);
    c.crop_width = s->value("width", 0);
  }
  const int resample = j.value("resample", 3);
  if (resample != 2 && resample != 3)
    return unsupported("{}: resample {} is not supported (supported: 2 bilinear, 3 bicubic)", path, resample);
  c.resample = static_cast<ResampleFilter>(resample);
  c.do_rescale = j.value("do_rescale", true);
  c.rescale_factor = j.value("rescale_factor", 1.0 / 255.0);
  c.do_normalize = j.value("do_normalize", true);
  if (j.contains("image_mean")) {
    auto v = j.at("image_mean").get<std::vector<float>>();
    if (v.size() != 3) return corrupt("{}: image_mean must have 3 values", path);
    c.image_mean = {v[0], v[1], v[2]};
  }
  if (j.contains("image_std")) {
    auto v = j.at("image_std").get<std::vector<float>>();
    if (v.size() != 3) return corrupt("{}: image_std must have 3 values", path);
    c.image_std = {v[0], v[1], v[2]};
  }
  if (!c.do_resize || (c.shortest_edge == 0 && (c.height <= 0 || c.width <= 0)) || c.shortest_edge < 0)
    return unsupported("{}: the processor must resize to a fixed size (do_resize with size)", path);
  if (c.shortest_edge > 0 && (!c.do_center_crop || c.crop_height <= 0 || c.crop_width <= 0))
    return unsupported("{}: a shortest_edge resize needs a centre crop (crop_size)", path);
  return Status::ok();
}

}  // namespace

Result<ImageProcessorConfig> parse_image_processor_config(const std::string& json_text, const std::string& where) {
  ImageProcessorConfig c;
  try {
    const nlohmann::json j = nlohmann::json::parse(json_text);
    if (!j.is_object()) return corrupt("{}: expected a JSON object", where);
    DI_RETURN_IF_ERROR(parse(j, c, where));
  } catch (const nlohmann::json::exception& e) {
    return corrupt("{}: invalid image processor config: {}", where, e.what());
  }
  return c;
}

Result<ImageProcessorConfig> read_image_processor_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) return not_found("{}: cannot open the image processor config", path);
  std::stringstream text;
  text << in.rdbuf();
  return parse_image_processor_config(text.str(), path);
}

std::vector<float> preprocess_image(const Image& img, const ImageProcessorConfig& c) {
  Image cur;
  if (c.shortest_edge > 0) {
    // CLIP: the short side to shortest_edge, the long side scaled by int() (transformers'
    // get_resize_output_image_size with default_to_square=False), then a centre crop.
    const bool wide = img.width >= img.height;
    const int short_side = wide ? img.height : img.width, long_side = wide ? img.width : img.height;
    const int new_long = static_cast<int>(static_cast<int64_t>(c.shortest_edge) * long_side / short_side);
    cur = wide ? resize_image(img, new_long, c.shortest_edge, c.resample)
               : resize_image(img, c.shortest_edge, new_long, c.resample);
  } else {
    cur = resize_image(img, c.width, c.height, c.resample);
  }
  const int H = c.out_height(), W = c.out_width();
  const int top = c.do_center_crop ? (cur.height - H) / 2 : 0;
  const int left = c.do_center_crop ? (cur.width - W) / 2 : 0;
  std::vector<float> out(static_cast<size_t>(3) * H * W);
  for (int ch = 0; ch < 3; ++ch) {
    for (int y = 0; y < H; ++y) {
      for (int x = 0; x < W; ++x) {
        const int sy = y + top, sx = x + left;
        const bool inside = sy >= 0 && sy < cur.height && sx >= 0 && sx < cur.width;  // crop pads with 0
        const uint8_t v = inside ? cur.rgb[(static_cast<size_t>(sy) * cur.width + sx) * 3 + ch] : 0;
        float f = c.do_rescale ? static_cast<float>(static_cast<double>(v) * c.rescale_factor) : static_cast<float>(v);
        if (c.do_normalize) f = (f - c.image_mean[ch]) / c.image_std[ch];
        out[(static_cast<size_t>(ch) * H + y) * W + x] = f;
      }
    }
  }
  return out;
}

}  // namespace deepinfer::vision
