// The operator registry. Each operator is defined once: name, attributes, shape/dtype inference,
// a kernel per device type, and its gradient expressed with other operators.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pymx/base.h"
#include "pymx/ndarray.h"

namespace pymx {

// Operator attributes as strings (what Python, the C API and graph JSON pass), parsed on use.
// Tuples are written "(1, 2)", "[1,2]" or "3"; absent optional values are "None".
class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, std::string>> items) : items_(items) {}

  void set(const std::string& key, const std::string& value);
  // Removes every attribute; keeps the capacity (invoke reuses Attrs objects across calls).
  void clear() { items_.clear(); }
  bool has(const std::string& key) const;  // present and not "None"
  const std::string* find(const std::string& key) const;

  // Each getter throws Error(kInvalidArg) naming the key and value when the text does not parse;
  // the one-argument forms also throw when the key is absent.
  int64_t get_int(const std::string& key) const;
  int64_t get_int(const std::string& key, int64_t fallback) const;
  double get_float(const std::string& key) const;
  double get_float(const std::string& key, double fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;
  std::string get_str(const std::string& key, const std::string& fallback) const;
  Shape get_shape(const std::string& key) const;
  Shape get_shape(const std::string& key, const Shape& fallback) const;
  std::vector<double> get_floats(const std::string& key) const;  // a tuple of numbers
  std::optional<int64_t> get_optional_int(const std::string& key) const;
  std::optional<Shape> get_optional_shape(const std::string& key) const;
  DType get_dtype(const std::string& key, DType fallback) const;  // "float32", "int64", ...

  const std::vector<std::pair<std::string, std::string>>& items() const { return items_; }

 private:
  std::vector<std::pair<std::string, std::string>> items_;
};

DType parse_dtype(const std::string& name);  // throws Error(kType) naming the name
Device parse_device(const std::string& text);  // "cpu(0)", "gpu(1)", "cpu_pinned(0)"

// What a kernel gets besides its blobs.
struct OpContext {
  RunContext run;
  const Attrs* attrs = nullptr;
  bool is_train = false;  // autograd train mode at push time (dropout, batch_norm)
  uint64_t seed = 0;      // per-invocation seed for ops with uses_rng
  // Per input, its var when the kernel may stamp it (see input_stamp), else null; null as a
  // whole when the caller has no vars.
  const std::vector<VarHandle>* input_vars = nullptr;
  // What input i holds now (Note [Content stamps] in engine/src/var.h): unknown when the op
  // (or, in a bulk replay, any op of the replay) also writes the input, when code outside the
  // engine may write its memory, or without vars.
  ContentStamp input_stamp(size_t i) const;
  // Scratch memory for this op's duration on its device (grown and cached per worker).
  void* workspace(size_t bytes) const;
  // Set only for ops registered with set_completes_later: the kernel calls it exactly once, when
  // its outputs are final, possibly after returning and from another thread (a non-null error
  // fails the op). Until then its outputs and inputs stay reserved to it. Such a kernel must not
  // use workspace() after returning: the worker reuses it.
  OnComplete complete;
};

struct OpDef;
class NDArray;

// Input to a gradient function. `out_grads` has one (never none) array per output.
struct GradContext {
  const OpDef& op;
  const Attrs& attrs;
  const std::vector<NDArray>& inputs;
  const std::vector<NDArray>& outputs;
  const std::vector<NDArray>& out_grads;
  bool is_train;
  // Shapes and dtypes of every input and output, also of those that `inputs` / `outputs` hold
  // as none arrays because the op's gradient does not read their values (OpDef::grad_uses_*).
  const std::vector<Shape>& input_shapes;
  const std::vector<DType>& input_dtypes;
  const std::vector<Shape>& output_shapes;
  const std::vector<DType>& output_dtypes;
  // Per input, where its gradient may be written, or a none array: a variable's .grad buffer
  // when this op is the only way the gradient reaches it (Note [Gradients written in place] in
  // autograd.cc). A gradient function may pass these as the `out` of the op that computes the
  // gradients and return them; one that ignores them stays correct.
  const std::vector<NDArray>& grad_targets;
};

// infer: fills one shape and dtype per output from the inputs; throws Error(kInvalidArg) with
// the offending shapes/dtypes/values. For ops with no inputs, shape/dtype come from attrs.
using InferFn = std::function<void(const Attrs&, const std::vector<Shape>& in_shapes,
                                   const std::vector<DType>& in_dtypes,
                                   std::vector<Shape>* out_shapes, std::vector<DType>* out_dtypes)>;
using ComputeFn = std::function<void(const OpContext&, const std::vector<TBlob>& inputs,
                                     const std::vector<TBlob>& outputs)>;
// Returns one gradient per input; a none array means "no gradient flows to this input".
using GradFn = std::function<std::vector<NDArray>(const GradContext&)>;

