// The per-element rejection samplers of the random_gamma, random_beta, random_poisson and
// random_binomial ops, one definition for the CPU kernels (random_distributions.cc) and the GPU
// kernels (cuda/src/random_distributions.cu), so that both run the same algorithm on the same
// numbers. All arithmetic is in double; a sampler returns its draw as a double (counts are exact
// integers below 2^53).
//
// | sampler         | algorithm                                                                 |
// |-----------------|---------------------------------------------------------------------------|
// | sample_gamma    | Marsaglia and Tsang (2000); for alpha < 1, Gamma(alpha + 1) * U^(1/alpha) |
// | sample_beta     | 1 / (1 + Y / X), X ~ Gamma(a), Y ~ Gamma(b), Y / X from log-gamma draws   |
// | sample_poisson  | lam < 10: inversion by sequential multiplication of uniforms;             |
// |                 | lam >= 10: Hoermann's PTRS, transformed rejection with squeeze (1993)     |
// | sample_binomial | n min(p, 1-p) < 10: inversion (sequential search of the CDF);             |
// |                 | otherwise Hoermann's BTRS (1993); p > 1/2 samples n - Binomial(n, 1 - p)  |
//
// Invalid parameters (alpha < 0, a or b <= 0, lam < 0, n < 0, p outside [0, 1], NaN) give NaN:
// callers check parameters before they launch (pymx.np.random does); the kernels only must not
// loop forever.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "ops/host_device.h"

namespace pymx {
namespace rng {

// splitmix64's finaliser: a bijective mix of 64 bits, the hash of every counter-based stream.
PMX_HOST_DEVICE uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Note [Per-element random streams]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A rejection sampler needs an unbounded number of uniforms per element. Element i of an op
// with seed s draws its j-th 64 bits as hash(hash(s, i), j), with hash(a, b) =
// splitmix(a ^ splitmix(b)) (random.cc's counter-based generator), so every element owns an
// endless stream that depends only on (s, i): results are the same whatever the thread count,
// the order elements run in, or the device, and a rejection in one element never shifts the
// numbers of another.
class ElementStream {
 public:
  PMX_HOST_DEVICE ElementStream(uint64_t seed, uint64_t element)
      : key_(splitmix(seed ^ splitmix(element))) {}

  // Uniform in [0, 1) with 53 random bits.
  PMX_HOST_DEVICE double uniform() {
    return static_cast<double>(splitmix(key_ ^ splitmix(next_++)) >> 11) * 0x1.0p-53;
  }

  // Standard normal (Box-Muller on two uniforms; 1 - u keeps the logarithm finite).
  PMX_HOST_DEVICE double normal() {
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return ::sqrt(-2.0 * ::log(u1)) * ::cos(6.283185307179586476925286766559 * u2);
  }

