// Native autograd: a tape recorded by invoke() while recording is on, and a backward pass that
// pushes gradient ops to the engine. Recording and training flags are thread-local.
#pragma once

#include <vector>

#include "pymx/ndarray.h"
#include "pymx/op.h"

namespace pymx {
namespace autograd {

bool is_recording();
bool set_recording(bool on);  // returns the previous value
bool is_training();
bool set_training(bool on);   // returns the previous value

// Makes each `*variables[i]` a leaf whose gradient goes to `grads[i]` (same shape and device)
// according to `reqs[i]`. The mark lives in the array's autograd entry, so it is seen by every
// copy of that NDArray made afterwards (a C handle holds one copy). Replaces an earlier mark.
void mark_variables(const std::vector<NDArray*>& variables, const std::vector<NDArray>& grads,
                    const std::vector<GradReq>& reqs);
// The gradient buffer of a marked variable (none when unmarked).
NDArray get_grad(const NDArray& variable);

// Whether backward has written or added a gradient into this marked variable's buffer since it
// was marked or the flag was last cleared (MXNet's fresh_out_grad, which Gluon's Trainer uses to
// detect stale gradients). False for an unmarked array.
bool fresh_grad(const NDArray& variable);
// Throws Error(kInvalidArg) when the array is not a marked variable.
void set_fresh_grad(const NDArray& variable, bool fresh);

// Called by invoke() before pushing an op that writes into out= arrays while recording: throws
// Error(kInvalidArg) with MXNet's message when the op will be recorded and one of `outputs` is
// already in the recorded graph (an in-place op such as +=, or y[idx] = x, on a recorded
// array), since the earlier ops' gradients would read the overwritten values.
void check_recorded_outputs(const OpDef& op, const NDArray* const* inputs, int num_inputs,
                            const std::vector<NDArray>& outputs);

// Called by invoke() after pushing an op: records it when recording is on and any input needs a
// gradient. Cheap when recording is off. `is_train` is the train mode the op ran in; its
// gradient is computed in the same mode.
void record_op(const OpDef& op, const Attrs& attrs, const NDArray* const* inputs,
               int num_inputs, std::vector<NDArray>* outputs, bool is_train);

// Back-propagates from `heads` (head_grads[i] none: ones) into the marked variables' gradient
// buffers (write or add per grad_req), marking them fresh. Frees the tape unless retain_graph.
// Each op's gradient runs in the train mode the op was recorded in; `is_train` is the mode of
// the rest (the ops that sum and store gradients). Never waits: the
// gradient ops are pushed to the engine. Throws Error(kInvalidArg) with MXNet's message when a
// head was not recorded or its graph was already freed, and naming the op when one on the path
// has no gradient.
void backward(const std::vector<NDArray>& heads, const std::vector<NDArray>& head_grads,
              bool retain_graph, bool is_train);

// Returns d(heads)/d(variables) without touching the variables' gradient buffers. Each variable
// must be marked; one that the heads do not depend on gets zeros. With create_graph the gradient
// ops are themselves recorded, so the results can be differentiated again.
std::vector<NDArray> grad(const std::vector<NDArray>& heads, const std::vector<NDArray>& variables,
                          const std::vector<NDArray>& head_grads, bool retain_graph, bool is_train,
                          bool create_graph = false);

}  // namespace autograd
}  // namespace pymx
