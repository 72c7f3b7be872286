// The NCCL all-reduce behind kvstore 'nccl' (pymx/kvstore/nccl.py): one engine op sums a key's
// per-GPU arrays in place.
//
// Note [NCCL all-reduce]
// ~~~~~~~~~~~~~~~~~~~~~~
// nccl_all_reduce(arrays) pushes one engine op that writes every array. It runs on a compute
// worker of the first array's GPU, and the engine orders it as it orders any op: before it runs,
// its stream waits for the events of all the arrays' vars (cudaStreamWaitEvent works across
// devices), and the completion event the worker records on that stream afterwards is what later
// readers and writers of every array wait for, deleters included, so no array's memory is reused
// before the sum is done. A copy between GPUs is ordered the same way (NDArray::copy_to: one op
// on the source GPU's copy stream writes the destination's var).
//
// NCCL needs a stream on each rank's own GPU, so the collective runs on NCCL streams, one per
// physical GPU, joined to the op's stream by events:
//   op stream: record inputs_ready  ->  each rank's NCCL stream waits for it
//   ncclGroupStart; ncclAllReduce per rank on its GPU's NCCL stream; ncclGroupEnd
//   each NCCL stream: record done   ->  the op stream waits for every one
// So all of the collective lies between the op's waits and its completion event, as a kernel on
// the op's own stream would.
//
// Order between collectives. NCCL needs the collectives of a communicator launched in the same
// order on every rank, and collectives of different communicators sharing GPUs deadlock when two
// GPUs run them in opposite orders (each waits inside one for a peer busy in the other). So one
// mutex serialises every launch, and each GPU has a single NCCL stream for all communicators:
// every GPU runs the collectives in the one order in which they were launched. The events are
// reused under the same mutex, which is safe: a wait is enqueued before the mutex is released,
// and recording an event again does not change a wait already enqueued on it.
//
// Communicators: one per distinct ordered list of devices (ncclCommInitAll over their physical
// GPUs), created at the first all-reduce over that list, on the calling thread before anything is
// pushed (so that a failure to load NCCL or to create it is raised by the call itself), and kept
// for the life of the process like the NCCL streams and cuBLAS's handles. A list is refused
// before NCCL sees it when a device appears twice or two devices share one physical GPU (logical
// GPUs, Note [Logical GPUs] in device.cc): a communicator cannot hold a GPU twice.
//
// The engine's GPU workers select their device once, when they start, and NCCL calls switch the
// current device, so every function here restores it (CurrentDeviceGuard).
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "config.h"
#include "cuda_check.h"
#include "nccl_loader.h"
#include "pymx/engine.h"
#include "pymx/gpu.h"
#include "pymx/ndarray.h"

