// erfinv for the CPU kernel of the erfinv op (erf.cc); the GPU kernel uses CUDA's erfinv.
#pragma once

#include <cmath>
#include <limits>

namespace pymx {
namespace nn {

// Note [Inverse error function]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The C++ library has no erfinv. Giles's single-precision approximation ("Approximating the
// erfinv function", GPU Computing Gems, 2011: two polynomials in w = -log(1 - x^2), relative
// error below 4e-7 for float arguments) starts Newton steps in double that make the result
// exact to double's rounding, for float arguments as for double ones. For a = |x| <= 0.5 they
// solve erf(y) = a (two steps: each squares the relative error). Above, they solve
// log(erfc(y)) = log(1 - a) (1 - a is exact there): erf(y) near 1 has lost the digits that a step
// needs, and the logarithm of the tail is nearly quadratic in y, so Newton converges from the
// polynomial's guess even where double arguments take w past the polynomial's fitted range
// (x = 1 - 2^-52: w = 36), in at most a few steps. erfinv is odd: the sign of x is restored
// last. +-1 give +-inf, |x| > 1 and NaN give NaN.
template <typename A>
A erfinv(A x_in) {
  const double x = static_cast<double>(x_in);
  if (!(std::abs(x) <= 1)) return std::numeric_limits<A>::quiet_NaN();
  if (std::abs(x) == 1) return static_cast<A>(x * std::numeric_limits<double>::infinity());
  double w = -std::log((1.0 - x) * (1.0 + x)), p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = std::sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  const double a = std::abs(x);
  double y = p * a;
  constexpr double kTwoOverSqrtPi = 1.12837916709551257389615890312154;
  if (a <= 0.5) {
    for (int step = 0; step < 2; ++step)
      y -= (std::erf(y) - a) / (kTwoOverSqrtPi * std::exp(-y * y));
  } else {
    const double log_tail = std::log(1.0 - a);
    for (int step = 0; step < 8; ++step) {
      const double tail = std::erfc(y);
      const double delta = (std::log(tail) - log_tail) * tail / (kTwoOverSqrtPi * std::exp(-y * y));
      y += delta;
      if (std::abs(delta) <= 1e-15 * y) break;  // converged: the last step was at rounding level
    }
  }
  return static_cast<A>(std::copysign(y, x));
}

}  // namespace nn
}  // namespace pymx
