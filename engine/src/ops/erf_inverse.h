// erfinv for the CPU kernel of the erfinv op (erf.cc); the GPU kernel uses CUDA's erfinv.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "ops/vector_math.h"

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

// Giles's polynomial guess at erfinv(x) / x from w = -log(1 - x^2) (Note [Inverse error function]).
inline double erfinv_guess_ratio(double w) {
  double p;
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
  return p;
}

constexpr double kErfinvTwoOverSqrtPi = 1.12837916709551257389615890312154;
// |x| up to which the Newton steps solve erf(y) = |x|; above, log(erfc(y)) = log(1 - |x|).
constexpr double kErfinvCentral = 0.5;
constexpr int kErfinvCentralSteps = 2;
constexpr int kErfinvMaxTailSteps = 8;

// Whether the tail's Newton step `delta` from y was at rounding level: the element is done.
inline bool erfinv_converged(double delta, double y) { return std::abs(delta) <= 1e-15 * y; }

template <typename A>
A erfinv(A x_in) {
  const double x = static_cast<double>(x_in);
  if (!(std::abs(x) <= 1)) return std::numeric_limits<A>::quiet_NaN();
  if (std::abs(x) == 1) return static_cast<A>(x * std::numeric_limits<double>::infinity());
  const double a = std::abs(x);
  double y = erfinv_guess_ratio(-std::log((1.0 - a) * (1.0 + a))) * a;
  if (a <= kErfinvCentral) {
    for (int step = 0; step < kErfinvCentralSteps; ++step)
      y -= (std::erf(y) - a) / (kErfinvTwoOverSqrtPi * std::exp(-y * y));
  } else {
    const double log_tail = std::log(1.0 - a);
    for (int step = 0; step < kErfinvMaxTailSteps; ++step) {
      const double tail = std::erfc(y);
      const double delta =
          (std::log(tail) - log_tail) * tail / (kErfinvTwoOverSqrtPi * std::exp(-y * y));
      y += delta;
      if (erfinv_converged(delta, y)) break;
    }
  }
  return static_cast<A>(std::copysign(y, x));
}

// Elements erfinv_vector takes at a time: its buffers live on the stack.
constexpr int64_t kErfinvBlock = 256;

// Whether this machine's libmvec has the double routines erfinv_vector calls.
inline bool has_vector_erfinv() {
  using ops::MathFn;
  using ops::has_vector_math;
  for (MathFn fn : {MathFn::kLog, MathFn::kExp, MathFn::kErf, MathFn::kErfc})
    if (!has_vector_math<double>(fn)) return false;
  return true;
}

// Note [Inverse error function on vectors]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// erfinv's scalar steps (Note [Inverse error function]) call log, erf, erfc and exp 6-30 times
// an element: 70 ns. erfinv_vector runs the same steps with libmvec's double routines over the
// elements of a block: the central ones (|x| <= 0.5) gathered into one span and the tail ones
// into another, so that each span runs one branch's calls. A tail element stops stepping at its
// own convergence test, as in the scalar loop, and keeps its value while the span's slower
// elements go on, so every result is a function of its element alone, wherever the block starts.
// libmvec's erf and erfc are within 2-4 ulp where the scalar ones are within 1: the Newton steps
// converge to where libmvec's function equals the target, which libm's erf puts a few ulp away
// in double (erf(y) 4.0e-16 from x on central arguments, measured); a last step by the scalar
// routines corrects that (double only: its scalar calls cost as much again as the vector steps,
// and bring the result back to the scalar loop's accuracy, 2.2e-16). A float's result is
// rounded from double, 29 bits below its own last place: libmvec's steps suffice, and two tail
// steps from the polynomial's 4e-7 (which holds over float's whole range) reach double's
// rounding; the third that the convergence test takes would only confirm it.

