// Pillow-exact image resizing (Image.resize with BICUBIC or BILINEAR, no reducing_gap): a
// separable convolution whose filter widens by the scale when shrinking (antialiasing), with
// Pillow's 22-bit fixed-point weights and rounding after each pass. The Hugging Face image
// processors resize through Pillow, so this is what makes our pixel values equal theirs.
#pragma once

#include "deepinfer/vision/image.h"

namespace deepinfer::vision {

enum class ResampleFilter { kBilinear = 2, kBicubic = 3 };

// `img` resized to width x height (both > 0). The horizontal pass runs first, as in Pillow;
// a pass whose size is unchanged is skipped (Pillow skips it too).
Image resize_image(const Image& img, int width, int height, ResampleFilter filter);

}  // namespace deepinfer::vision
