// multi_all_finite on the GPU (definition: engine/src/ops/all_finite.cc). The output starts
// true; each launch checks up to kArraysPerLaunch inputs of one dtype (blockIdx.y picks the
// array, its blocks stride over the elements), and a thread that meets an inf or NaN stores
// false. Those stores race, but all write the same byte, so any order gives the same result.
#include <algorithm>

#include "kernel_util.cuh"

namespace pymx {
namespace gpu {
namespace {

constexpr int kArraysPerLaunch = 32;

// The arrays of one launch, passed by value: well under the 4 KiB of kernel parameters.
template <typename T>
struct ArrayTable {
  const T* data[kArraysPerLaunch];
  int64_t n[kArraysPerLaunch];
};

template <typename T>
__global__ void all_finite_kernel(ArrayTable<T> table, bool* out) {
  const T* x = table.data[blockIdx.y];
  PMX_GRID_STRIDE_LOOP(i, table.n[blockIdx.y]) {
    if (!isfinite(convert<AccT<T>>(x[i]))) *out = false;
  }
}

// Inputs [first, last), all of float dtype T, in one launch per kArraysPerLaunch.
template <typename T>
void launch(const OpContext& ctx, const std::vector<TBlob>& in, size_t first, size_t last,
            bool* out) {
  for (size_t begin = first; begin < last; begin += kArraysPerLaunch) {
    const int count = static_cast<int>(std::min<size_t>(kArraysPerLaunch, last - begin));
    ArrayTable<T> table{};
    int64_t largest = 0;
    for (int k = 0; k < count; ++k) {
      table.data[k] = in[begin + k].data<T>();
      table.n[k] = in[begin + k].size();
      largest = std::max(largest, table.n[k]);
    }
    if (largest == 0) continue;
    all_finite_kernel<T><<<dim3(grid_for(largest), count), kBlock, 0, stream_of(ctx)>>>(table,
                                                                                      out);
    PMX_KERNEL_LAUNCH_CHECK();
  }
}

void all_finite_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                        const std::vector<TBlob>& out) {
  bool* result = out[0].data<bool>();
  PMX_CUDA_CHECK(cudaMemsetAsync(result, 1, sizeof(bool), stream_of(ctx)));  // true
  // Runs of inputs of one dtype share launches; integers and bools are always finite.
  for (size_t first = 0; first < in.size();) {
    const DType dtype = in[first].dtype;
    size_t last = first + 1;
    while (last < in.size() && in[last].dtype == dtype) ++last;
    if (is_float(dtype))
      PMX_GPU_FLOAT_SWITCH(dtype, T, { launch<T>(ctx, in, first, last, result); });
    first = last;
  }
}

const bool registered = [] {
  op_registry::get_or_create("multi_all_finite").set_gpu(all_finite_compute);
  return true;
}();

}  // namespace
}  // namespace gpu
}  // namespace pymx
