// Cross-device batch normalisation (MXNet's _contrib_SyncBatchNorm): batch normalisation over
// axis 1 whose training statistics are those of the batches of all `ndev` devices of a step.
//
// | op                              | inputs                                     | outputs                          | attrs |
// |---------------------------------|--------------------------------------------|----------------------------------|-------|
// | _contrib_SyncBatchNorm          | data, gamma, beta, moving_mean, moving_var | out, mean, var                   | eps momentum fix_gamma use_global_stats ndev key |
// | _contrib_SyncBatchNorm_backward | out_grad, data, gamma, mean, var           | data_grad, gamma_grad, beta_grad | same as forward |
//
// Defaults are MXNet's (eps 1e-3, momentum 0.9, fix_gamma True, ndev 1). In training (and not
// use_global_stats) out = (x - mean_c) / sqrt(var_c + eps) * gamma_c + beta_c with mean and biased
// variance over the batches of every device that calls the op with the same `key` in a step,
// and every device updates its moving statistics in place with them (mutate_inputs {3, 4}), so
// the copies stay identical. Otherwise it is batch_norm with the moving statistics. The backward
// gives data_grad over the whole batch; gamma_grad and beta_grad are this device's sums, so their
// sum over the devices (what the Trainer's kvstore adds up) is the gradient of the whole batch.
// Data and parameters are float32 or float64, of one dtype.
//
// Note [Cross-device batch statistics]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Data-parallel training runs the network once per device, one after another, from one Python
// thread. Device 0's output needs the statistics of device 1, whose call comes later, and the
// ops that read device 0's output are pushed before that call. A barrier in the Python call
// would deadlock at once; a barrier inside the kernel (MXNet's design) blocks an engine worker of
// each device until all arrive, and with one worker per device (pymx's default) a step's other
// work queued behind it (the Trainer's copies, the next split_and_load) can be what another
// device's statistics wait for. So both ops complete later (OpDef::completes_later): each
// device's kernel computes its local per-channel moments and hands them, with a `finish`
// closure over its own blobs, to a rendezvous keyed by the layer, then returns, freeing its
// worker. The kernel of the last device to arrive combines the moments and runs every device's
// finish (normalise, update the moving statistics, complete the op), so no worker ever waits and
// the engine's push order is kept: the consumers of each output wait on its var as usual. The
// backward does the same with sum dy and sum dy * x_hat. The naive engine runs each op at push
// and waits for it, so with ndev > 1 it would wait for a call that cannot come: the kernel
// refuses it with an error instead. A device that comes twice in one step would wait for its own
// earlier op (both write the moving statistics), which waits for devices that do not come, so
// the check is made at push (OpDef::on_push), on the calling thread, imperative or in a graph
// replay: the call raises, and the ops of the step fail, naming num_devices and the devices.
// A step that stops short (fewer devices, then a wait on an output) is not detectable and
// waits, as in MXNet.
#include "ops/sync_batch_norm.h"

#include <algorithm>
#include <exception>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "config.h"
#include "ops/nn_common.h"
#include "parallel.h"
#include "pymx/autograd.h"

