// The autograd and graph section of the C API (see engine/include/pymx/c_api.h).
#include <memory>
#include <string>
#include <vector>

#include "autograd.h"
#include "c_api_internal.h"
#include "pymx/graph.h"

// A C handle owns a shared reference to one graph.
struct PmxGraph {
  std::shared_ptr<pymx::graph::Graph> graph;
};

using pymx::NDArray;
using pymx::c_api::array_of;
using pymx::c_api::new_handle;

namespace {

thread_local std::string t_json;

std::vector<NDArray> arrays_of(int num, PmxArray* const* handles, const char* what) {
  PMX_CHECK(num >= 0 && (num == 0 || handles != nullptr), what, ": bad array list (count ", num,
            ")");
  std::vector<NDArray> arrays;
  arrays.reserve(num);
  for (int i = 0; i < num; ++i) arrays.push_back(array_of(handles[i]));
  return arrays;
}

// Head gradients: none for a NULL list or a NULL entry.
std::vector<NDArray> head_grads_of(int num_heads, PmxArray* const* head_grads) {
  std::vector<NDArray> grads(head_grads ? num_heads : 0);
  for (size_t i = 0; i < grads.size(); ++i)
    if (head_grads[i]) grads[i] = head_grads[i]->array;
  return grads;
}

const pymx::graph::Graph& graph_of(const PmxGraph* handle) {
  PMX_CHECK(handle != nullptr && handle->graph, "expected a graph handle, got NULL");
  return *handle->graph;
}

void set_flag(int* out, bool value) {
  if (out) *out = value ? 1 : 0;
}

}  // namespace

int pmx_autograd_set_recording(int on, int* out_prev) {
  PMX_API_BEGIN();
  set_flag(out_prev, pymx::autograd::set_recording(on != 0));
  PMX_API_END();
}

int pmx_autograd_set_training(int on, int* out_prev) {
  PMX_API_BEGIN();
  set_flag(out_prev, pymx::autograd::set_training(on != 0));
  PMX_API_END();
}

int pmx_autograd_is_recording(int* out_on) {
  PMX_API_BEGIN();
  PMX_CHECK(out_on != nullptr, "pmx_autograd_is_recording: out_on is NULL");
  set_flag(out_on, pymx::autograd::is_recording());
  PMX_API_END();
}

int pmx_autograd_is_training(int* out_on) {
  PMX_API_BEGIN();
  PMX_CHECK(out_on != nullptr, "pmx_autograd_is_training: out_on is NULL");
  set_flag(out_on, pymx::autograd::is_training());
  PMX_API_END();
}

int pmx_autograd_mark_variables(int num_variables, PmxArray* const* variables,
                                PmxArray* const* grads, const int* grad_reqs) {
  PMX_API_BEGIN();
  PMX_CHECK(num_variables == 0 || grad_reqs != nullptr, "mark_variables: grad_reqs is NULL");
  const std::vector<NDArray> grad_arrays = arrays_of(num_variables, grads, "mark_variables");
  std::vector<NDArray*> vars;
  std::vector<pymx::GradReq> reqs;
  for (int i = 0; i < num_variables; ++i) {
    PMX_CHECK(variables[i] != nullptr, "mark_variables: variable ", i, " is NULL");
    const int req = grad_reqs[i];
    PMX_CHECK(req == 0 || req == 1 || req == 3, "mark_variables: grad_req ", req,
              " of variable ", i, " is not 0 (null), 1 (write) or 3 (add)");
    vars.push_back(&variables[i]->array);
    reqs.push_back(static_cast<pymx::GradReq>(req));
  }
  pymx::autograd::mark_variables(vars, grad_arrays, reqs);
  PMX_API_END();
}

int pmx_autograd_backward(int num_heads, PmxArray* const* heads, PmxArray* const* head_grads,
                          int retain_graph, int is_train) {
  PMX_API_BEGIN();
  pymx::autograd::backward(arrays_of(num_heads, heads, "backward"),
                           head_grads_of(num_heads, head_grads), retain_graph != 0,
                           is_train != 0);
  PMX_API_END();
}