 private:
  uint64_t key_;
  uint64_t next_ = 0;
};

PMX_HOST_DEVICE double quiet_nan() { return __builtin_nan(""); }

// Neither infinite nor NaN (one expression for host and device code).
PMX_HOST_DEVICE bool is_finite(double x) { return x - x == 0; }

// A count (or NaN, for invalid parameters) in the integer type T: NaN gives -1, and counts beyond
// T's range saturate at its maximum (the plain conversion would be undefined).
template <typename T>
PMX_HOST_DEVICE T to_count(double v) {
  constexpr T top = std::numeric_limits<T>::max();
  if (v != v) return T(-1);
  return v >= static_cast<double>(top) ? top : static_cast<T>(v);
}

// Gamma(a, 1) for a >= 1 by Marsaglia and Tsang: it accepts about 95% of proposals or more, so
// the loop ends after a few draws.
PMX_HOST_DEVICE double marsaglia_tsang(double a, ElementStream& s) {
  const double d = a - 1.0 / 3.0, c = 1.0 / ::sqrt(9.0 * d);
  double x, v;
  for (;;) {
    do {
      x = s.normal();
      v = 1.0 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = s.uniform(), x2 = x * x;
    if (u < 1.0 - 0.0331 * x2 * x2) break;  // the squeeze: no logarithm needed
    if (::log(u) < 0.5 * x2 + d * (1.0 - v + ::log(v))) break;
  }
  return d * v;
}

// Gamma(alpha, 1); Gamma(0) is the point mass at 0, as NumPy samples it. For alpha < 1 the boost:
// if G ~ Gamma(alpha + 1) and U ~ U(0, 1], G U^(1/alpha) ~ Gamma(alpha).
PMX_HOST_DEVICE double sample_gamma(double alpha, ElementStream& s) {
  if (!(alpha >= 0)) return quiet_nan();
  if (alpha == 0) return 0;
  if (alpha >= 1) return marsaglia_tsang(alpha, s);
  const double g = marsaglia_tsang(alpha + 1, s);
  return g * ::exp(::log(1.0 - s.uniform()) / alpha);
}

// The logarithm of a Gamma(alpha, 1) draw (alpha > 0), finite even where the draw itself
// underflows: for alpha = 1e-3 about half of all draws are below the smallest double.
PMX_HOST_DEVICE double sample_log_gamma(double alpha, ElementStream& s) {
  if (alpha >= 1) return ::log(marsaglia_tsang(alpha, s));
  const double g = marsaglia_tsang(alpha + 1, s);
  return ::log(g) + ::log(1.0 - s.uniform()) / alpha;
}

// Beta(a, b) = X / (X + Y) = 1 / (1 + Y / X) for X ~ Gamma(a), Y ~ Gamma(b), with Y / X taken
// from the logarithms, so that small a and b (both draws underflowing) still give a number.
PMX_HOST_DEVICE double sample_beta(double a, double b, ElementStream& s) {
  if (!(a > 0) || !(b > 0)) return quiet_nan();
  const double log_x = sample_log_gamma(a, s), log_y = sample_log_gamma(b, s);
  return 1.0 / (1.0 + ::exp(log_y - log_x));
}

// log(k!) - [(k + 1/2) log(k + 1) - (k + 1) + log(2 pi) / 2], the error of Stirling's formula
// for log(k!): exact through lgamma for small k, the asymptotic series (error below 1e-16)
// from k = 10 on, where lgamma's digits would cancel.
PMX_HOST_DEVICE double stirling_tail(double k) {
  constexpr double kHalfLog2Pi = 0.91893853320467274178032973640562;
  const double k1 = k + 1.0;
  if (k < 10) return ::lgamma(k1) - ((k + 0.5) * ::log(k1) - k1 + kHalfLog2Pi);
  const double k1sq = k1 * k1;
  return (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / k1sq) / k1sq) / k1;
}

// Poisson(lam).
PMX_HOST_DEVICE double sample_poisson(double lam, ElementStream& s) {
  if (!(lam >= 0) || !is_finite(lam)) return quiet_nan();
  if (lam < 10) {
    // The count of uniforms whose running product stays above exp(-lam): lam + 1 draws on average.
    const double limit = ::exp(-lam);
    double product = s.uniform(), k = 0;
    while (product > limit) {
      product *= s.uniform();
      k += 1;
    }
    return k;
  }
  // PTRS: the hat is a transformed uniform; at lam >= 10 it accepts about 90% of draws, most of
  // them through the squeeze.
  const double slam = ::sqrt(lam), loglam = ::log(lam);
  const double b = 0.931 + 2.53 * slam, a = -0.059 + 0.02483 * b;
  const double inv_alpha = 1.1239 + 1.1328 / (b - 3.4), vr = 0.9277 - 3.6224 / (b - 2);
  for (;;) {
    const double u = s.uniform() - 0.5, v = s.uniform();
    const double us = 0.5 - ::fabs(u);
    const double k = ::floor((2 * a / us + b) * u + lam + 0.43);
    if (us >= 0.07 && v <= vr) return k;
    if (k < 0 || (us < 0.013 && v > us)) continue;
    if (::log(v) + ::log(inv_alpha) - ::log(a / (us * us) + b) <=
        -lam + k * loglam - ::lgamma(k + 1))
      return k;
  }
}

// Binomial(n, p) for p <= 1/2 and n p < 10: walk the CDF from 0 with one uniform. A walk past
// `bound` (mean + 10 standard deviations: probability below 1e-20, but the recursion's rounding
// could otherwise run on) starts over with a fresh uniform.
PMX_HOST_DEVICE double binomial_inversion(double n, double p, ElementStream& s) {
  const double q = 1.0 - p, ratio = p / q;
  const double p0 = ::exp(n * ::log1p(-p));  // P(X = 0) >= e^-14 here: no underflow
  const double bound = ::fmin(n, n * p + 10.0 * ::sqrt(n * p * q + 1.0));
  for (;;) {
    double u = s.uniform(), k = 0, pk = p0;
    while (u > pk && k <= bound) {
      u -= pk;
      k += 1;
      pk *= ratio * (n - k + 1) / k;
    }
    if (k <= bound) return k;
  }
}

// Binomial(n, p) for p <= 1/2 and n p >= 10: BTRS, transformed rejection with squeeze. The
// acceptance test compares against log(f(k) / f(m)), f the probability mass and m the mode,
// written with Stirling's formula and its tail so that no large logarithms cancel.
PMX_HOST_DEVICE double binomial_btrs(double n, double p, ElementStream& s) {
  const double q = 1.0 - p, spq = ::sqrt(n * p * q);
  const double b = 1.15 + 2.53 * spq, a = -0.0873 + 0.0248 * b + 0.01 * p, c = n * p + 0.5;
  const double vr = 0.92 - 4.2 / b, alpha = (2.83 + 5.1 / b) * spq, r = p / q;
  const double m = ::floor((n + 1) * p);
  for (;;) {
    const double u = s.uniform() - 0.5, v = s.uniform();
    const double us = 0.5 - ::fabs(u);
    const double k = ::floor((2 * a / us + b) * u + c);
    if (us >= 0.07 && v <= vr) return k;
    if (k < 0 || k > n) continue;
    const double log_ratio = (m + 0.5) * ::log((m + 1) / (r * (n - m + 1))) +
                             (n + 1) * ::log1p((k - m) / (n - k + 1)) +
                             (k + 0.5) * ::log(r * (n - k + 1) / (k + 1)) + stirling_tail(m) +
                             stirling_tail(n - m) - stirling_tail(k) - stirling_tail(n - k);
    if (::log(v * alpha / (a / (us * us) + b)) <= log_ratio) return k;
  }
}

// Binomial(n, p); n is a non-negative integer held in a double.
PMX_HOST_DEVICE double sample_binomial(double n, double p, ElementStream& s) {
  if (!(n >= 0) || !is_finite(n) || !(p >= 0 && p <= 1)) return quiet_nan();
  if (n == 0 || p == 0) return 0;
  if (p == 1) return n;
  const bool flip = p > 0.5;  // both algorithms want p <= 1/2
  const double small_p = flip ? 1.0 - p : p;
  const double k =
      n * small_p < 10 ? binomial_inversion(n, small_p, s) : binomial_btrs(n, small_p, s);
  return flip ? n - k : k;
}

}  // namespace rng
}  // namespace pymx