namespace pymx {
namespace nn {

SyncBnView sync_bn_view(const Shape& s) {
  SyncBnView v;
  v.outer = s[0];
  v.channels = s[1];
  for (size_t i = 2; i < s.size(); ++i) v.inner *= s[i];
  return v;
}

SyncBnAttrs sync_bn_attrs(const Attrs& attrs) {
  SyncBnAttrs a;
  a.eps = attrs.get_float("eps", 1e-3);
  a.momentum = attrs.get_float("momentum", 0.9);
  a.fix_gamma = attrs.get_bool("fix_gamma", true);
  a.use_global_stats = attrs.get_bool("use_global_stats", false);
  a.ndev = attrs.get_int("ndev", 1);
  a.key = attrs.get_str("key", "");
  PMX_CHECK(a.ndev >= 1, "_contrib_SyncBatchNorm: ndev must be >= 1, got ", a.ndev);
  PMX_CHECK(a.eps > 0, "_contrib_SyncBatchNorm: eps must be > 0, got ", a.eps);
  return a;
}

void sync_bn_check_engine(const SyncBnAttrs& a) {
  // See Note [Cross-device batch statistics].
  PMX_CHECK(a.ndev == 1 || config().engine != "naive", "_contrib_SyncBatchNorm: ndev=", a.ndev,
            " needs the threaded engine: the naive engine (PYMX_ENGINE=naive) runs each device's "
            "op at push and would wait forever for the other devices' calls");
}

namespace {

struct Round {
  int64_t num_devices = 0;
  std::vector<SyncBnArrival> arrivals;
};

std::mutex g_rounds_mu;
std::unordered_map<std::string, Round> g_rounds;  // guarded by g_rounds_mu
// Per key: the devices that pushed an op of the current step (push order), and the devices whose
// next arrival belongs to a step that failed at push (sync_bn_on_push) with its message.
struct Doomed {
  std::vector<Device> devices;
  std::string message;
};
std::unordered_map<std::string, std::vector<Device>> g_pushes;  // guarded by g_rounds_mu
std::unordered_map<std::string, Doomed> g_doomed;               // guarded by g_rounds_mu

std::string device_list(const std::vector<Device>& devices) {
  std::string text;
  for (const Device& d : devices) text += (text.empty() ? "" : ", ") + d.str();
  return "[" + text + "]";
}

std::string device_list(const std::vector<SyncBnArrival>& arrivals) {
  std::vector<Device> devices;
  for (const SyncBnArrival& a : arrivals) devices.push_back(a.device);
  return device_list(devices);
}

// Adds up the arrivals' parts. Moments combine by Chan et al.'s parallel update:
// n = n_a + n_b, mean = mean_a + (mean_b - mean_a) n_b / n, M2 = M2_a + M2_b + delta^2 n_a n_b / n.
std::vector<double> combine(const std::vector<SyncBnArrival>& arrivals, int64_t* total_count) {
  const size_t channels = arrivals[0].sums.size() / 2;
  std::vector<double> total(arrivals[0].sums.size(), 0.0);
  int64_t n = 0;
  for (const SyncBnArrival& a : arrivals) {
    if (a.moments) {
      if (a.count == 0) continue;
      const double n_a = static_cast<double>(n), n_b = static_cast<double>(a.count);
      const double n_ab = n_a + n_b;
      for (size_t c = 0; c < channels; ++c) {
        const double delta = a.sums[c] - total[c];
        total[c] += delta * n_b / n_ab;
        total[channels + c] += a.sums[channels + c] + delta * delta * n_a * n_b / n_ab;
      }
    } else {
      for (size_t i = 0; i < total.size(); ++i) total[i] += a.sums[i];
    }
    n += a.count;
  }
  *total_count = n;
  return total;
}

}  // namespace

void sync_bn_on_push(const std::string& key, int64_t num_devices, Device device) {
  std::vector<SyncBnArrival> failed;
  std::string problem;
  {  // lock scope
    std::lock_guard<std::mutex> lock(g_rounds_mu);
    std::vector<Device>& pushed = g_pushes[key];
    if (std::find(pushed.begin(), pushed.end(), device) == pushed.end()) {
      pushed.push_back(device);  // STATE CHANGE
      if (static_cast<int64_t>(pushed.size()) == num_devices) pushed.clear();  // STATE CHANGE
      return;
    }
    problem = str_cat("SyncBatchNorm (key '", key, "') has num_devices=", num_devices,
                      " but only ", pushed.size(), " device(s) ", device_list(pushed),
                      " ran it before ", device.str(), " came again: each step must run it on "
                      "exactly ", num_devices, " distinct devices (set num_devices to the number "
                      "of devices of the step)");
    // invariant: the ops of the failed step fail, whether they arrived already or arrive later
    Doomed& doomed = g_doomed[key];
    doomed.message = problem;
    auto round = g_rounds.find(key);
    std::vector<Device> arrived;
    if (round != g_rounds.end()) {
      failed = std::move(round->second.arrivals);
      g_rounds.erase(round);  // STATE CHANGE
    }
    for (const Device& d : pushed) {
      bool has_arrived = false;
      for (const SyncBnArrival& a : failed) has_arrived = has_arrived || a.device == d;
      if (!has_arrived) doomed.devices.push_back(d);  // STATE CHANGE
    }
    if (doomed.devices.empty()) g_doomed.erase(key);
    pushed.clear();  // STATE CHANGE
  }
  const std::exception_ptr error = std::make_exception_ptr(Error(Status::kInvalidArg, problem));
  for (SyncBnArrival& a : failed) a.complete(error);
  std::rethrow_exception(error);
}

void sync_bn_arrive(const std::string& key, int64_t num_devices, SyncBnArrival arrival) {
  std::vector<SyncBnArrival> ready;
  std::string problem;
  {  // lock scope
    std::lock_guard<std::mutex> lock(g_rounds_mu);
    auto doomed = g_doomed.find(key);
    if (doomed != g_doomed.end()) {
      std::vector<Device>& devices = doomed->second.devices;
      auto it = std::find(devices.begin(), devices.end(), arrival.device);
      if (it != devices.end()) {
        problem = doomed->second.message;
        devices.erase(it);  // STATE CHANGE
        if (devices.empty()) g_doomed.erase(doomed);
        ready.push_back(std::move(arrival));
      }
    }
  }
  if (!problem.empty()) {
    ready[0].complete(std::make_exception_ptr(Error(Status::kInvalidArg, problem)));
    return;
  }
  {  // lock scope
    std::lock_guard<std::mutex> lock(g_rounds_mu);
    Round& round = g_rounds[key];
    if (round.arrivals.empty()) round.num_devices = num_devices;
    const std::vector<SyncBnArrival>& in = round.arrivals;
    bool seen = false;
    for (const SyncBnArrival& a : in) seen = seen || a.device == arrival.device;
    if (num_devices != round.num_devices) {
      problem = str_cat("SyncBatchNorm (key '", key, "'): ", arrival.device.str(),
                        " runs it with num_devices=", num_devices, " but ",
                        device_list(in), " with num_devices=", round.num_devices);
    } else if (seen) {
      problem = str_cat("SyncBatchNorm (key '", key, "') has num_devices=", num_devices,
                        " but only ", in.size(), " device(s) ", device_list(in), " ran it before ",
                        arrival.device.str(), " came again: each step must run it on exactly ",
                        num_devices, " distinct devices (set num_devices to the number of "
                        "devices of the step)");
    } else if (!in.empty() && in[0].sums.size() != arrival.sums.size()) {
      problem = str_cat("SyncBatchNorm (key '", key, "'): ", arrival.device.str(), " has ",
                        arrival.sums.size() / 2, " channels but ", in[0].device.str(), " has ",
                        in[0].sums.size() / 2);
    }
    if (!problem.empty()) {
      // invariant: a failed round is removed whole, so the next step starts a fresh one
      ready = std::move(round.arrivals);
      ready.push_back(std::move(arrival));
      g_rounds.erase(key);  // STATE CHANGE
    } else {
      round.arrivals.push_back(std::move(arrival));  // STATE CHANGE
      if (static_cast<int64_t>(round.arrivals.size()) == num_devices) {
        ready = std::move(round.arrivals);
        g_rounds.erase(key);  // STATE CHANGE
      }
    }
  }
  // Never call out while holding g_rounds_mu: a finish completes ops, which dispatches others.
  if (!problem.empty()) {
    const std::exception_ptr error =
        std::make_exception_ptr(Error(Status::kInvalidArg, problem));
    for (SyncBnArrival& a : ready) a.complete(error);
    return;
  }
  if (ready.empty()) return;
  int64_t total_count = 0;
  const std::vector<double> total = combine(ready, &total_count);
  for (SyncBnArrival& a : ready) {
    try {
      a.finish(total, total_count);
    } catch (...) {
      a.complete(std::current_exception());
    }
  }
}

}  // namespace nn

namespace {

using nn::SyncBnArrival;
using nn::SyncBnAttrs;
using nn::SyncBnView;

void sync_bn_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                   std::vector<Shape>* out, std::vector<DType>* out_dt) {
  const char* op = "_contrib_SyncBatchNorm";
  nn::sync_bn_attrs(attrs);  // validates them
  PMX_CHECK(in[0].size() >= 2, op, ": data must have a channel axis (axis 1), got shape ",
            shape_str(in[0]));
  const Shape c = {in[0][1]};
  static const char* names[] = {"data", "gamma", "beta", "moving_mean", "moving_var"};
  for (int i = 1; i < 5; ++i) {
    PMX_CHECK(in[i] == c, op, ": ", names[i], " shape ", shape_str(in[i]), " does not match the ",
              c[0], " channels of data ", shape_str(in[0]), " on axis 1");
    if (dt[0] != DType::kFloat32 && dt[0] != DType::kFloat64)
      PMX_THROW(Status::kType, op, ": data must be float32 or float64, got ", dtype_name(dt[0]));
    if (dt[i] != dt[0])
      PMX_THROW(Status::kType, op, ": ", names[i], " has dtype ", dtype_name(dt[i]),
                " but data has ", dtype_name(dt[0]), "; they must match");
  }
  *out = {in[0], c, c};
  *out_dt = {dt[0], dt[0], dt[0]};
}

void sync_bn_backward_infer(const Attrs& attrs, const std::vector<Shape>& in,
                            const std::vector<DType>& dt, std::vector<Shape>* out,
                            std::vector<DType>* out_dt) {
  const char* op = "_contrib_SyncBatchNorm_backward";
  PMX_CHECK(in[0] == in[1] && in[1].size() >= 2, op, ": out_grad ", shape_str(in[0]),
            " and data ", shape_str(in[1]), " must have one shape with a channel axis");
  const Shape c = {in[1][1]};
  for (int i = 2; i < 5; ++i)
    PMX_CHECK(in[i] == c, op, ": input ", i, " has shape ", shape_str(in[i]), ", expected ",
              shape_str(c));
  for (int i = 0; i < 5; ++i)
    PMX_CHECK(dt[i] == dt[1], op, ": input ", i, " has dtype ", dtype_name(dt[i]),
              " but data has ", dtype_name(dt[1]));
  *out = {in[1], c, c};
  *out_dt = {dt[1], dt[1], dt[1]};
}

// Runs fn(c) for every channel, channels split over the intra-op threads (each channel's sums
// stay serial, so results do not depend on the split).
template <typename F>
void for_each_channel(const SyncBnView& v, F&& fn) {
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 15) / std::max<int64_t>(v.count(), 1));
  parallel_for(0, v.channels, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) fn(c);
  });
}

