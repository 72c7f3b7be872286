// The im2col / col2im kernels of the GPU convolution (conv_pool.cu) and transposed convolution
// (deconvolution.cu), over the geometry both share with the CPU (engine/src/ops/conv_geometry.h):
// `in` is the image side (g.in_c channels, g.in_sp positions), `out` the column side. A chunk of
// `images` images lies side by side in the columns: col is (g.in_c * g.k_sp, images * g.out_sp),
// and chunks bound that scratch (chunk_images).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernel_util.cuh"
#include "ops/conv_geometry.h"

namespace pymx {
namespace gpu {

using nn::ConvGeometry;

constexpr size_t kWorkspaceBudget = size_t(512) << 20;  // bytes of im2col scratch per op

// Images per chunk so that `per_image` bytes of scratch each stay within the budget.
inline int64_t chunk_images(int64_t batch, size_t per_image) {
  return std::max<int64_t>(
      1, std::min<int64_t>(batch, kWorkspaceBudget / std::max<size_t>(per_image, 1)));
}

// col[row][b * out_sp + o] = y[b][c][position read by (row, o)] (0 in the padding), for
// row = c * k_sp + kernel offset, over `images` images of y (channels g.in_c, extents g.in).
template <typename T>
__global__ void im2col_kernel(const T* y, T* col, ConvGeometry g, int64_t images) {
  const int64_t width = images * g.out_sp;
  PMX_GRID_STRIDE_LOOP(e, g.in_c * g.k_sp * width) {
    const int64_t row = e / width, column = e % width;
    const int64_t b = column / g.out_sp, o = column % g.out_sp;
    const int64_t c = row / g.k_sp, kk = row % g.k_sp;
    const int64_t kx = kk % g.k[2], ky = (kk / g.k[2]) % g.k[1], kz = kk / (g.k[2] * g.k[1]);
    const int64_t ox = o % g.out[2], oy = (o / g.out[2]) % g.out[1], oz = o / (g.out[2] * g.out[1]);
    const int64_t iz = oz * g.s[0] - g.p[0] + kz * g.d[0];
    const int64_t iy = oy * g.s[1] - g.p[1] + ky * g.d[1];
    const int64_t ix = ox * g.s[2] - g.p[2] + kx * g.d[2];
    const bool inside =
        iz >= 0 && iz < g.in[0] && iy >= 0 && iy < g.in[1] && ix >= 0 && ix < g.in[2];
    col[e] = inside ? y[(b * g.in_c + c) * g.in_sp + (iz * g.in[1] + iy) * g.in[2] + ix]
                    : convert<T>(0.0f);
  }
}

// y[b][c][i] = sum of the col entries whose (row, column) reads position i, plus bias[c] (bias
// may be null): the adjoint of im2col_kernel, one thread per element of y, no atomics.
template <typename T>
__global__ void col2im_kernel(const T* col, const T* bias, T* y, ConvGeometry g, int64_t images) {
  using A = AccT<T>;
  const int64_t width = images * g.out_sp;
  PMX_GRID_STRIDE_LOOP(e, images * g.in_c * g.in_sp) {
    const int64_t i = e % g.in_sp, c = (e / g.in_sp) % g.in_c, b = e / (g.in_sp * g.in_c);
    const int64_t ix = i % g.in[2], iy = (i / g.in[2]) % g.in[1], iz = i / (g.in[2] * g.in[1]);
    A acc = bias ? convert<A>(bias[c]) : A(0);
    for (int64_t kz = 0; kz < g.k[0]; ++kz) {
      const int64_t tz = iz + g.p[0] - kz * g.d[0];
      if (tz < 0 || tz % g.s[0] != 0 || tz / g.s[0] >= g.out[0]) continue;
      for (int64_t ky = 0; ky < g.k[1]; ++ky) {
        const int64_t ty = iy + g.p[1] - ky * g.d[1];
        if (ty < 0 || ty % g.s[1] != 0 || ty / g.s[1] >= g.out[1]) continue;
        for (int64_t kx = 0; kx < g.k[2]; ++kx) {
          const int64_t tx = ix + g.p[2] - kx * g.d[2];
          if (tx < 0 || tx % g.s[2] != 0 || tx / g.s[2] >= g.out[2]) continue;
          const int64_t row = c * g.k_sp + (kz * g.k[1] + ky) * g.k[2] + kx;
          const int64_t o = ((tz / g.s[0]) * g.out[1] + ty / g.s[1]) * g.out[2] + tx / g.s[2];
          acc += convert<A>(col[row * width + b * g.out_sp + o]);
        }
      }
    }
    y[e] = convert<T>(acc);
  }
}

}  // namespace gpu
}  // namespace pymx
