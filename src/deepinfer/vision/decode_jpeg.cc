// JPEG through libjpeg-turbo with its default (accurate integer) IDCT and fancy upsampling,
// the settings Pillow decodes with. libjpeg's fatal errors longjmp back here; its warnings
// (a truncated file is one: libjpeg pads it with grey) are treated as errors too.
#include <csetjmp>
#include <cstdio>

#include <jpeglib.h>

#include "deepinfer/vision/image.h"

namespace deepinfer::vision {
namespace {

struct ErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = {};
  bool warned = false;
};

void on_error(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

void on_message(j_common_ptr cinfo, int level) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  if (level < 0 && !err->warned) {  // a warning: corrupt or truncated data
    err->warned = true;
    (*cinfo->err->format_message)(cinfo, err->message);
  }
}

}  // namespace

Result<Image> decode_jpeg(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  jpeg_decompress_struct cinfo{};
  ErrorManager err;
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = on_error;
  err.pub.emit_message = on_message;
  Image img;
  Status status;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return corrupt("JPEG image is corrupt: {}", err.message);
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  status = check_dimensions("JPEG", cinfo.image_width, cinfo.image_height, limits);
  if (status.is_ok() && cinfo.jpeg_color_space != JCS_GRAYSCALE && cinfo.jpeg_color_space != JCS_YCbCr &&
      cinfo.jpeg_color_space != JCS_RGB)
    status = unsupported("JPEG image has an unsupported colour space (CMYK/YCCK; supported: RGB, YCbCr, grey)");
  if (!status.is_ok()) {
    jpeg_destroy_decompress(&cinfo);
    return status;
  }
  cinfo.out_color_space = JCS_RGB;
  jpeg_start_decompress(&cinfo);
  img.width = static_cast<int>(cinfo.output_width);
  img.height = static_cast<int>(cinfo.output_height);
  img.rgb.resize(static_cast<size_t>(img.width) * img.height * 3);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = img.rgb.data() + static_cast<size_t>(cinfo.output_scanline) * img.width * 3;
    jpeg_read_scanlines(&cinfo, &row, 1);
    if (err.warned) break;
  }
  if (!err.warned) jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  if (err.warned) return corrupt("JPEG image is truncated or corrupt: {}", err.message);
  return img;
}

}  // namespace deepinfer::vision