// out = (x - mean_c) * scale_c + beta_c with scale_c = gamma_c / sqrt(var_c + eps).
template <typename T>
void normalise(const T* x, const T* gamma, const T* beta, const std::vector<double>& mean,
               const std::vector<double>& var, const SyncBnAttrs& a, const SyncBnView& v, T* y) {
  for_each_channel(v, [&](int64_t c) {
    const double g = a.fix_gamma ? 1.0 : static_cast<double>(gamma[c]);
    const double scale = g / std::sqrt(var[c] + a.eps);
    const double shift = static_cast<double>(beta[c]) - mean[c] * scale;
    for (int64_t o = 0; o < v.outer; ++o) {
      const int64_t base = (o * v.channels + c) * v.inner;
      for (int64_t j = 0; j < v.inner; ++j)
        y[base + j] = static_cast<T>(static_cast<double>(x[base + j]) * scale + shift);
    }
  });
}

template <typename T>
void sync_bn_forward_typed(const OpContext& ctx, const std::vector<TBlob>& in,
                           const std::vector<TBlob>& out) {
  const SyncBnAttrs a = nn::sync_bn_attrs(*ctx.attrs);
  const SyncBnView v = nn::sync_bn_view(in[0].shape);
  const int64_t channels = v.channels;
  if (!ctx.is_train || a.use_global_stats) {
    std::vector<double> mean(channels), var(channels);
    for (int64_t c = 0; c < channels; ++c) {
      mean[c] = static_cast<double>(in[3].data<T>()[c]);
      var[c] = static_cast<double>(in[4].data<T>()[c]);
      out[1].data<T>()[c] = in[3].data<T>()[c];
      out[2].data<T>()[c] = in[4].data<T>()[c];
    }
    normalise(in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), mean, var, a, v,
              out[0].data<T>());
    ctx.complete();
    return;
  }
  nn::sync_bn_check_engine(a);
  // Local moments per channel, in two passes (mean, then squared deviations from it).
  SyncBnArrival arrival;
  arrival.device = ctx.run.device;
  arrival.moments = true;
  arrival.count = v.count();
  arrival.sums.assign(2 * channels, 0.0);
  const T* x = in[0].data<T>();
  if (v.count() > 0) for_each_channel(v, [&](int64_t c) {
    double sum = 0;
    for (int64_t o = 0; o < v.outer; ++o)
      for (int64_t j = 0; j < v.inner; ++j)
        sum += static_cast<double>(x[(o * channels + c) * v.inner + j]);
    const double mean = sum / static_cast<double>(v.count());
    double m2 = 0;
    for (int64_t o = 0; o < v.outer; ++o)
      for (int64_t j = 0; j < v.inner; ++j) {
        const double d = static_cast<double>(x[(o * channels + c) * v.inner + j]) - mean;
        m2 += d * d;
      }
    arrival.sums[c] = mean;
    arrival.sums[channels + c] = m2;
  });
  const OnComplete complete = ctx.complete;
  arrival.complete = complete;
  arrival.finish = [in, out, a, v, complete](const std::vector<double>& total, int64_t n) {
    std::vector<double> mean(v.channels), var(v.channels);
    for (int64_t c = 0; c < v.channels; ++c) {
      mean[c] = total[c];
      var[c] = total[v.channels + c] / static_cast<double>(n);
    }
    normalise(in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), mean, var, a, v,
              out[0].data<T>());
    T* moving_mean = in[3].data<T>();
    T* moving_var = in[4].data<T>();
    for (int64_t c = 0; c < v.channels; ++c) {
      out[1].data<T>()[c] = static_cast<T>(mean[c]);
      out[2].data<T>()[c] = static_cast<T>(var[c]);
      moving_mean[c] = static_cast<T>(static_cast<double>(moving_mean[c]) * a.momentum +
                                      mean[c] * (1 - a.momentum));
      moving_var[c] = static_cast<T>(static_cast<double>(moving_var[c]) * a.momentum +
                                     var[c] * (1 - a.momentum));
    }
    complete();
  };
  nn::sync_bn_arrive(a.key + "/forward", a.ndev, std::move(arrival));
}