int pmx_autograd_grad(int num_heads, PmxArray* const* heads, PmxArray* const* head_grads,
                      int num_variables, PmxArray* const* variables, int retain_graph,
                      int is_train, int create_graph, int* out_num_grads, PmxArray*** out_grads) {
  PMX_API_BEGIN();
  std::vector<NDArray> grads = pymx::autograd::grad(
      arrays_of(num_heads, heads, "grad"), arrays_of(num_variables, variables, "grad"),
      head_grads_of(num_heads, head_grads), retain_graph != 0, is_train != 0, create_graph != 0);
  pymx::c_api::return_arrays(std::move(grads), out_num_grads, out_grads);
  PMX_API_END();
}

int pmx_autograd_get_grad(const PmxArray* variable, PmxArray** out_grad) {
  PMX_API_BEGIN();
  NDArray grad = pymx::autograd::get_grad(array_of(variable));
  *out_grad = grad.is_none() ? nullptr : new_handle(std::move(grad));
  PMX_API_END();
}

int pmx_autograd_detach(const PmxArray* array, PmxArray** out_array) {
  PMX_API_BEGIN();
  NDArray detached = array_of(array);
  detached.autograd_entry() = pymx::AutogradEntry();
  *out_array = new_handle(std::move(detached));
  PMX_API_END();
}

int pmx_autograd_record_function(int num_inputs, PmxArray* const* inputs, int num_outputs,
                                 PmxArray* const* outputs, PmxFunctionGradientFn gradient,
                                 void* user_data, PmxUserDataFree user_data_free,
                                 int* out_recorded, PmxArray*** out_outputs) {
  PMX_API_BEGIN();
  // Owns user_data from here on: freed with the node's gradient function, or on return when no
  // node keeps it (also when a check below throws; shared_ptr frees it if it cannot allocate).
  std::shared_ptr<void> owned_user_data(user_data, [user_data_free](void* data) {
    if (user_data_free) user_data_free(data);
  });
  PMX_CHECK(gradient != nullptr, "pmx_autograd_record_function: gradient is NULL");
  PMX_CHECK(out_recorded != nullptr && out_outputs != nullptr,
            "pmx_autograd_record_function: out_recorded or out_outputs is NULL");
  const std::vector<NDArray> input_arrays = arrays_of(num_inputs, inputs, "autograd.Function");
  std::vector<NDArray> output_arrays = arrays_of(num_outputs, outputs, "autograd.Function");
  auto function_gradient = [gradient, owned_user_data,
                            num_inputs](const std::vector<NDArray>& out_grads) {
    std::vector<PmxArray*> out_grad_handles;
    out_grad_handles.reserve(out_grads.size());
    for (const NDArray& grad : out_grads) out_grad_handles.push_back(new_handle(grad));
    std::vector<PmxArray*> in_grad_handles(num_inputs, nullptr);
    const int status = gradient(owned_user_data.get(), static_cast<int>(out_grad_handles.size()),
                                out_grad_handles.data(), num_inputs, in_grad_handles.data());
    std::vector<NDArray> in_grads(num_inputs);
    for (int i = 0; i < num_inputs; ++i) {
      if (in_grad_handles[i] == nullptr) continue;
      in_grads[i] = std::move(in_grad_handles[i]->array);
      delete in_grad_handles[i];
    }
    if (status != PMX_OK)
      throw pymx::Error(pymx::c_api::status_of_callback(status), pmx_last_error());
    return in_grads;
  };
  const bool recorded = pymx::autograd::record_function(input_arrays, &output_arrays,
                                                        std::move(function_gradient));
  *out_recorded = recorded ? 1 : 0;
  pymx::c_api::return_arrays(std::move(output_arrays), &num_outputs, out_outputs);
  PMX_API_END();
}

