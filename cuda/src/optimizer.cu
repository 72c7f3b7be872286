// Fused optimizer updates on the GPU (CPU definitions and formulas: engine/src/ops/optimizer.cc).
// In place on weight and states (the ops' mutate_inputs); per element in double, like the CPU.
//
// | op              | inputs (all mutated but grad) | attrs |
// |-----------------|-------------------------------|-------|
// | sgd_update      | weight, grad                  | lr wd rescale_grad clip_gradient |
// | sgd_mom_update  | weight, grad, mom             | lr momentum wd rescale_grad clip_gradient |
// | nag_mom_update  | weight, grad, mom             | lr momentum wd rescale_grad clip_gradient |
// | adam_update     | weight, grad, mean, var       | lr beta1 beta2 epsilon wd rescale_grad clip_gradient |
// | adamw_update    | weight, grad, mean, var       | lr eta beta1 beta2 epsilon wd rescale_grad clip_gradient |
// | rmsprop_update  | weight, grad, n               | lr rho (alias gamma1) epsilon wd rescale_grad clip_gradient clip_weights |
// | adagrad_update  | weight, grad, history         | lr epsilon wd rescale_grad clip_gradient |
#include "kernel_util.cuh"

namespace pymx {
namespace gpu {
namespace {

enum class Rule : int { kSgd, kSgdMom, kNagMom, kAdam, kAdamW, kRmsProp, kAdaGrad };

struct Hyper {
  double lr, wd, rescale, clip;
  double momentum, beta1, beta2, eps, eta, rho, clip_weights;
};

Hyper parse_hyper(Rule rule, const Attrs& a) {
  Hyper h;
  h.lr = a.get_float("lr");
  h.wd = a.get_float("wd", 0.0);
  h.rescale = a.get_float("rescale_grad", 1.0);
  h.clip = a.get_float("clip_gradient", -1.0);
  h.momentum = a.get_float("momentum", 0.0);
  h.beta1 = a.get_float("beta1", 0.9);
  h.beta2 = a.get_float("beta2", 0.999);
  h.eps = a.get_float("epsilon", rule == Rule::kAdaGrad ? 1e-7 : 1e-8);
  h.eta = a.get_float("eta", 1.0);
  h.rho = a.get_float("rho", a.get_float("gamma1", 0.9));
  h.clip_weights = a.get_float("clip_weights", -1.0);
  return h;
}

// min(max(g, -c), c) as the CPU's std::min/std::max: a NaN gradient stays NaN (fmin/fmax
// would return the bound).
__device__ __forceinline__ double clip(double g, double c) {
  if (c < 0) return g;
  const double lower = g < -c ? -c : g;
  return c < lower ? c : lower;
}

template <typename T>
__global__ void update_kernel(T* w, const T* grad, T* s1, T* s2, int64_t n, Rule rule, Hyper h) {
  PMX_GRID_STRIDE_LOOP(i, n) {
    double wv = convert<double>(w[i]);
    double a = s1 ? convert<double>(s1[i]) : 0.0;
    double b = s2 ? convert<double>(s2[i]) : 0.0;
    const double r = convert<double>(grad[i]) * h.rescale;
    switch (rule) {
      case Rule::kSgd:
        wv = (1 - h.lr * h.wd) * wv - h.lr * clip(r, h.clip);
        break;
      case Rule::kSgdMom:
        a = h.momentum * a - h.lr * h.wd * wv - h.lr * clip(r, h.clip);
        wv += a;
        break;
      case Rule::kNagMom: {
        const double g = clip(r, h.clip) + h.wd * wv;
        a = h.momentum * a + g;
        wv -= h.lr * (g + h.momentum * a);
        break;
      }
      case Rule::kAdam: {
        const double g = clip(r + h.wd * wv, h.clip);
        a = h.beta1 * a + (1 - h.beta1) * g;
        b = h.beta2 * b + (1 - h.beta2) * g * g;
        wv -= h.lr * a / (sqrt(b) + h.eps);
        break;
      }
      case Rule::kAdamW: {
        const double g = clip(r, h.clip);
        a = h.beta1 * a + (1 - h.beta1) * g;
        b = h.beta2 * b + (1 - h.beta2) * g * g;
        wv -= h.eta * (h.lr * a / (sqrt(b) + h.eps) + h.wd * wv);
        break;
      }
      case Rule::kRmsProp: {
        const double g = clip(r, h.clip) + h.wd * wv;
        a = h.rho * a + (1 - h.rho) * g * g;
        wv = clip(wv - h.lr * g / (sqrt(a) + h.eps), h.clip_weights);
        break;
      }
      case Rule::kAdaGrad: {
        const double g = clip(r, h.clip) + h.wd * wv;
        a += g * g;
        wv -= h.lr * g / (sqrt(a) + h.eps);
        break;
      }
    }
    w[i] = convert<T>(wv);
    if (s1) s1[i] = convert<T>(a);
    if (s2) s2[i] = convert<T>(b);
  }
}

ComputeFn update_compute(Rule rule) {
  return [rule](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>&) {
    const int64_t n = in[0].size();
    if (n == 0) return;
    const Hyper h = parse_hyper(rule, *ctx.attrs);
    PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
      update_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(
          in[0].data<T>(), in[1].data<T>(), in.size() > 2 ? in[2].data<T>() : nullptr,
          in.size() > 3 ? in[3].data<T>() : nullptr, n, rule, h);
    });
    PMX_KERNEL_LAUNCH_CHECK();
  };
}

const bool registered = [] {
  op_registry::get_or_create("sgd_update").set_gpu(update_compute(Rule::kSgd));
  op_registry::get_or_create("sgd_mom_update").set_gpu(update_compute(Rule::kSgdMom));
  op_registry::get_or_create("nag_mom_update").set_gpu(update_compute(Rule::kNagMom));
  op_registry::get_or_create("adam_update").set_gpu(update_compute(Rule::kAdam));
  op_registry::get_or_create("adamw_update").set_gpu(update_compute(Rule::kAdamW));
  op_registry::get_or_create("rmsprop_update").set_gpu(update_compute(Rule::kRmsProp));
  op_registry::get_or_create("adagrad_update").set_gpu(update_compute(Rule::kAdaGrad));
  return true;
}();

}  // namespace
}  // namespace gpu
}  // namespace pymx
