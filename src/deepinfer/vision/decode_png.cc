// PNG through libpng's progressive-free reader: palette, grey and sub-8-bit samples expand to
// 8-bit RGB(A), 16-bit samples keep their high byte (Pillow's behaviour), and any alpha is
// composited onto white. libpng's errors longjmp back here.
#include <csetjmp>
#include <cstring>

#include <png.h>

#include "deepinfer/vision/image.h"

namespace deepinfer::vision {
namespace {

struct Reader {
  std::span<const uint8_t> bytes;
  size_t pos = 0;
  char message[256] = {};
};

void read_bytes(png_structp png, png_bytep out, png_size_t n) {
  auto* r = static_cast<Reader*>(png_get_io_ptr(png));
  if (r->bytes.size() - r->pos < n) png_error(png, "unexpected end of data (the file is truncated)");
  std::memcpy(out, r->bytes.data() + r->pos, n);
  r->pos += n;
}

void on_error(png_structp png, png_const_charp msg) {
  auto* r = static_cast<Reader*>(png_get_error_ptr(png));
  std::snprintf(r->message, sizeof(r->message), "%s", msg);
  png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}

}  // namespace

Result<Image> decode_png(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  Reader reader{bytes};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &reader, on_error, on_warning);
  if (png == nullptr) return corrupt("PNG decoder could not start");
  png_infop info = png_create_info_struct(png);
  Image img;
  std::vector<uint8_t> rgba;
  std::vector<png_bytep> rows;
  Status status;
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return corrupt("PNG image is corrupt: {}", reader.message);
  }
  png_set_read_fn(png, &reader, read_bytes);
  png_set_user_limits(png, static_cast<png_uint_32>(limits.max_side), static_cast<png_uint_32>(limits.max_side));
  png_read_info(png, info);
  const int64_t w = png_get_image_width(png, info), h = png_get_image_height(png, info);
  status = check_dimensions("PNG", w, h, limits);
  if (!status.is_ok()) {
    png_destroy_read_struct(&png, &info, nullptr);
    return status;
  }
  png_set_expand(png);  // palette -> RGB, grey < 8 bits -> 8 bits, tRNS -> alpha
  png_set_strip_16(png);
  png_set_gray_to_rgb(png);
  png_set_add_alpha(png, 0xFF, PNG_FILLER_AFTER);  // always RGBA, opaque where there was no alpha
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  img.width = static_cast<int>(w);
  img.height = static_cast<int>(h);
  rgba.resize(static_cast<size_t>(w * h * 4));
  rows.resize(static_cast<size_t>(h));
  for (int64_t y = 0; y < h; ++y) rows[y] = rgba.data() + y * w * 4;
  png_read_image(png, rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  img.rgb.resize(static_cast<size_t>(w * h * 3));
  composite_on_white(rgba.data(), w * h, img.rgb.data());
  return img;
}

}  // namespace deepinfer::vision
