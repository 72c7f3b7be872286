// The GPU kernel of stop_gradient (engine/src/ops/stop_gradient.cc): a device-to-device copy.
#include "launch.h"

namespace pymx {
namespace gpu {
namespace {

void stop_gradient_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                           const std::vector<TBlob>& out) {
  cast_blob(in[0], out[0], ctx.run.stream);  // same dtype: a device-to-device memcpy
}

const bool registered =
    op_registry::get_or_create("stop_gradient").set_gpu(stop_gradient_compute).compute_gpu !=
    nullptr;

}  // namespace
}  // namespace gpu
}  // namespace pymx