void sync_bn_forward(const OpContext& ctx, const std::vector<TBlob>& in,
                     const std::vector<TBlob>& out) {
  PMX_FLOAT_WIDE_SWITCH(in[0].dtype, T, { sync_bn_forward_typed<T>(ctx, in, out); });
}

// data_grad = scale_c * (dy - sum_dy_c / n - x_hat * sum_dy_xhat_c / n), scale_c = gamma_c * inv_std_c,
// with the sums and n over every device (`batch_stats`), or scale_c * dy when the statistics
// were constants (use_global_stats, inference).
template <typename T>
void data_grad(const T* dy, const T* x, const T* gamma, const std::vector<double>& mean,
               const std::vector<double>& inv_std, const std::vector<double>& sums, int64_t n,
               bool batch_stats, const SyncBnAttrs& a, const SyncBnView& v, T* dx) {
  for_each_channel(v, [&](int64_t c) {
    const double scale = (a.fix_gamma ? 1.0 : static_cast<double>(gamma[c])) * inv_std[c];
    const double mean_dy = batch_stats ? sums[c] / static_cast<double>(n) : 0.0;
    const double mean_dy_xhat = batch_stats ? sums[v.channels + c] / static_cast<double>(n) : 0.0;
    for (int64_t o = 0; o < v.outer; ++o) {
      const int64_t base = (o * v.channels + c) * v.inner;
      for (int64_t j = 0; j < v.inner; ++j) {
        const double x_hat = (static_cast<double>(x[base + j]) - mean[c]) * inv_std[c];
        dx[base + j] = static_cast<T>(
            scale * (static_cast<double>(dy[base + j]) - mean_dy - x_hat * mean_dy_xhat));
      }
    }
  });
}

