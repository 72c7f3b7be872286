// NCCL's ABI as cuda/src/nccl_loader.h declares it, checked at compile time against the real
// nccl.h: the values and sizes of the enums and the type of every entry point the loader
// resolves. Built as a ctest only where nccl.h is found (tests/cpp/CMakeLists.txt); compiling is
// the check, running it only reports.
#include <nccl.h>

#include <cstdio>
#include <type_traits>

#include "abi_check.h"
#include "nccl_loader.h"

namespace ours = pymx::gpu;

template <>
struct abi_check::Ours<::ncclComm_t> {
  using type = ours::ncclComm_t;
};
PMX_ABI_OURS(ours, ncclResult_t)
PMX_ABI_OURS(ours, ncclDataType_t)
PMX_ABI_OURS(ours, ncclRedOp_t)

PMX_ABI_SAME_VALUE(ours, ncclSuccess)
PMX_ABI_SAME_VALUE(ours, ncclInt8)
PMX_ABI_SAME_VALUE(ours, ncclUint8)
PMX_ABI_SAME_VALUE(ours, ncclInt32)
PMX_ABI_SAME_VALUE(ours, ncclInt64)
PMX_ABI_SAME_VALUE(ours, ncclFloat16)
PMX_ABI_SAME_VALUE(ours, ncclFloat32)
PMX_ABI_SAME_VALUE(ours, ncclFloat64)
PMX_ABI_SAME_VALUE(ours, ncclBfloat16)
PMX_ABI_SAME_VALUE(ours, ncclSum)

PMX_ABI_SAME_FUNCTION(ours::NcclApi, ncclGetVersion, get_version)
PMX_ABI_SAME_FUNCTION(ours::NcclApi, ncclCommInitAll, comm_init_all)
PMX_ABI_SAME_FUNCTION(ours::NcclApi, ncclAllReduce, all_reduce)
PMX_ABI_SAME_FUNCTION(ours::NcclApi, ncclGroupStart, group_start)
PMX_ABI_SAME_FUNCTION(ours::NcclApi, ncclGroupEnd, group_end)
PMX_ABI_SAME_FUNCTION(ours::NcclApi, ncclGetErrorString, get_error_string)

int main() {
  std::printf("cuda/src/nccl_loader.h matches nccl.h %d.%d.%d\n", NCCL_MAJOR, NCCL_MINOR,
              NCCL_PATCH);
  return 0;
}
