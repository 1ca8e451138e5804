// Resizing to fit a maximum side, keeping the aspect ratio.
//
// The filter is PIL's Image.BILINEAR as Image.resize applies it (Pillow's
// Resample.c, the algorithm re-implemented here): separable, a triangle kernel
// f(x) = max(0, 1 - |x|) whose support is stretched by the downscale factor
// (so a downscale averages every input pixel under an output pixel: it
// antialiases), weights normalized to sum 1 and rounded to 22-bit fixed
// point, horizontal pass first into 8-bit pixels, then the vertical pass, each
// output rounded and clamped to 0..255. PIL gives the same bytes, up to the
// last bit of the double arithmetic (at most 1 in a channel).
#pragma once

#include "image/decode.hpp"

namespace meshloom::image {

// The size that fits in max_side x max_side: unchanged when it already fits
// (never upscaled); otherwise the long side becomes max_side and the short one
// round(short * max_side / long), at least 1.
ImageSize fit_size(ImageSize size, int max_side);

// Resamples to `size` with the filter above. Either side may shrink or grow.
RgbImage resize_bilinear(const RgbImage& in, ImageSize size);

}  // namespace meshloom::image