template <typename T>
void sync_bn_backward_typed(const OpContext& ctx, const std::vector<TBlob>& in,
                            const std::vector<TBlob>& out) {
  const SyncBnAttrs a = nn::sync_bn_attrs(*ctx.attrs);
  const SyncBnView v = nn::sync_bn_view(in[1].shape);
  const T* dy = in[0].data<T>();
  const T* x = in[1].data<T>();
  std::vector<double> mean(v.channels), inv_std(v.channels);
  SyncBnArrival arrival;
  arrival.device = ctx.run.device;
  arrival.count = v.count();
  arrival.sums.assign(2 * v.channels, 0.0);
  for_each_channel(v, [&](int64_t c) {
    mean[c] = static_cast<double>(in[3].data<T>()[c]);
    inv_std[c] = 1.0 / std::sqrt(static_cast<double>(in[4].data<T>()[c]) + a.eps);
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t o = 0; o < v.outer; ++o)
      for (int64_t j = 0; j < v.inner; ++j) {
        const int64_t k = (o * v.channels + c) * v.inner + j;
        const double g = static_cast<double>(dy[k]);
        sum_dy += g;
        sum_dy_xhat += g * (static_cast<double>(x[k]) - mean[c]) * inv_std[c];
      }
    arrival.sums[c] = sum_dy;
    arrival.sums[v.channels + c] = sum_dy_xhat;
    // This device's part: the Trainer adds the devices' parameter gradients up.
    out[1].data<T>()[c] = static_cast<T>(a.fix_gamma ? 0.0 : sum_dy_xhat);
    out[2].data<T>()[c] = static_cast<T>(sum_dy);
  });
  if (a.use_global_stats) {
    data_grad(dy, x, in[2].data<T>(), mean, inv_std, arrival.sums, 0, false, a, v,
              out[0].data<T>());
    ctx.complete();
    return;
  }
  nn::sync_bn_check_engine(a);
  const OnComplete complete = ctx.complete;
  arrival.complete = complete;
  arrival.finish = [in, out, a, v, mean, inv_std, complete](const std::vector<double>& total,
                                                           int64_t n) {
    data_grad(in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), mean, inv_std, total, n, true, a,
              v, out[0].data<T>());
    complete();
  };
  nn::sync_bn_arrive(a.key + "/backward", a.ndev, std::move(arrival));
}

