// Native autograd and graph executor, through the C++ API only (no Python). The test registers
// its own small ops, so it checks the tape and the graph, not other parts' kernels; autograd
// itself uses the core ops add, ones and zeros.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "pymx/autograd.h"
#include "pymx/engine.h"
#include "pymx/graph.h"
#include "pymx/op.h"
#include "test_util.h"

using namespace pymx;

namespace {

void same_shape_infer(const Attrs&, const std::vector<Shape>& in_shapes,
                      const std::vector<DType>& in_dtypes, std::vector<Shape>* out_shapes,
                      std::vector<DType>* out_dtypes) {
  (*out_shapes)[0] = in_shapes[0];
  (*out_dtypes)[0] = in_dtypes[0];
}

// ag_scale: y = k * x (float32), attr k.
PMX_REGISTER_OP(ag_scale)
    .set_num_inputs(1)
    .set_infer(same_shape_infer)
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      const float k = static_cast<float>(ctx.attrs->get_float("k"));
      for (int64_t i = 0; i < in[0].size(); ++i) out[0].data<float>()[i] = k * in[0].data<float>()[i];
    })
    .set_gradient([](const GradContext& ctx) {
      return invoke("ag_scale", {ctx.out_grads[0]}, ctx.attrs);
    });

// ag_mul: y = a * b (same shapes, float32).
PMX_REGISTER_OP(ag_mul)
    .set_num_inputs(2)
    .set_infer(same_shape_infer)
    .set_cpu([](const OpContext&, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      for (int64_t i = 0; i < in[0].size(); ++i)
        out[0].data<float>()[i] = in[0].data<float>()[i] * in[1].data<float>()[i];
    })
    .set_gradient([](const GradContext& ctx) {
      return std::vector<NDArray>{invoke("ag_mul", {ctx.out_grads[0], ctx.inputs[1]})[0],
                                  invoke("ag_mul", {ctx.out_grads[0], ctx.inputs[0]})[0]};
    });

// ag_floor: y = floor(x), deliberately without a gradient.
PMX_REGISTER_OP(ag_floor)
    .set_num_inputs(1)
    .set_infer(same_shape_infer)
    .set_cpu([](const OpContext&, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      for (int64_t i = 0; i < in[0].size(); ++i)
        out[0].data<float>()[i] = std::floor(in[0].data<float>()[i]);
    });

NDArray from(const std::vector<float>& values, Device device = Device::cpu()) {
  NDArray a({static_cast<int64_t>(values.size())}, device, DType::kFloat32);
  a.sync_copy_from_cpu(values.data(), values.size() * sizeof(float));
  return a;
}

std::vector<float> values_of(const NDArray& a) {
  std::vector<float> v(a.size());
  a.sync_copy_to_cpu(v.data(), v.size() * sizeof(float));
  return v;
}

bool close(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::fabs(got[i] - want[i]) > 1e-5f * (1 + std::fabs(want[i]))) return false;
  return true;
}

NDArray mul(const NDArray& a, const NDArray& b) { return invoke("ag_mul", {a, b})[0]; }
NDArray scale(const NDArray& a, double k) {
  return invoke("ag_scale", {a}, Attrs{{"k", std::to_string(k)}})[0];
}

NDArray variable(const std::vector<float>& values, GradReq req, Device device = Device::cpu()) {
  NDArray x = from(values, device);
  NDArray g = from(std::vector<float>(values.size(), 0.f), device);
  autograd::mark_variables({&x}, {g}, {req});
  return x;
}

template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

struct Recording {
  Recording() { autograd::set_recording(true); }
  ~Recording() { autograd::set_recording(false); }
};

void test_not_recorded_without_variables() {
  Recording rec;
  NDArray y = mul(from({1, 2}), from({3, 4}));
  EXPECT(y.autograd_entry().node == nullptr);
}

void test_chain_rule_and_shared_inputs() {
  NDArray x = variable({1, 2, 3}, GradReq::kWrite);
  NDArray z;
  {
    Recording rec;
    z = mul(mul(x, x), scale(x, 2));  // 2 x^3
  }
  autograd::backward({z}, {}, false, true);
  EXPECT(close(values_of(autograd::get_grad(x)), {6, 24, 54}));
}

void test_grad_req_add_and_retain_graph() {
  NDArray x = variable({1, 2}, GradReq::kAdd);
  NDArray y;
  {
    Recording rec;
    y = scale(x, 3);
  }
  autograd::backward({y}, {}, /*retain_graph=*/true, true);
  autograd::backward({y}, {from({1, 10})}, /*retain_graph=*/false, true);
  EXPECT(close(values_of(autograd::get_grad(x)), {6, 33}));
  const std::string message = error_of([&] { autograd::backward({y}, {}, false, true); });
  EXPECT(message.find("retain_graph=True") != std::string::npos);
}