// y = erfinv(x) for n <= kErfinvBlock elements computed in double (Note [Inverse error function
// on vectors]), for float arguments (converted exactly) or double ones (`for_double`: the tail's
// steps until converged, and the last step by libm's routines). x and y may be the same buffer.
inline void erfinv_vector(const double* x, double* y, int64_t n, bool for_double) {
  using ops::MathFn;
  using ops::vector_math;
  int64_t central[kErfinvBlock], tail[kErfinvBlock];
  int64_t n_central = 0, n_tail = 0;
  double a[kErfinvBlock], r[kErfinvBlock], t[kErfinvBlock], u[kErfinvBlock];
  for (int64_t i = 0; i < n; ++i) {
    const double ai = std::abs(x[i]);
    a[i] = ai < 1 ? ai : 0;  // +-1, outside and NaN: a placeholder, their results are set last
    t[i] = (1.0 - a[i]) * (1.0 + a[i]);
  }
  vector_math(MathFn::kLog, t, t, n);
  for (int64_t i = 0; i < n; ++i) {
    r[i] = erfinv_guess_ratio(-t[i]) * a[i];
    // Without a branch: central and tail elements alternate at random in typical data.
    const bool is_central = a[i] <= kErfinvCentral;
    central[n_central] = i;
    tail[n_tail] = i;
    n_central += is_central;
    n_tail += !is_central;
  }
  // Central: y -= (erf(y) - a) / (2 / sqrt(pi) exp(-y^2)), the spans gathered into g.
  double g[kErfinvBlock], target[kErfinvBlock];
  for (int64_t k = 0; k < n_central; ++k) {
    g[k] = r[central[k]];
    target[k] = a[central[k]];
  }
  for (int step = 0; step < kErfinvCentralSteps; ++step) {
    for (int64_t k = 0; k < n_central; ++k) u[k] = -g[k] * g[k];
    vector_math(MathFn::kExp, u, u, n_central);
    vector_math(MathFn::kErf, g, t, n_central);
    for (int64_t k = 0; k < n_central; ++k)
      g[k] -= (t[k] - target[k]) / (kErfinvTwoOverSqrtPi * u[k]);
  }
  for (int64_t k = 0; k < n_central; ++k) r[central[k]] = g[k];
  // Tail: y += (log(erfc(y)) - log(1 - a)) erfc(y) / (2 / sqrt(pi) exp(-y^2)), each element
  // until its own step is at rounding level.
  bool done[kErfinvBlock];
  for (int64_t k = 0; k < n_tail; ++k) {
    g[k] = r[tail[k]];
    target[k] = 1.0 - a[tail[k]];  // exact above 0.5
    done[k] = false;
  }
  vector_math(MathFn::kLog, target, target, n_tail);
  double tails[kErfinvBlock];
  int64_t active = n_tail;
  const int max_tail_steps = for_double ? kErfinvMaxTailSteps : 2;
  for (int step = 0; step < max_tail_steps && active > 0; ++step) {
    for (int64_t k = 0; k < n_tail; ++k) u[k] = -g[k] * g[k];
    vector_math(MathFn::kExp, u, u, n_tail);
    vector_math(MathFn::kErfc, g, tails, n_tail);
    vector_math(MathFn::kLog, tails, t, n_tail);
    active = 0;
    for (int64_t k = 0; k < n_tail; ++k) {
      if (done[k]) continue;
      const double delta = (t[k] - target[k]) * tails[k] / (kErfinvTwoOverSqrtPi * u[k]);
      g[k] += delta;
      done[k] = erfinv_converged(delta, g[k]);
      active += !done[k];
    }
  }
  for (int64_t k = 0; k < n_tail; ++k) r[tail[k]] = g[k];
  for (int64_t i = 0; i < n; ++i) {
    const double xi = x[i];
    if (!(std::abs(xi) < 1)) {
      y[i] = std::abs(xi) == 1 ? xi * std::numeric_limits<double>::infinity()
                               : std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    double yi = r[i];
    if (for_double) {
      if (a[i] <= kErfinvCentral) {
        yi -= (std::erf(yi) - a[i]) / (kErfinvTwoOverSqrtPi * std::exp(-yi * yi));
      } else {
        const double tail_value = std::erfc(yi);
        yi += (std::log(tail_value) - std::log(1.0 - a[i])) * tail_value /
              (kErfinvTwoOverSqrtPi * std::exp(-yi * yi));
      }
    }
    y[i] = std::copysign(yi, xi);
  }
}

}  // namespace nn
}  // namespace pymx