void sync_bn_backward(const OpContext& ctx, const std::vector<TBlob>& in,
                      const std::vector<TBlob>& out) {
  PMX_FLOAT_WIDE_SWITCH(in[1].dtype, T, { sync_bn_backward_typed<T>(ctx, in, out); });
}

std::vector<NDArray> sync_bn_gradient(const GradContext& ctx) {
  // The backward treats the statistics as constants when the forward did (inference mode).
  Attrs attrs = ctx.attrs;
  if (!ctx.is_train) attrs.set("use_global_stats", "True");
  std::vector<NDArray> g = invoke(
      "_contrib_SyncBatchNorm_backward",
      {ctx.out_grads[0], ctx.inputs[0], ctx.inputs[1], ctx.outputs[1], ctx.outputs[2]}, attrs);
  return {g[0], g[1], g[2], NDArray(), NDArray()};
}

PMX_REGISTER_OP(_contrib_SyncBatchNorm)
    .set_num_inputs(5)
    .set_num_outputs(3)
    .set_infer(sync_bn_infer)
    .set_cpu(sync_bn_forward)
    .set_gradient(sync_bn_gradient)
    .set_mutate_inputs({3, 4})
    .set_completes_later()
    .set_on_push([](const Attrs& attrs, Device device) {
      const SyncBnAttrs a = nn::sync_bn_attrs(attrs);
      if (a.ndev > 1 && autograd::is_training() && !a.use_global_stats)
        nn::sync_bn_on_push(a.key + "/forward", a.ndev, device);
    })
    .set_grad_uses({0, 1}, {1, 2});

PMX_REGISTER_OP(_contrib_SyncBatchNorm_backward)
    .set_num_inputs(5)
    .set_num_outputs(3)
    .set_infer(sync_bn_backward_infer)
    .set_cpu(sync_bn_backward)
    .set_completes_later()
    .set_on_push([](const Attrs& attrs, Device device) {
      const SyncBnAttrs a = nn::sync_bn_attrs(attrs);
      if (a.ndev > 1 && !a.use_global_stats)
        nn::sync_bn_on_push(a.key + "/backward", a.ndev, device);
    });

}  // namespace
}  // namespace pymx
