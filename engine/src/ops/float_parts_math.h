// The element functions of the float_parts operators (float_parts.cc), one definition for the CPU
// kernels and the GPU kernels (cuda/src/float_parts.cu), so that both compute the same values.
// A is the arithmetic type: float (also for float16 and bfloat16 data) or double.
//
// | function            | value                                                               |
// |---------------------|---------------------------------------------------------------------|
// | spacing_of(x, fmt)  | distance from x to the next value of x's format away from zero,     |
// |                     | signed as x; inf at the largest finite value, NaN for inf and NaN    |
// | bessel_i0(x)        | modified Bessel function of the first kind, order 0                 |
// | bessel_i1(x)        | modified Bessel function of the first kind, order 1 (i0's derivative)|
#pragma once

#include <cmath>

#include "ops/host_device.h"

namespace pymx {
namespace ops {

#ifndef __CUDACC__
using std::fabs;
using std::ilogb;
using std::isfinite;
using std::ldexp;
#endif

// What spacing needs of a storage format: mantissa bits (with the implicit one), the exponent
// of the smallest normal number and the largest finite value. float16 and bfloat16 values are
// computed in float, so their spacing has to come from their own format, not float's.
struct FloatFormat {
  int digits;
  int min_exponent;
  double max_finite;
};

constexpr FloatFormat kFloat16Format{11, -14, 65504.0};
constexpr FloatFormat kBFloat16Format{8, -126, 3.3895313892515355e38};  // (2 - 2^-7) 2^127
constexpr FloatFormat kFloat32Format{24, -126, 3.4028234663852886e38};
constexpr FloatFormat kFloat64Format{53, -1022, 1.7976931348623157e308};

// NumPy's spacing: nextafter(x, copysign(inf, x)) - x in x's format. Below the smallest normal
// number the step is the subnormal one, and zero (either sign) steps up by it.
template <typename A>
PMX_HOST_DEVICE A spacing_of(A x, FloatFormat format) {
  if (!isfinite(x)) return x - x;  // NaN for inf and NaN
  const A magnitude = fabs(x);
  A step;
  if (static_cast<double>(magnitude) >= format.max_finite) {
    step = A(INFINITY);
  } else {
    int exponent = magnitude == A(0) ? format.min_exponent : static_cast<int>(ilogb(magnitude));
    if (exponent < format.min_exponent) exponent = format.min_exponent;
    step = static_cast<A>(ldexp(1.0, exponent - (format.digits - 1)));
  }
  return x < A(0) ? -step : step;  // spacing(-0.0) is positive, as in NumPy
}

// Chebyshev series in the arrangement of the Cephes mathematical library, whose coefficients
// (those NumPy's i0 uses) are below: highest degree first, the constant term halved at the end.
template <int N>
PMX_HOST_DEVICE double chebyshev_series(double x, const double (&coefficients)[N]) {
  double b0 = coefficients[0], b1 = 0.0, b2 = 0.0;
  for (int i = 1; i < N; ++i) {
    b2 = b1;
    b1 = b0;
    b0 = x * b1 - b2 + coefficients[i];
  }
  return 0.5 * (b0 - b2);
}

// exp(-x) i0(x) on [0, 8] in the variable x / 2 - 2, and exp(-x) sqrt(x) i0(x) on (8, inf) in
// 32 / x - 2.
#define PMX_I0_SMALL                                                                         \
  {-4.41534164647933937950E-18, 3.33079451882223809783E-17, -2.43127984654795469359E-16,     \
   1.71539128555513303061E-15,  -1.16853328779934516808E-14, 7.67618549860493561688E-14,     \
   -4.85644678311192946090E-13, 2.95505266312963983461E-12, -1.72682629144155570723E-11,     \
   9.67580903537323691224E-11,  -5.18979560163526290666E-10, 2.65982372468238665035E-9,      \
   -1.30002500998624804212E-8,  6.04699502254191894932E-8,  -2.67079385394061173391E-7,      \
   1.11738753912010371815E-6,   -4.41673835845875056359E-6, 1.64484480707288970893E-5,       \
   -5.75419501008210370398E-5,  1.88502885095841655729E-4,  -5.76375574538582365885E-4,      \
   1.63947561694133579842E-3,   -4.32430999505057594430E-3, 1.05464603945949983183E-2,       \
   -2.37374148058994688156E-2,  4.93052842396707084878E-2,  -9.49010970480476444210E-2,      \
   1.71620901522208775349E-1,   -3.04682672343198398683E-1, 6.76795274409476084995E-1}
#define PMX_I0_LARGE                                                                         \
  {-7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17,     \
   3.46122286769746109310E-17,  -2.82762398051658348494E-16, -3.42548561967721913462E-16,    \
   1.77256013305652638360E-15,  3.81168066935262242075E-15,  -9.55484669882830764870E-15,    \
   -4.15056934728722208663E-14, 1.54008621752140982691E-14,  3.85277838274214270114E-13,     \
   7.18012445138366623367E-13,  -1.79417853150680611778E-12, -1.32158118404477131188E-11,    \
   -3.14991652796324136454E-11, 1.18891471078464383424E-11,  4.94060238822496958910E-10,     \
   3.39623202570838634515E-9,   2.26666899049817806459E-8,   2.04891858946906374183E-7,      \
   2.89137052083475648297E-6,   6.88975834691682398426E-5,   3.36911647825569408990E-3,      \
   8.04490411014108831608E-1}
// exp(-x) i1(x) / x on [0, 8], and exp(-x) sqrt(x) i1(x) on (8, inf), in the same variables.
#define PMX_I1_SMALL                                                                         \
  {2.77791411276104639959E-18,  -2.11142121435816608115E-17, 1.55363195773620046921E-16,     \
   -1.10559694773538630805E-15, 7.60068429473540693410E-15,  -5.04218550472791168711E-14,    \
   3.22379336594557470981E-13,  -1.98397439776494371520E-12, 1.17361862988909016308E-11,     \
   -6.66348972350202774223E-11, 3.62559028155211703701E-10,  -1.88724975172282928790E-9,     \
   9.38153738649577178388E-9,   -4.44505912879632808065E-8,  2.00329475355213526229E-7,      \
   -8.56872026469545474066E-7,  3.47025130813767847674E-6,   -1.32731636560394358279E-5,     \
   4.78156510755005422638E-5,   -1.61760815825896745588E-4,  5.12285956168575772895E-4,      \
   -1.51357245063125314899E-3,  4.15642294431288815669E-3,   -1.05640848946261981558E-2,     \
   2.47264490306265168283E-2,   -5.29459812080949914269E-2,  1.02643658689847095384E-1,      \
   -1.76416518357834055153E-1,  2.52587186443633654823E-1}
#define PMX_I1_LARGE                                                                         \
  {7.51729631084210481353E-18,  4.41434832307170791151E-18,  -4.65030536848935832153E-17,    \
   -3.20952592199342395980E-17, 2.96262899764595013876E-16,  3.30820231092092828324E-16,     \
   -1.88035477551078244854E-15, -3.81440307243700780478E-15, 1.04202769841288027642E-14,     \
   4.27244001671195135429E-14,  -2.10154184277266431302E-14, -4.08355111109219731823E-13,    \
   -7.19855177624590851209E-13, 2.03562854414708950722E-12,  1.41258074366137813316E-11,     \
   3.25260358301548823856E-11,  -1.89749581235054123450E-11, -5.58974346219658380687E-10,    \
   -3.83538038596423702205E-9,  -2.63146884688951950684E-8,  -2.51223623787020892529E-7,     \
   -3.88256480887769039346E-6,  -1.10588938762623716291E-4,  -9.76109749136146840777E-3,     \
   7.78576235018280120474E-1}

// Both evaluate in double whatever the data's type (a few dozen multiply-adds per element).
PMX_HOST_DEVICE double bessel_i0(double x) {
  constexpr double small[] = PMX_I0_SMALL;
  constexpr double large[] = PMX_I0_LARGE;
  const double z = fabs(x);
  if (z <= 8.0) return exp(z) * chebyshev_series(z / 2.0 - 2.0, small);
  return exp(z) * chebyshev_series(32.0 / z - 2.0, large) / sqrt(z);
}

PMX_HOST_DEVICE double bessel_i1(double x) {
  constexpr double small[] = PMX_I1_SMALL;
  constexpr double large[] = PMX_I1_LARGE;
  const double z = fabs(x);
  const double value = z <= 8.0 ? exp(z) * z * chebyshev_series(z / 2.0 - 2.0, small)
                                : exp(z) * chebyshev_series(32.0 / z - 2.0, large) / sqrt(z);
  return x < 0.0 ? -value : value;  // odd
}

#undef PMX_I0_SMALL
#undef PMX_I0_LARGE
#undef PMX_I1_SMALL
#undef PMX_I1_LARGE

}  // namespace ops
}  // namespace pymx
