// Pillow's Resample.c arithmetic, rewritten: coefficients in double, normalized per output
// pixel, then rounded to fixed point with 22 fractional bits; sums start at half a unit and are
// clipped to 0..255 after each pass.
#include "deepinfer/vision/resize.h"

#include <cmath>
#include <vector>

namespace deepinfer::vision {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;

double bicubic(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

double triangle(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Per output pixel: the first input index, the tap count and ksize fixed-point weights.
struct Coeffs {
  int ksize = 0;
  std::vector<int> first, count;
  std::vector<int32_t> weights;  // [out_size * ksize]
};

Coeffs precompute(int in_size, int out_size, ResampleFilter filter) {
  const double support_base = filter == ResampleFilter::kBicubic ? 2.0 : 1.0;
  const double scale = static_cast<double>(in_size) / out_size;
  const double filter_scale = scale < 1.0 ? 1.0 : scale;
  const double support = support_base * filter_scale;
  Coeffs c;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(out_size);
  c.count.resize(out_size);
  c.weights.assign(static_cast<size_t>(out_size) * c.ksize, 0);
  std::vector<double> k(c.ksize);
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = (xx + 0.5) * scale;
    const double ss = 1.0 / filter_scale;
    int xmin = static_cast<int>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      const double arg = (x + xmin - center + 0.5) * ss;
      k[x] = filter == ResampleFilter::kBicubic ? bicubic(arg) : triangle(arg);
      ww += k[x];
    }
    for (int x = 0; x < xmax; ++x) {
      const double v = ww != 0.0 ? k[x] / ww : k[x];
      c.weights[static_cast<size_t>(xx) * c.ksize + x] =
          static_cast<int32_t>(v < 0 ? -0.5 + v * (1 << kPrecisionBits) : 0.5 + v * (1 << kPrecisionBits));
    }
    c.first[xx] = xmin;
    c.count[xx] = xmax;
  }
  return c;
}

uint8_t clip8(int64_t v) {
  if (v >= (int64_t{1} << kPrecisionBits << 8)) return 255;
  if (v <= 0) return 0;
  return static_cast<uint8_t>(v >> kPrecisionBits);
}

Image horizontal(const Image& in, int out_w, ResampleFilter filter) {
  const Coeffs c = precompute(in.width, out_w, filter);
  Image out{out_w, in.height, std::vector<uint8_t>(static_cast<size_t>(out_w) * in.height * 3)};
  for (int y = 0; y < in.height; ++y) {
    const uint8_t* row = in.rgb.data() + static_cast<size_t>(y) * in.width * 3;
    for (int xx = 0; xx < out_w; ++xx) {
      const int32_t* k = c.weights.data() + static_cast<size_t>(xx) * c.ksize;
      for (int ch = 0; ch < 3; ++ch) {
        int64_t ss = int64_t{1} << (kPrecisionBits - 1);
        for (int x = 0; x < c.count[xx]; ++x) ss += int64_t{row[(x + c.first[xx]) * 3 + ch]} * k[x];
        out.rgb[(static_cast<size_t>(y) * out_w + xx) * 3 + ch] = clip8(ss);
      }
    }
  }
  return out;
}

Image vertical(const Image& in, int out_h, ResampleFilter filter) {
  const Coeffs c = precompute(in.height, out_h, filter);
  Image out{in.width, out_h, std::vector<uint8_t>(static_cast<size_t>(in.width) * out_h * 3)};
  const size_t stride = static_cast<size_t>(in.width) * 3;
  for (int yy = 0; yy < out_h; ++yy) {
    const int32_t* k = c.weights.data() + static_cast<size_t>(yy) * c.ksize;
    for (size_t xc = 0; xc < stride; ++xc) {
      int64_t ss = int64_t{1} << (kPrecisionBits - 1);
      for (int y = 0; y < c.count[yy]; ++y) ss += int64_t{in.rgb[(y + c.first[yy]) * stride + xc]} * k[y];
      out.rgb[yy * stride + xc] = clip8(ss);
    }
  }
  return out;
}

}  // namespace

Image resize_image(const Image& img, int width, int height, ResampleFilter filter) {
  Image cur = img;
  if (width != cur.width) cur = horizontal(cur, width, filter);
  if (height != cur.height) cur = vertical(cur, height, filter);
  return cur;
}

}  // namespace deepinfer::vision