namespace pymx {
namespace gpu {
namespace {

// NCCL's type for a pymx dtype; bool has none (a sum of booleans is not a boolean).
ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return ncclFloat32;
    case DType::kFloat64: return ncclFloat64;
    case DType::kFloat16: return ncclFloat16;
    case DType::kBFloat16:
      PMX_CHECK(nccl().version >= 21000, "NCCL all-reduce of bfloat16 arrays needs NCCL 2.10 or "
                "newer; the loaded one has version code ", nccl().version,
                ": upgrade nvidia-nccl-cu13, or use kvstore 'device'");
      return ncclBfloat16;
    case DType::kUint8: return ncclUint8;
    case DType::kInt32: return ncclInt32;
    case DType::kInt8: return ncclInt8;
    case DType::kInt64: return ncclInt64;
    case DType::kBool: break;
  }
  PMX_THROW(Status::kType, "NCCL all-reduce cannot sum arrays of dtype ", dtype_name(dtype),
            "; cast them to a numeric dtype first");
}

std::string devices_text(const std::vector<int>& device_ids) {
  std::string text = "[";
  for (size_t i = 0; i < device_ids.size(); ++i)
    text += str_cat(i == 0 ? "" : ", ", Device::gpu(device_ids[i]));
  return text + "]";
}

// The physical GPU of each device. Refuses (Error(kInvalidArg)) a device that does not exist, a
// device listed twice, and two devices on one physical GPU.
std::vector<int> physical_gpus(const std::vector<int>& device_ids) {
  std::vector<int> physical;
  for (size_t i = 0; i < device_ids.size(); ++i) {
    physical.push_back(physical_device(device_ids[i]));
    for (size_t j = 0; j < i; ++j) {
      PMX_CHECK(device_ids[j] != device_ids[i], "NCCL all-reduce over ",
                devices_text(device_ids), ": ", Device::gpu(device_ids[i]),
                " is listed twice; give one array per GPU");
      PMX_CHECK(physical[j] != physical[i], "NCCL all-reduce over ", devices_text(device_ids),
                ": ", Device::gpu(device_ids[j]), " and ", Device::gpu(device_ids[i]),
                " are both physical GPU ", physical[i], " (PYMX_LOGICAL_GPUS_PER_GPU=",
                config().logical_gpus_per_gpu,
                " splits each GPU), and NCCL needs a different physical GPU for each device; "
                "use kvstore 'device' over logical GPUs");
    }
  }
  return physical;
}

// Restores the calling thread's current device when it goes out of scope (see the Note).
class CurrentDeviceGuard {
 public:
  CurrentDeviceGuard() { PMX_CUDA_CHECK(cudaGetDevice(&device_)); }
  ~CurrentDeviceGuard() { PMX_CUDA_IGNORE(cudaSetDevice(device_)); }
  CurrentDeviceGuard(const CurrentDeviceGuard&) = delete;
  CurrentDeviceGuard& operator=(const CurrentDeviceGuard&) = delete;

 private:
  int device_ = 0;
};

// The NCCL stream of one physical GPU and the events that join it to an op's stream there.
struct NcclLane {
  cudaStream_t stream = nullptr;
  cudaEvent_t inputs_ready = nullptr;  // recorded on an op's stream of this GPU
  cudaEvent_t done = nullptr;          // recorded on `stream` after a collective
};

// The lane of `device_id`'s physical GPU; throws, having freed what it created, on failure.
NcclLane create_lane(int device_id) {
  NcclLane lane;
  try {
    lane.stream = static_cast<cudaStream_t>(create_stream(device_id));
    lane.inputs_ready = static_cast<cudaEvent_t>(create_event(device_id));
    lane.done = static_cast<cudaEvent_t>(create_event(device_id));
  } catch (...) {
    destroy_event(device_id, lane.done);
    destroy_event(device_id, lane.inputs_ready);
    destroy_stream(device_id, lane.stream);
    throw;
  }
  return lane;
}

// Communicators and lanes, created at first use and never freed; see the Note. Thread-safe.
class NcclState {
 public:
  static NcclState& get() {
    static auto* state = new NcclState();  // never destroyed: NCCL may be gone at exit
    return *state;
  }

  // The communicators of `device_ids` (rank i on gpu(device_ids[i]), physical GPU physical[i]),
  // created and cached at the first call for that list. Blocking.
  std::vector<ncclComm_t> communicators(const std::vector<int>& device_ids,
                                        const std::vector<int>& physical) {
    const NcclApi& api = nccl();
    std::lock_guard<std::mutex> lock(mu_);
    auto it = communicators_.find(device_ids);
    if (it != communicators_.end()) return it->second;
    CurrentDeviceGuard restore_device;
    for (size_t i = 0; i < device_ids.size(); ++i) {
      if (lanes_.count(physical[i]) == 0) lanes_.emplace(physical[i], create_lane(device_ids[i]));
    }
    std::vector<ncclComm_t> comms(device_ids.size(), nullptr);
    const std::string call = str_cat("ncclCommInitAll over ", devices_text(device_ids));
    check_nccl(api.comm_init_all(comms.data(), static_cast<int>(comms.size()), physical.data()),
               call.c_str());
    communicators_.emplace(device_ids, comms);
    return comms;
  }

