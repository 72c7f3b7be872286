// Fused optimizer updates: one op per parameter, writing the weight and its states in place
// (mutate_inputs). They have no outputs: call them without out=. Formulas are MXNet's
// (src/operator/optimizer_op-inl.h); the learning rate arrives already scheduled and, for Adam,
// bias-corrected by the Python optimizer, as in MXNet. Each has a multi_ twin for many
// parameters at once (Note [Updates of many parameters in one op]).
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

// One parameter's inputs from `first` (weight, grad, states): a float weight, the others of its
// shape and dtype. `whose` names the parameter in messages ("" for a single op's only one).
void check_update_group(const std::string& op, const std::string& whose,
                        const std::vector<Shape>& in, const std::vector<DType>& dt, size_t first,
                        size_t group_size) {
  static const char* names[] = {"weight", "grad", "state 1", "state 2"};
  nn::check_float(dt[first], op.c_str(), "weight");
  for (size_t k = 1; k < group_size; ++k) {
    const size_t i = first + k;
    PMX_CHECK(in[i] == in[first] && dt[i] == dt[first], op, ": ", whose, names[k], " has shape ",
              shape_str(in[i]), " and dtype ", dtype_name(dt[i]), " but ",
              whose.empty() ? "weight" : "its weight", " has ", shape_str(in[first]), " and ",
              dtype_name(dt[first]));
  }
}

// All inputs share weight's shape and dtype; no outputs.
InferFn update_infer(std::string op) {
  return [op](const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
              std::vector<Shape>* out, std::vector<DType>* out_dt) {
    common_hyper(attrs);  // lr is required: fail at the call, not in the worker
    check_update_group(op, "", in, dt, 0, in.size());
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

// One parameter's update: group is its weight, grad and group_size - 2 states.
template <typename Step, typename Params>
void update_group(const Step& step, const Hyper& h, const Params& params, const TBlob* group,
                  size_t group_size) {
  PMX_FLOAT_SWITCH(group[0].dtype, T, {
    T* w = group[0].data<T>();
    const T* g = group[1].data<T>();
    const int64_t n = group[0].size();
    if (group_size == 2) {
      update_elements<0>(step, h, params, w, g, static_cast<T*>(nullptr),
                         static_cast<T*>(nullptr), n);
    } else if (group_size == 3) {
      update_elements<1>(step, h, params, w, g, group[2].data<T>(), static_cast<T*>(nullptr), n);
    } else {
      update_elements<2>(step, h, params, w, g, group[2].data<T>(), group[3].data<T>(), n);
    }
  });
}

template <typename Step>
ComputeFn update_kernel(Step step) {
  return [step](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>&) {
    update_group(step, common_hyper(*ctx.attrs), step.params(*ctx.attrs), in.data(), in.size());
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

// Note [Updates of many parameters in one op]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// multi_<rule> (multi_sgd_update, multi_adam_update, ...) applies <rule> to num_weights
// parameters in one call: its inputs are their groups one after another (weight, grad, states),
// the attributes lrs and wds give each parameter's rate and decay, the others are shared. A
// training step then costs one Python call, one engine dispatch and, on a GPU, one kernel launch
// per device instead of one of each per parameter: for small parameters those per-op costs are
// the whole update. The per-element arithmetic is the single op's, so results are equal to
// the bit. Every input but the gradients is written (OpDef::mutates_input).

// The parameter count and per-parameter rates and decays of a multi_ call with groups of
// group_size inputs, checked against each other.
struct MultiHyper {
  int64_t num_weights;
  std::vector<double> lrs, wds;
};

MultiHyper multi_hyper(const Attrs& a, const std::string& op, int group_size, size_t num_inputs) {
  MultiHyper m{a.get_int("num_weights"), a.get_floats("lrs"), a.get_floats("wds")};
  PMX_CHECK(m.num_weights >= 1 && static_cast<int64_t>(num_inputs) == m.num_weights * group_size,
            op, ": num_weights ", m.num_weights, " needs ", m.num_weights * group_size,
            " inputs (groups of ", group_size, "), got ", num_inputs);
  PMX_CHECK(static_cast<int64_t>(m.lrs.size()) == m.num_weights &&
                static_cast<int64_t>(m.wds.size()) == m.num_weights,
            op, ": lrs has ", m.lrs.size(), " and wds ", m.wds.size(), " values for num_weights ",
            m.num_weights);
  return m;
}

// Each group as the single op sees it: one float dtype and one shape within a group.
InferFn multi_update_infer(std::string op, int group_size) {
  return [op, group_size](const Attrs& attrs, const std::vector<Shape>& in,
                          const std::vector<DType>& dt, std::vector<Shape>* out,
                          std::vector<DType>* out_dt) {
    const MultiHyper m = multi_hyper(attrs, op, group_size, in.size());
    for (int64_t p = 0; p < m.num_weights; ++p)
      check_update_group(op, str_cat("parameter ", p, "'s "), in, dt,
                         static_cast<size_t>(p * group_size), group_size);
    out->clear();
    out_dt->clear();
  };
}

template <typename Step>
ComputeFn multi_update_kernel(Step step, std::string op, int group_size) {
  return [step, op, group_size](const OpContext& ctx, const std::vector<TBlob>& in,
                                const std::vector<TBlob>&) {
    const MultiHyper m = multi_hyper(*ctx.attrs, op, group_size, in.size());
    Hyper h{0.0, 0.0, ctx.attrs->get_float("rescale_grad", 1.0),
            ctx.attrs->get_float("clip_gradient", -1.0)};
    const auto params = step.params(*ctx.attrs);
    for (int64_t p = 0; p < m.num_weights; ++p) {
      h.lr = m.lrs[p];
      h.wd = m.wds[p];
      update_group(step, h, params, &in[p * group_size], group_size);
    }
  };
}

// `name` for one parameter with `states` optimizer states, and multi_`name` for many.
template <typename Step>
void register_update(const std::string& name, int states, Step step) {
  const int group_size = 2 + states;
  std::vector<int> mutated = {0};
  for (int k = 0; k < states; ++k) mutated.push_back(2 + k);
  op_registry::get_or_create(name)
      .set_num_inputs(group_size).set_num_outputs(0).set_mutate_inputs(mutated)
      .set_infer(update_infer(name)).set_cpu(update_kernel(step));
  const std::string multi = "multi_" + name;
  op_registry::get_or_create(multi)
      .set_num_inputs(-1).set_num_outputs(0)
      .set_mutates_input([group_size](int i, int) { return i % group_size != 1; })
      .set_infer(multi_update_infer(multi, group_size))
      .set_cpu(multi_update_kernel(step, multi, group_size));
}

const bool registered = [] {
  register_update("sgd_update", 0, Sgd());
  register_update("sgd_mom_update", 1, SgdMom());
  register_update("nag_mom_update", 1, NagMom());
  register_update("adam_update", 2, Adam());
  register_update("adamw_update", 2, AdamW());
  register_update("rmsprop_update", 1, RmsProp());
  register_update("adagrad_update", 1, AdaGrad());
  return true;
}();

}  // namespace
}  // namespace pymx
