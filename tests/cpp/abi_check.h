// What the compile-time ABI checks (cudnn_, nccl_ and cublas_abi_check.cc) share: comparing a
// library's types, as its real header declares them, with pymx's own declarations of them in
// cuda/src/*_loader.h.
#pragma once

#include <type_traits>

namespace abi_check {

// Ours<T>::type: T with the real header's types replaced by pymx's declarations, through
// pointers, const and function signatures. Each check specialises it for its library's types
// (PMX_ABI_OURS); types both declare alike (handles, cudaStream_t) stay as they are.
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

}  // namespace abi_check

// The real header's ::name is pymx's ours_ns::name, with the same size and alignment.
#define PMX_ABI_OURS(ours_ns, name)                                          \
  template <>                                                                \
  struct abi_check::Ours<::name> {                                           \
    using type = ours_ns::name;                                              \
  };                                                                         \
  static_assert(sizeof(::name) == sizeof(ours_ns::name), #name " size");     \
  static_assert(alignof(::name) == alignof(ours_ns::name), #name " alignment");

// The real header's constant ::name has pymx's value.
#define PMX_ABI_SAME_VALUE(ours_ns, name)                                                   \
  static_assert(static_cast<long long>(::name) == static_cast<long long>(ours_ns::name), \
                #name);

// The real header's function ::function has the type of pymx's member ours_api::member.
#define PMX_ABI_SAME_FUNCTION(ours_api, function, member)                                  \
  static_assert(std::is_same_v<abi_check::Ours<decltype(&::function)>::type,               \
                               decltype(ours_api::member)>,                                \
                #function ": pymx declares another type");
