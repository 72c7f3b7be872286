// Host code shared by the image operators' CPU kernels (image.cc) and GPU kernels
// (cuda/src/image.cu), which must agree on it bit for bit: the HWC geometry, the parsing of the
// per-channel mean/std attributes and resize's source taps. Plain C++; Hwc and Tap are trivially
// copyable so that GPU kernels take them by value or from device memory.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "pymx/op.h"

namespace pymx {
namespace image {

// (batch, height, width, channels) of an HWC image or NHWC batch.
struct Hwc {
  bool batched;
  int64_t n, h, w, c;
};

inline Hwc hwc_of(const Shape& s, const char* op) {
  PMX_CHECK(s.size() == 3 || s.size() == 4, op, ": expected an HWC image or NHWC batch, got shape ",
            shape_str(s));
  if (s.size() == 3) return {false, 1, s[0], s[1], s[2]};
  return {true, s[0], s[1], s[2], s[3]};
}

inline Shape hwc_shape(const Hwc& g, int64_t h, int64_t w) {
  if (g.batched) return {g.n, h, w, g.c};
  return {h, w, g.c};
}

// Per-channel values of a mean/std attribute: one value (all channels) or exactly `channels`.
inline std::vector<double> per_channel(const Attrs& attrs, const char* key, double fallback,
                                       int64_t channels) {
  std::vector<double> values;
  const std::string text = attrs.get_str(key, "None");
  if (text == "None") return std::vector<double>(channels, fallback);
  // Tuples of floats: "(0.485, 0.456, 0.406)", "[0.5]" or "0.5".
  std::string cleaned;
  for (char ch : text) cleaned += (ch == '(' || ch == ')' || ch == '[' || ch == ']' || ch == ',') ? ' ' : ch;
  std::istringstream is(cleaned);
  double v;
  while (is >> v) values.push_back(v);
  PMX_CHECK(is.eof(), "image_normalize: cannot parse ", key, "='", text, "' as numbers");
  if (values.size() == 1) return std::vector<double>(channels, values[0]);
  PMX_CHECK(static_cast<int64_t>(values.size()) == channels, "image_normalize: ", key, " has ",
            values.size(), " values but the image has ", channels, " channels");
  return values;
}

// Source indices and the weight of the second one, for one destination index of a resize.
struct Tap {
  int64_t i0, i1;
  float frac;
};

// taps[0, out) for resizing `in` elements to `out`: INTER_NEAREST, floor(d * in / out), or
// OpenCV's INTER_LINEAR, source coordinate (d + 0.5) * in / out - 0.5 clamped at the borders.
inline void resize_taps(int64_t in, int64_t out, bool nearest, Tap* taps) {
  if (nearest) {
    for (int64_t d = 0; d < out; ++d) {
      const int64_t i =
          std::min(static_cast<int64_t>(std::floor(d * static_cast<double>(in) / out)), in - 1);
      taps[d] = {i, i, 0.f};
    }
    return;
  }
  const double scale = static_cast<double>(in) / out;
  for (int64_t d = 0; d < out; ++d) {
    const double src = (d + 0.5) * scale - 0.5;
    int64_t i0 = static_cast<int64_t>(std::floor(src));
    float frac = static_cast<float>(src - i0);
    if (i0 < 0) {
      i0 = 0;
      frac = 0;
    }
    if (i0 >= in - 1) {
      i0 = in - 1;
      frac = 0;
    }
    taps[d] = {i0, std::min(i0 + 1, in - 1), frac};
  }
}

}  // namespace image
}  // namespace pymx
