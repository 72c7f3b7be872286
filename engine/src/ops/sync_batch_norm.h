// Cross-device batch normalisation (_contrib_SyncBatchNorm): the rendezvous of the devices of
// one step and the per-channel maths, shared by the CPU kernels (nn_sync_batch_norm.cc) and the
// GPU kernels (cuda/src/sync_batch_norm.cu). See Note [Cross-device batch statistics].
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "pymx/op.h"

namespace pymx {
namespace nn {

// Data of shape (outer, channels, inner...) normalised per channel (axis 1).
struct SyncBnView {
  int64_t outer = 1, channels = 1, inner = 1;
  // constexpr: device code calls it too (nvcc --expt-relaxed-constexpr).
  constexpr int64_t count() const { return outer * inner; }  // elements per channel
};
SyncBnView sync_bn_view(const Shape& data_shape);

// The attributes both ops read.
struct SyncBnAttrs {
  double eps = 1e-3;
  double momentum = 0.9;
  bool fix_gamma = true;
  bool use_global_stats = false;
  int64_t ndev = 1;
  std::string key;
};
SyncBnAttrs sync_bn_attrs(const Attrs& attrs);

// Throws when the op cannot meet its other devices: ndev > 1 under the naive engine.
void sync_bn_check_engine(const SyncBnAttrs& attrs);

// One device's part of a round: two numbers per channel, laid out [a(0..C-1), b(0..C-1)], over
// `count` elements per channel. Forward (moments = true): the local mean and M2 (the sum of
// squared deviations from it), which the rendezvous combines exactly (Chan et al.'s parallel
// update), avoiding the cancellation of sum x^2 - n mean^2. Backward: sum dy and sum dy * x_hat,
// which add up. `finish` gets the combination over every device of the round and the total
// count; it runs once, on the thread of the round's last arrival, and must end by calling
// `complete` (if it throws, the rendezvous calls complete with the error). When the round fails,
// `complete` is called with the error instead of `finish`.
struct SyncBnArrival {
  Device device;
  bool moments = false;
  std::vector<double> sums;
  int64_t count = 0;
  std::function<void(const std::vector<double>& total, int64_t total_count)> finish;
  OnComplete complete;
};

// Called when a device pushes an op of `key` (OpDef::on_push), before it runs: tracks the devices
// of the current step. A device that comes again before num_devices distinct ones came fails
// the step: its ops (arrived or still to arrive) complete with an error naming num_devices and
// the devices, and this call throws it. Thread-safe. Never blocks.
void sync_bn_on_push(const std::string& key, int64_t num_devices, Device device);

// Adds `arrival` to the open round of `key` (one per layer and direction). The round completes
// when `num_devices` arrivals from distinct devices are in: the last arrival runs every finish.
// A round fails, with an error naming the values, when a device arrives twice, or the channel
// counts or num_devices differ. Thread-safe. Never blocks on other devices.
void sync_bn_arrive(const std::string& key, int64_t num_devices, SyncBnArrival arrival);

}  // namespace nn
}  // namespace pymx
