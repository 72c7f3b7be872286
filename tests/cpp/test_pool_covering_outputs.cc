// covering_outputs (engine/src/ops/pool_geometry.h), which the GPU pooling backward's gather form
// runs on (Note [Deterministic mode]): for every input position, exactly the outputs whose
// windows cover it, found by searching every window, over kernels, strides, pads, extents and
// both pooling conventions, for 1-D to 3-D data.
#include <cstdint>
#include <cstdio>
#include <string>

#include "ops/pool_geometry.h"
#include "test_util.h"

using pymx::Attrs;
using pymx::Shape;
using pymx::nn::OutputRange;
using pymx::nn::PoolGeom;

namespace {

// Checks every input position along every spatial dim of g against all of g's windows.
void check(const PoolGeom& g, const std::string& what) {
  for (int dim = 0; dim < 3; ++dim) {
    for (int64_t i = 0; i < g.in[dim]; ++i) {
      const OutputRange r = pymx::nn::covering_outputs(g, dim, i);
      for (int64_t o = 0; o < g.out[dim]; ++o) {
        const int64_t start = o * g.s[dim] - g.p[dim];
        const bool covers = start <= i && i < start + g.k[dim];
        const bool listed = r.first <= o && o <= r.last;
        EXPECT(covers == listed, what, " dim ", dim, ": input ", i, ", output ", o, " covers=",
               covers, " listed=", listed, " (range ", r.first, "..", r.last, ")");
      }
      EXPECT(r.first >= 0 && r.last < g.out[dim], what, ": range ", r.first, "..", r.last,
             " outside 0..", g.out[dim] - 1);
    }
  }
}

}  // namespace

int main() {
  int cases = 0;
  for (const char* convention : {"valid", "full"})
    for (int64_t extent = 1; extent <= 9; ++extent)
      for (int64_t k = 1; k <= 4; ++k)
        for (int64_t s = 1; s <= 3; ++s)
          for (int64_t p = 0; p < k; ++p) {
            if (extent + 2 * p < k) continue;  // the op rejects it
            const std::string ks = std::to_string(k), ss = std::to_string(s);
            const std::string ps = std::to_string(p), es = std::to_string(extent);
            // 2-D with different height and width settings, and 1-D and 3-D.
            const Attrs attrs2{{"kernel", "(" + ks + ", 1)"}, {"stride", "(" + ss + ", 1)"},
                               {"pad", "(" + ps + ", 0)"}, {"pooling_convention", convention}};
            const Attrs attrs1{{"kernel", "(" + ks + ",)"}, {"stride", "(" + ss + ",)"},
                               {"pad", "(" + ps + ",)"}, {"pooling_convention", convention}};
            const Attrs attrs3{{"kernel", "(" + ks + ", " + ks + ", " + ks + ")"},
                               {"stride", "(1, " + ss + ", " + ss + ")"},
                               {"pad", "(" + ps + ", 0, " + ps + ")"},
                               {"pooling_convention", convention}};
            const std::string what = std::string(convention) + " extent " + es + " kernel " + ks +
                                     " stride " + ss + " pad " + ps;
            check(pymx::nn::pool_geometry(attrs2, Shape{1, 1, extent, extent + 1}), "2-D " + what);
            check(pymx::nn::pool_geometry(attrs1, Shape{2, 1, extent}), "1-D " + what);
            if (extent >= k)  // the 3-D case's middle dim has no pad
              check(pymx::nn::pool_geometry(attrs3, Shape{1, 1, extent, extent, extent}),
                    "3-D " + what);
            ++cases;
          }
  // Global pooling: one window over everything.
  check(pymx::nn::pool_geometry(Attrs{{"global_pool", "True"}}, Shape{1, 2, 5, 7}), "global");
  std::printf("test_pool_covering_outputs: ok (%d cases)\n", cases);
  return 0;
}