  // Enqueues the in-place sum of the `count` elements at buffers[i] (rank i of `comms`, on
  // physical GPU physical[i]) after the work on `op_stream` (a stream of physical[0]), and makes
  // `op_stream` wait for it. Called from the op, on its worker.
  void all_reduce(const std::vector<ncclComm_t>& comms, const std::vector<int>& physical,
                  const std::vector<void*>& buffers, size_t count, ncclDataType_t type,
                  cudaStream_t op_stream) {
    const NcclApi& api = nccl();
    std::lock_guard<std::mutex> lock(mu_);
    CurrentDeviceGuard restore_device;
    const cudaEvent_t inputs_ready = lanes_.at(physical[0]).inputs_ready;
    PMX_CUDA_CHECK(cudaSetDevice(physical[0]));
    PMX_CUDA_CHECK(cudaEventRecord(inputs_ready, op_stream));
    for (int gpu : physical) {
      PMX_CUDA_CHECK(cudaSetDevice(gpu));
      PMX_CUDA_CHECK(cudaStreamWaitEvent(lanes_.at(gpu).stream, inputs_ready, 0));
    }
    check_nccl(api.group_start(), "ncclGroupStart");
    ncclResult_t result = ncclSuccess;
    for (size_t i = 0; i < comms.size() && result == ncclSuccess; ++i) {
      result = api.all_reduce(buffers[i], buffers[i], count, type, ncclSum, comms[i],
                              lanes_.at(physical[i]).stream);
    }
    const ncclResult_t ended = api.group_end();  // closes the group also after a failed call
    check_nccl(result, "ncclAllReduce");
    check_nccl(ended, "ncclGroupEnd");
    for (int gpu : physical) {
      const NcclLane& lane = lanes_.at(gpu);
      PMX_CUDA_CHECK(cudaSetDevice(gpu));
      PMX_CUDA_CHECK(cudaEventRecord(lane.done, lane.stream));
    }
    PMX_CUDA_CHECK(cudaSetDevice(physical[0]));
    for (int gpu : physical) PMX_CUDA_CHECK(cudaStreamWaitEvent(op_stream, lanes_.at(gpu).done, 0));
  }

 private:
  std::mutex mu_;  // held for every communicator creation and every launch (see the Note)
  std::map<std::vector<int>, std::vector<ncclComm_t>> communicators_;  // guarded by mu_
  std::map<int, NcclLane> lanes_;  // physical GPU -> its lane; guarded by mu_
};

}  // namespace

void nccl_all_reduce(const std::vector<NDArray>& arrays) {
  PMX_CHECK(!arrays.empty(), "NCCL all-reduce: no arrays given");
  const NDArray& first = arrays[0];
  std::vector<int> device_ids;
  for (const NDArray& a : arrays) {
    PMX_CHECK(!a.is_none(), "NCCL all-reduce: got a none array");
    PMX_CHECK(a.device().is_gpu(), "NCCL all-reduce sums arrays on GPUs, but got one on ",
              a.device());
    PMX_CHECK(a.shape() == first.shape() && a.dtype() == first.dtype(),
              "NCCL all-reduce needs arrays of one shape and dtype, but got ",
              shape_str(first.shape()), " ", dtype_name(first.dtype()), " on ", first.device(),
              " and ", shape_str(a.shape()), " ", dtype_name(a.dtype()), " on ", a.device());
    device_ids.push_back(a.device().id);
  }
  const ncclDataType_t type = nccl_type(first.dtype());
  const std::vector<int> physical = physical_gpus(device_ids);
  if (first.size() == 0) return;
  const std::vector<ncclComm_t> comms = NcclState::get().communicators(device_ids, physical);
  std::vector<VarHandle> vars;
  for (const NDArray& a : arrays) vars.push_back(a.var());
  const size_t count = static_cast<size_t>(first.size());
  Engine::get()->push_sync(
      [comms, physical, arrays, count, type](RunContext ctx) {
        // The addresses are taken here, after the ops writing the arrays have run: a gradient
        // is allocated by the op that first writes it, on that op's stream (Note [Allocation at
        // first use]), not by this push on the calling thread.
        std::vector<void*> buffers;
        for (const NDArray& a : arrays) buffers.push_back(a.blob().dptr);
        NcclState::get().all_reduce(comms, physical, buffers, count, type,
                                    static_cast<cudaStream_t>(ctx.stream));
      },
      first.device(), {}, vars, FnProperty::kNormal, 0, "nccl_all_reduce");
}

}  // namespace gpu
}  // namespace pymx