int pmx_autograd_share(const PmxArray* array, PmxArray** out_array) {
  PMX_API_BEGIN();
  PMX_CHECK(out_array != nullptr, "pmx_autograd_share: out_array is NULL");
  *out_array = new_handle(array_of(array));
  PMX_API_END();
}

int pmx_graph_is_tracing(int* out_tracing) {
  PMX_API_BEGIN();
  PMX_CHECK(out_tracing != nullptr, "pmx_graph_is_tracing: out_tracing is NULL");
  set_flag(out_tracing, pymx::graph::is_tracing());
  PMX_API_END();
}

int pmx_graph_trace_begin(int num_inputs, PmxArray* const* inputs) {
  PMX_API_BEGIN();
  pymx::graph::begin_trace(arrays_of(num_inputs, inputs, "graph trace"));
  PMX_API_END();
}

int pmx_graph_trace_end(int num_outputs, PmxArray* const* outputs, PmxGraph** out_graph) {
  PMX_API_BEGIN();
  PMX_CHECK(out_graph != nullptr, "pmx_graph_trace_end: out_graph is NULL");
  std::vector<NDArray> arrays;
  try {
    arrays = arrays_of(num_outputs, outputs, "graph trace");
  } catch (...) {
    pymx::graph::abort_trace();  // a bad call must not leave the thread tracing
    throw;
  }
  *out_graph = new PmxGraph{pymx::graph::end_trace(arrays)};
  PMX_API_END();
}

int pmx_graph_trace_abort(void) {
  PMX_API_BEGIN();
  pymx::graph::abort_trace();
  PMX_API_END();
}

int pmx_graph_run(const PmxGraph* graph, int num_inputs, PmxArray* const* inputs,
                  int* out_num_outputs, PmxArray*** out_outputs) {
  PMX_API_BEGIN();
  std::vector<NDArray> outputs = graph_of(graph).run(arrays_of(num_inputs, inputs, "graph run"));
  pymx::c_api::return_arrays(std::move(outputs), out_num_outputs, out_outputs);
  PMX_API_END();
}

int pmx_graph_free(PmxGraph* graph) {
  PMX_API_BEGIN();
  delete graph;
  PMX_API_END();
}

int pmx_graph_set_static_alloc(PmxGraph* graph, int on) {
  PMX_API_BEGIN();
  PMX_CHECK(graph != nullptr && graph->graph, "expected a graph handle, got NULL");
  graph->graph->set_static_alloc(on != 0);
  PMX_API_END();
}

int pmx_graph_info(const PmxGraph* graph, int* out_num_inputs, int* out_num_outputs,
                   int* out_num_nodes, int* out_num_constants) {
  PMX_API_BEGIN();
  const pymx::graph::Graph& g = graph_of(graph);
  *out_num_inputs = static_cast<int>(g.num_inputs());
  *out_num_outputs = static_cast<int>(g.num_outputs());
  *out_num_nodes = static_cast<int>(g.nodes().size());
  *out_num_constants = static_cast<int>(g.constants().size());
  PMX_API_END();
}

int pmx_graph_constants(const PmxGraph* graph, int* out_num, PmxArray*** out_constants) {
  PMX_API_BEGIN();
  std::vector<NDArray> constants = graph_of(graph).constants();
  pymx::c_api::return_arrays(std::move(constants), out_num, out_constants);
  PMX_API_END();
}

int pmx_graph_to_json(const PmxGraph* graph, const char** out_json) {
  PMX_API_BEGIN();
  t_json = graph_of(graph).to_json();
  *out_json = t_json.c_str();
  PMX_API_END();
}

int pmx_graph_from_json(const char* json, PmxGraph** out_graph) {
  PMX_API_BEGIN();
  PMX_CHECK(json != nullptr, "pmx_graph_from_json: json is NULL");
  *out_graph = new PmxGraph{pymx::graph::Graph::from_json(json)};
  PMX_API_END();
}