void test_grad_req_null_and_grad() {
  NDArray x = variable({2, 3}, GradReq::kNull);
  NDArray w = variable({5, 7}, GradReq::kWrite);
  NDArray y;
  {
    Recording rec;
    y = mul(x, w);
  }
  EXPECT(autograd::get_grad(x).is_none());
  const std::vector<NDArray> g = autograd::grad({y}, {x, w}, {}, true, true);
  EXPECT(close(values_of(g[0]), {5, 7}));
  EXPECT(close(values_of(g[1]), {2, 3}));
  EXPECT(close(values_of(autograd::get_grad(w)), {0, 0}));  // grad() leaves buffers alone
}

void test_non_differentiable_op() {
  NDArray x = variable({1.5f}, GradReq::kWrite);
  NDArray y;
  {
    Recording rec;
    y = scale(invoke("ag_floor", {x})[0], 2);
  }
  const std::string message = error_of([&] { autograd::backward({y}, {}, false, true); });
  EXPECT(message.find("'ag_floor'") != std::string::npos);
  EXPECT(message.find("not differentiable") != std::string::npos);
}

void test_heads_on_two_devices() {
  NDArray x0 = variable({1, 2}, GradReq::kWrite, Device::cpu(0));
  NDArray x1 = variable({3, 4}, GradReq::kWrite, Device::cpu(1));
  NDArray y0, y1;
  {
    Recording rec;
    y0 = mul(x0, x0);
    y1 = scale(x1, 5);
  }
  EXPECT(y1.device() == Device::cpu(1));
  autograd::backward({y0}, {}, false, true);
  autograd::backward({y1}, {}, false, true);
  EXPECT(close(values_of(autograd::get_grad(x0)), {2, 4}));
  EXPECT(close(values_of(autograd::get_grad(x1)), {5, 5}));
}

void test_long_chain_teardown() {
  // Destroying the last array of a 100k-node chain must not recurse 100k deep.
  NDArray x = variable({1}, GradReq::kWrite);
  {
    Recording rec;
    NDArray y = x;
    for (int i = 0; i < 100000; ++i) y = scale(y, 1);
  }
  Engine::get()->wait_for_all();
}

void test_graph_replay_and_json() {
  const NDArray constant = from({10, 20, 30});
  NDArray a = from({1, 2, 3}), b = from({4, 5, 6});
  graph::begin_trace({a, b});
  NDArray t = mul(a, b);
  NDArray flat = t.reshape_view({3, 1}).reshape_view({3});  // views, no ops
  NDArray out = mul(scale(flat, 0.5), constant);
  std::shared_ptr<graph::Graph> g = graph::end_trace({out, t});
  EXPECT(!graph::is_tracing());
  EXPECT(g->num_inputs() == 2 && g->num_outputs() == 2 && g->constants().size() == 1);

  const std::vector<NDArray> r = g->run({from({2, 2, 2}), from({1, 2, 3})});
  EXPECT(close(values_of(r[0]), {10, 40, 90}));
  EXPECT(close(values_of(r[1]), {2, 4, 6}));

  // Backward through a replay equals the imperative gradient: d(out)/d(a) = 0.5 * b * c.
  NDArray va = variable({2, 2, 2}, GradReq::kWrite);
  std::vector<NDArray> rr;
  {
    Recording rec;
    rr = g->run({va, from({1, 2, 3})});
  }
  autograd::backward({rr[0]}, {}, false, true);
  EXPECT(close(values_of(autograd::get_grad(va)), {5, 20, 45}));

  // JSON round trip: the constant becomes the third input.
  std::shared_ptr<graph::Graph> loaded = graph::Graph::from_json(g->to_json());
  EXPECT(loaded->num_inputs() == 3 && loaded->num_outputs() == 2);
  EXPECT(loaded->to_json().find("\"ag_mul\"") != std::string::npos);
  const std::vector<NDArray> l = loaded->run({from({2, 2, 2}), from({1, 2, 3}), constant});
  EXPECT(close(values_of(l[0]), {10, 40, 90}));

  const std::string bad = error_of([&] { g->run({a}); });
  EXPECT(bad.find("takes 2 inputs, got 1") != std::string::npos);
  const std::string bad_json = error_of([] { graph::Graph::from_json("{\"nodes\": [}"); });
  EXPECT(bad_json.find("graph JSON") != std::string::npos);
}

void test_nested_trace_refused() {
  graph::begin_trace({});
  const std::string message = error_of([] { graph::begin_trace({}); });
  EXPECT(message.find("already tracing") != std::string::npos);
  graph::abort_trace();
  EXPECT(!graph::is_tracing());
}

}  // namespace

int main() {
  test_not_recorded_without_variables();
  test_chain_rule_and_shared_inputs();
  test_grad_req_add_and_retain_graph();
  test_grad_req_null_and_grad();
  test_non_differentiable_op();
  test_heads_on_two_devices();
  test_long_chain_teardown();
  test_graph_replay_and_json();
  test_nested_trace_refused();
  std::printf("test_autograd_core: all passed\n");
  return 0;
}
