// NCCL, loaded with dlopen at first use. It is never linked: CPU and single-GPU users should not
// have to install its 330 MB, and the toolkit ships no nccl.h. We declare the few types and entry
// points we call ourselves. Their values and signatures are those of NCCL's public header
// (NVIDIA/nccl src/nccl.h.in, checked at commit 021e804, the header of NCCL 2.31: its
// ncclConfig_t is ncclConfig_v23100). All of them exist since NCCL 2.3.4 (ncclGetVersion; the
// rest since 2.0) and have kept their C ABI; later releases only appended enumerators and
// functions.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace pymx {
namespace gpu {

using ncclComm_t = struct ncclComm*;
// NCCL's enums are plain C enums. A fixed int underlying type gives them the same size and lets
// them hold any value the library returns.
enum ncclResult_t : int { ncclSuccess = 0 };
enum ncclDataType_t : int {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt64 = 4,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9,
};
enum ncclRedOp_t : int { ncclSum = 0 };

struct NcclApi {
  ncclResult_t (*get_version)(int* version);
  ncclResult_t (*comm_init_all)(ncclComm_t* comms, int ndev, const int* devlist);
  ncclResult_t (*all_reduce)(const void* sendbuff, void* recvbuff, size_t count,
                             ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                             cudaStream_t stream);
  ncclResult_t (*group_start)();
  ncclResult_t (*group_end)();
  const char* (*get_error_string)(ncclResult_t result);
  int version = 0;  // NCCL_VERSION_CODE of the loaded library
};

// The loaded API. The first call loads the library; when that fails it throws Error(kCuda) naming
// the library and the places searched, and the next call tries again. Thread-safe.
const NcclApi& nccl();

// Throws Error(kCuda) naming the call, the result, NCCL's text for it and NCCL's version when
// `result` is not ncclSuccess.
void check_nccl(ncclResult_t result, const char* call);

}  // namespace gpu
}  // namespace pymx
