// The digamma function psi(x) = d/dx ln|Gamma(x)|, shared by the CPU (gamma.cc) and CUDA
// (cuda/src/gamma.cu) kernels: it is the derivative of gammaln and, times Gamma(x), of gamma.
//
// For x >= 10 the asymptotic series
//   psi(x) = ln x - 1/(2x) - sum_k B_2k / (2k x^2k)
// to k = 7 (B_2k the Bernoulli numbers) errs by less than its next term, 3617/(8160 x^16) <=
// 5e-17: double precision. Smaller positive x climb there by the recurrence
// psi(x) = psi(x + 1) - 1/x, and negative x reflect by psi(x) = psi(1 - x) - pi / tan(pi x),
// with tan evaluated on x's fractional part (tan has period pi, so this is exact and keeps the
// argument small). The poles, 0 and the negative integers, give NaN; NaN gives NaN, +inf gives
// +inf.
#pragma once

#include <cmath>

#include "ops/host_device.h"

namespace pymx {
namespace ops {

template <typename A>
PMX_HOST_DEVICE A digamma(A x) {
  using std::floor;
  using std::log;
  using std::tan;
  constexpr A kPi = A(3.14159265358979323846264338327950288);
  A result = A(0);
  if (x <= A(0)) {
    const A fraction = x - floor(x);
    if (fraction == A(0)) return A(NAN);  // a pole
    result = -kPi / tan(kPi * fraction);
    x = A(1) - x;
  }
  while (x < A(10)) {
    result -= A(1) / x;
    x += A(1);
  }
  const A inv2 = A(1) / (x * x);
  // Horner form of sum_k B_2k / (2k) inv2^k for k = 1..7.
  const A series =
      inv2 * (A(1) / A(12) -
              inv2 * (A(1) / A(120) -
                      inv2 * (A(1) / A(252) -
                              inv2 * (A(1) / A(240) -
                                      inv2 * (A(1) / A(132) -
                                              inv2 * (A(691) / A(32760) - inv2 * (A(1) / A(12))))))));
  return result + log(x) - A(0.5) / x - series;
}

}  // namespace ops
}  // namespace pymx