struct OpDef {
  std::string name;
  int num_inputs = 1;  // -1: variadic
  std::function<int(const Attrs&)> num_outputs = [](const Attrs&) { return 1; };
  InferFn infer;
  ComputeFn compute_cpu;
  ComputeFn compute_gpu;
  GradFn gradient;                 // empty: not differentiable
  std::vector<int> mutate_inputs;  // inputs the kernel also writes (running stats, optimizer state)
  // For a variadic op whose written inputs depend on the call (updates of many parameters):
  // whether input i of a call with num_inputs inputs is written too. Adds to mutate_inputs.
  std::function<bool(int i, int num_inputs)> mutates_input;
  bool uses_rng = false;
  // The kernel finishes through OpContext::complete instead of by returning (an op that waits
  // for other devices' calls: Note [Cross-device batch statistics] in nn_sync_batch_norm.cc).
  // Graph replays run such ops one by one, never in bulk.
  bool completes_later = false;
  // Runs in invoke on the calling thread, after inference and before the push, with the call's
  // attributes and device; throws to refuse the call (nothing is pushed or recorded then).
  std::function<void(const Attrs&, Device)> on_push;
  // For a uses_rng op whose calls draw random numbers only in some modes (dropout: in train mode
  // or with mode='always'): whether a call with these attributes and train flag draws. A call
  // that does not is deterministic, so a CUDA graph may replay it. Empty: every call draws.
  std::function<bool(const Attrs&, bool is_train)> draws_random;
  // The inputs and outputs whose values `gradient` reads, by index; nullopt (the default): all.
  // Autograd keeps only these alive until backward, so memory and engine vars of the rest are
  // reused at once. The others reach the gradient as none arrays (their shapes and dtypes are in
  // GradContext). Declare it only after checking what the gradient's body reads.
  std::optional<std::vector<int>> grad_uses_inputs;
  std::optional<std::vector<int>> grad_uses_outputs;

  // Fluent setters for registration.
  OpDef& set_num_inputs(int n) { num_inputs = n; return *this; }
  OpDef& set_num_outputs(int n) { num_outputs = [n](const Attrs&) { return n; }; return *this; }
  OpDef& set_num_outputs(std::function<int(const Attrs&)> f) { num_outputs = std::move(f); return *this; }
  OpDef& set_infer(InferFn f) { infer = std::move(f); return *this; }
  OpDef& set_cpu(ComputeFn f) { compute_cpu = std::move(f); return *this; }
  OpDef& set_gpu(ComputeFn f) { compute_gpu = std::move(f); return *this; }
  OpDef& set_gradient(GradFn f) { gradient = std::move(f); return *this; }
  OpDef& set_mutate_inputs(std::vector<int> v) { mutate_inputs = std::move(v); return *this; }
  OpDef& set_mutates_input(std::function<bool(int, int)> f) {
    mutates_input = std::move(f);
    return *this;
  }
  // Calls f(i) for every input a call with num_inputs inputs writes.
  template <typename F>
  void for_each_mutated_input(int num_inputs, F&& f) const {
    for (int m : mutate_inputs) f(m);
    if (mutates_input)
      for (int i = 0; i < num_inputs; ++i)
        if (mutates_input(i, num_inputs)) f(i);
  }
  OpDef& set_uses_rng(bool v = true) { uses_rng = v; return *this; }
  OpDef& set_completes_later(bool v = true) { completes_later = v; return *this; }
  OpDef& set_on_push(std::function<void(const Attrs&, Device)> f) {
    on_push = std::move(f);
    return *this;
  }
  OpDef& set_draws_random(std::function<bool(const Attrs&, bool)> f) {
    draws_random = std::move(f);
    return *this;
  }
  OpDef& set_grad_uses(std::vector<int> inputs, std::vector<int> outputs) {
    grad_uses_inputs = std::move(inputs);
    grad_uses_outputs = std::move(outputs);
    return *this;
  }
};

namespace op_registry {
// Returns the op named `name`, creating an empty definition on first use, so CPU and GPU kernels
// may be registered from different files in any order. Not thread-safe: registration happens in
// static initialisers only.
OpDef& get_or_create(const std::string& name);
// nullptr when unknown.
const OpDef* find(const std::string& name);
// Throws Error(kInvalidArg) "unknown operator '<name>'".
const OpDef& get(const std::string& name);
std::vector<std::string> names();
}  // namespace op_registry

#define PMX_OP_CONCAT_(a, b) a##b
#define PMX_OP_CONCAT(a, b) PMX_OP_CONCAT_(a, b)
// PMX_REGISTER_OP(add).set_num_inputs(2).set_infer(...).set_cpu(...);
#define PMX_REGISTER_OP(name)                                                   \
  static ::pymx::OpDef& PMX_OP_CONCAT(pmx_op_registration_, __COUNTER__) =      \
      ::pymx::op_registry::get_or_create(#name)

// Runs `op` imperatively: checks that all inputs share one device (the error names both), infers
// outputs, allocates them (or uses the non-none entries of `out`, which must match), pushes the
// kernel to the engine with reads = inputs, writes = outputs + mutated inputs, and records the op
// for autograd when recording. `device` is used only when there are no inputs.
// Returns at once; the results may still be in flight.
std::vector<NDArray> invoke(const OpDef& op, const std::vector<NDArray>& inputs,
                            const Attrs& attrs, Device device = Device::cpu(),
                            const std::vector<NDArray>& out = {});
// Shorthand used by gradient functions: invoke(op_registry::get(name), ...).
std::vector<NDArray> invoke(const std::string& op_name, const std::vector<NDArray>& inputs,
                            const Attrs& attrs = {});

// The seed used for ops with uses_rng, per device; np.random.seed / npx.random.seed set it.
void seed_rng(uint64_t seed);

}  // namespace pymx
