// Fused optimizer updates: one op per parameter, writing the weight and its states in place
// (mutate_inputs). They have no outputs: call them without out=. Formulas are MXNet's
// (src/operator/optimizer_op-inl.h); the learning rate arrives already scheduled and, for Adam,
// bias-corrected by the Python optimizer, as in MXNet.
//
// | op              | inputs (all mutated but grad)      | attrs |
// |-----------------|------------------------------------|-------|
// | sgd_update      | weight, grad                       | lr wd rescale_grad clip_gradient |
// | sgd_mom_update  | weight, grad, mom                  | lr momentum wd rescale_grad clip_gradient |
// | nag_mom_update  | weight, grad, mom                  | lr momentum wd rescale_grad clip_gradient |
// | adam_update     | weight, grad, mean, var            | lr beta1 beta2 epsilon wd rescale_grad clip_gradient |
// | adamw_update    | weight, grad, mean, var            | lr eta beta1 beta2 epsilon wd rescale_grad clip_gradient |
// | rmsprop_update  | weight, grad, n                    | lr rho (alias gamma1) epsilon wd rescale_grad clip_gradient clip_weights |
// | adagrad_update  | weight, grad, history              | lr epsilon wd rescale_grad clip_gradient |
//
// Defaults: wd 0, rescale_grad 1, clip_gradient -1 (off; clip(g) = min(max(g, -c), c) when c >= 0),
// momentum 0, beta1 0.9, beta2 0.999, epsilon 1e-8 (adagrad 1e-7), rho 0.9, eta 1,
// clip_weights -1 (off). With r = rescale_grad * grad:
//   sgd:      w = (1 - lr*wd) * w - lr * clip(r)
//   sgd_mom:  mom = momentum*mom - lr*wd*w - lr*clip(r);  w += mom
//   nag_mom:  g = clip(r) + wd*w;  mom = momentum*mom + g;  w -= lr * (g + momentum*mom)
//   adam:     g = clip(r + wd*w);  mean = b1*mean + (1-b1)*g;  var = b2*var + (1-b2)*g^2;
//             w -= lr * mean / (sqrt(var) + epsilon)
//   adamw:    g = clip(r);  mean, var as adam;  w -= eta * (lr * mean / (sqrt(var) + epsilon) + wd*w)
//   rmsprop:  g = clip(r) + wd*w;  n = rho*n + (1-rho)*g^2;  w -= lr * g / (sqrt(n) + epsilon);
//             then w = clip(w, clip_weights) when clip_weights >= 0
//   adagrad:  g = clip(r) + wd*w;  history += g^2;  w -= lr * g / (sqrt(history) + epsilon)
#include <cmath>

#include "ops/nn_common.h"
#include "parallel.h"

namespace pymx {
namespace {

struct Hyper {
  double lr, wd, rescale, clip;
};

Hyper common_hyper(const Attrs& a) {
  return {a.get_float("lr"), a.get_float("wd", 0.0), a.get_float("rescale_grad", 1.0),
          a.get_float("clip_gradient", -1.0)};
}

inline double clip(double g, double c) { return c >= 0 ? std::min(std::max(g, -c), c) : g; }

// All inputs share weight's shape and dtype; no outputs.
InferFn update_infer(const char* op) {
  return [op](const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
              std::vector<Shape>* out, std::vector<DType>* out_dt) {
    static const char* names[] = {"weight", "grad", "state 1", "state 2"};
    common_hyper(attrs);  // lr is required: fail at the call, not in the worker
    nn::check_float(dt[0], op, "weight");
    for (size_t i = 1; i < in.size(); ++i) {
      PMX_CHECK(in[i] == in[0] && dt[i] == dt[0], op, ": ", names[i], " has shape ",
                shape_str(in[i]), " and dtype ", dtype_name(dt[i]), " but weight has ",
                shape_str(in[0]), " and ", dtype_name(dt[0]));
    }
    out->clear();
    out_dt->clear();
  };
}

// Elements per parallel chunk: an update is a few arithmetic operations per element, so a chunk
// must be large to pay for handing it to another thread.
constexpr int64_t kUpdateGrain = int64_t(1) << 15;

// Runs step(w, g, s1, s2) per element in double, with kStates (0, 1 or 2) optimizer states;
// absent states are local dummies. Elements are independent, so the chunks split across the
// intra-op threads give the same result as one loop, and the per-element work has no branch on
// which states exist (the loop vectorises).
template <int kStates, typename Step, typename T, typename Params>
void update_elements(const Step& step, const Hyper& h, const Params& params, T* w, const T* g,
                     T* s1, T* s2, int64_t n) {
  parallel_for(0, n, kUpdateGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      double wv = static_cast<double>(w[i]), a = 0.0, b = 0.0;
      if constexpr (kStates >= 1) a = static_cast<double>(s1[i]);
      if constexpr (kStates >= 2) b = static_cast<double>(s2[i]);
      step(h, params, static_cast<double>(g[i]) * h.rescale, &wv, &a, &b);
      w[i] = static_cast<T>(wv);
      if constexpr (kStates >= 1) s1[i] = static_cast<T>(a);
      if constexpr (kStates >= 2) s2[i] = static_cast<T>(b);
    }
  });
}

template <typename Step>
ComputeFn update_kernel(Step step) {
  return [step](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>&) {
    const Hyper h = common_hyper(*ctx.attrs);
    const auto params = step.params(*ctx.attrs);
    PMX_FLOAT_SWITCH(in[0].dtype, T, {
      T* w = in[0].data<T>();
      const T* g = in[1].data<T>();
      const int64_t n = in[0].size();
      if (in.size() == 2) {
        update_elements<0>(step, h, params, w, g, static_cast<T*>(nullptr),
                           static_cast<T*>(nullptr), n);
      } else if (in.size() == 3) {
        update_elements<1>(step, h, params, w, g, in[2].data<T>(), static_cast<T*>(nullptr), n);
      } else {
        update_elements<2>(step, h, params, w, g, in[2].data<T>(), in[3].data<T>(), n);
      }
    });
  };
}

