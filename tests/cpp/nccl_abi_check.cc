// NCCL's ABI as cuda/src/nccl_loader.h declares it, checked at compile time against the real
// nccl.h: the values and sizes of the enums and the type of every entry point the loader
// resolves. Built as a ctest only where nccl.h is found (tests/cpp/CMakeLists.txt); compiling is
// the check, running it only reports.
#include <nccl.h>

#include <cstdio>
#include <type_traits>

#include "nccl_loader.h"

namespace ours = pymx::gpu;

namespace {

// Ours<T>::type: T with nccl.h's enum and communicator types replaced by nccl_loader.h's,
// through pointers, const and function signatures.
template <typename T>
struct Ours {
  using type = T;
};
template <typename T>
struct Ours<T*> {
  using type = typename Ours<T>::type*;
};
template <typename T>
struct Ours<const T> {
  using type = const typename Ours<T>::type;
};
template <typename R, typename... Args>
struct Ours<R (*)(Args...)> {
  using type = typename Ours<R>::type (*)(typename Ours<Args>::type...);
};
template <>
struct Ours<::ncclComm_t> {
  using type = ours::ncclComm_t;
};

// Each of our enums passes as NCCL's.
#define PMX_OURS(name)                                                 \
  template <>                                                          \
  struct Ours<::name> {                                                \
    using type = ours::name;                                           \
  };                                                                   \
  static_assert(sizeof(::name) == sizeof(ours::name), #name " size");  \
  static_assert(alignof(::name) == alignof(ours::name), #name " alignment");
PMX_OURS(ncclResult_t)
PMX_OURS(ncclDataType_t)
PMX_OURS(ncclRedOp_t)
#undef PMX_OURS

#define PMX_SAME_VALUE(name) \
  static_assert(static_cast<long long>(::name) == static_cast<long long>(ours::name), #name);
PMX_SAME_VALUE(ncclSuccess)
PMX_SAME_VALUE(ncclInt8)
PMX_SAME_VALUE(ncclUint8)
PMX_SAME_VALUE(ncclInt32)
PMX_SAME_VALUE(ncclInt64)
PMX_SAME_VALUE(ncclFloat16)
PMX_SAME_VALUE(ncclFloat32)
PMX_SAME_VALUE(ncclFloat64)
PMX_SAME_VALUE(ncclSum)
#undef PMX_SAME_VALUE

// Every entry point the loader resolves has nccl.h's type.
#define PMX_SAME_FUNCTION(nccl_name, member)                                                  \
  static_assert(std::is_same_v<Ours<decltype(&::nccl_name)>::type,                           \
                               decltype(ours::NcclApi::member)>,                              \
                #nccl_name ": nccl_loader.h declares another type");
PMX_SAME_FUNCTION(ncclGetVersion, get_version)
PMX_SAME_FUNCTION(ncclCommInitAll, comm_init_all)
PMX_SAME_FUNCTION(ncclAllReduce, all_reduce)
PMX_SAME_FUNCTION(ncclGroupStart, group_start)
PMX_SAME_FUNCTION(ncclGroupEnd, group_end)
PMX_SAME_FUNCTION(ncclGetErrorString, get_error_string)
#undef PMX_SAME_FUNCTION

}  // namespace

int main() {
  std::printf("cuda/src/nccl_loader.h matches nccl.h %d.%d.%d\n", NCCL_MAJOR, NCCL_MINOR,
              NCCL_PATCH);
  return 0;
}