struct NoParams {};
struct MomParams { double momentum; };
struct AdamParams { double beta1, beta2, eps, eta; };
struct RmsParams { double rho, eps, clip_weights; };
struct EpsParams { double eps; };

struct Sgd {
  NoParams params(const Attrs&) const { return {}; }
  void operator()(const Hyper& h, NoParams, double r, double* w, double*, double*) const {
    *w = (1 - h.lr * h.wd) * *w - h.lr * clip(r, h.clip);
  }
};

struct SgdMom {
  MomParams params(const Attrs& a) const { return {a.get_float("momentum", 0.0)}; }
  void operator()(const Hyper& h, MomParams p, double r, double* w, double* mom, double*) const {
    *mom = p.momentum * *mom - h.lr * h.wd * *w - h.lr * clip(r, h.clip);
    *w += *mom;
  }
};

struct NagMom {
  MomParams params(const Attrs& a) const { return {a.get_float("momentum", 0.0)}; }
  void operator()(const Hyper& h, MomParams p, double r, double* w, double* mom, double*) const {
    const double g = clip(r, h.clip) + h.wd * *w;
    *mom = p.momentum * *mom + g;
    *w -= h.lr * (g + p.momentum * *mom);
  }
};

AdamParams adam_params(const Attrs& a) {
  return {a.get_float("beta1", 0.9), a.get_float("beta2", 0.999), a.get_float("epsilon", 1e-8),
          a.get_float("eta", 1.0)};
}

struct Adam {
  AdamParams params(const Attrs& a) const { return adam_params(a); }
  void operator()(const Hyper& h, AdamParams p, double r, double* w, double* mean,
                  double* var) const {
    const double g = clip(r + h.wd * *w, h.clip);
    *mean = p.beta1 * *mean + (1 - p.beta1) * g;
    *var = p.beta2 * *var + (1 - p.beta2) * g * g;
    *w -= h.lr * *mean / (std::sqrt(*var) + p.eps);
  }
};

struct AdamW {
  AdamParams params(const Attrs& a) const { return adam_params(a); }
  void operator()(const Hyper& h, AdamParams p, double r, double* w, double* mean,
                  double* var) const {
    const double g = clip(r, h.clip);
    *mean = p.beta1 * *mean + (1 - p.beta1) * g;
    *var = p.beta2 * *var + (1 - p.beta2) * g * g;
    *w -= p.eta * (h.lr * *mean / (std::sqrt(*var) + p.eps) + h.wd * *w);
  }
};

struct RmsProp {
  RmsParams params(const Attrs& a) const {
    const double rho = a.get_float("rho", a.get_float("gamma1", 0.9));
    return {rho, a.get_float("epsilon", 1e-8), a.get_float("clip_weights", -1.0)};
  }
  void operator()(const Hyper& h, RmsParams p, double r, double* w, double* n, double*) const {
    const double g = clip(r, h.clip) + h.wd * *w;
    *n = p.rho * *n + (1 - p.rho) * g * g;
    *w = clip(*w - h.lr * g / (std::sqrt(*n) + p.eps), p.clip_weights);
  }
};

struct AdaGrad {
  EpsParams params(const Attrs& a) const { return {a.get_float("epsilon", 1e-7)}; }
  void operator()(const Hyper& h, EpsParams p, double r, double* w, double* history,
                  double*) const {
    const double g = clip(r, h.clip) + h.wd * *w;
    *history += g * g;
    *w -= h.lr * g / (std::sqrt(*history) + p.eps);
  }
};

PMX_REGISTER_OP(sgd_update)
    .set_num_inputs(2).set_num_outputs(0).set_mutate_inputs({0})
    .set_infer(update_infer("sgd_update")).set_cpu(update_kernel(Sgd()));
PMX_REGISTER_OP(sgd_mom_update)
    .set_num_inputs(3).set_num_outputs(0).set_mutate_inputs({0, 2})
    .set_infer(update_infer("sgd_mom_update")).set_cpu(update_kernel(SgdMom()));
PMX_REGISTER_OP(nag_mom_update)
    .set_num_inputs(3).set_num_outputs(0).set_mutate_inputs({0, 2})
    .set_infer(update_infer("nag_mom_update")).set_cpu(update_kernel(NagMom()));
PMX_REGISTER_OP(adam_update)
    .set_num_inputs(4).set_num_outputs(0).set_mutate_inputs({0, 2, 3})
    .set_infer(update_infer("adam_update")).set_cpu(update_kernel(Adam()));
PMX_REGISTER_OP(adamw_update)
    .set_num_inputs(4).set_num_outputs(0).set_mutate_inputs({0, 2, 3})
    .set_infer(update_infer("adamw_update")).set_cpu(update_kernel(AdamW()));
PMX_REGISTER_OP(rmsprop_update)
    .set_num_inputs(3).set_num_outputs(0).set_mutate_inputs({0, 2})
    .set_infer(update_infer("rmsprop_update")).set_cpu(update_kernel(RmsProp()));
PMX_REGISTER_OP(adagrad_update)
    .set_num_inputs(3).set_num_outputs(0).set_mutate_inputs({0, 2})
    .set_infer(update_infer("adagrad_update")).set_cpu(update_kernel(AdaGrad()));

}  // namespace
}  // namespace pymx
