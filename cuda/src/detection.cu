// The SSD detection operators on the GPU (CPU definitions and the algorithms:
// engine/src/ops/detection.cc; the box arithmetic both use: engine/src/ops/detection_common.h).
//
// | op                 | inputs                        | outputs                            |
// |--------------------|-------------------------------|------------------------------------|
// | multibox_prior     | data                          | anchors (1, H*W*K, 4)              |
// | multibox_target    | anchor, label, cls_pred       | loc_target, loc_mask, cls_target   |
// | multibox_detection | cls_prob, loc_pred, anchor    | out (B, N, 6)                      |
//
// Note [One thread block per batch item]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// multibox_target's bipartite matching picks the best remaining (anchor, label) pair once per
// label, each pick depending on the ones before, and multibox_detection's NMS walks the sorted
// rows in order, each row's fate depending on the rows above it. Both are serial along one batch
// item and independent across items, so each runs one thread block per item: the block's
// threads share every step's work (the IoUs, each pick's argmax, each row's suppression test)
// and __syncthreads orders the steps, which makes the results those of the CPU's serial loops.
// Stable sorts are rank counts (a row's rank is the number of rows that precede it), O(n^2) per
// item spread over the block: n is at most the anchors of one image (a few thousand), where this
// costs well under a millisecond, and it needs no scratch beyond one copy of the rows.
// Detection's rows are compacted in anchor order from per-thread contiguous chunks and a scan of
// the chunks' counts. This file is compiled with -fmad=false (CMakeLists.txt): products and sums
// round as on the CPU, so the discrete decisions (matches, thresholds, suppressions) agree; exp
// and log may differ from the CPU's in the last bit.
#include <cstdint>
#include <vector>

#include "kernel_util.cuh"
#include "launch.h"
#include "ops/detection_common.h"

namespace pymx {
namespace gpu {
namespace {

using namespace detection;

template <typename T>
struct ToAcc {
  __device__ __forceinline__ AccT<T> operator()(T v) const { return convert<AccT<T>>(v); }
};
template <typename T>
struct FromAcc {
  __device__ __forceinline__ T operator()(AccT<T> v) const { return convert<T>(v); }
};

// ---------------------------------------------------------------------------------------------
// multibox_prior
// ---------------------------------------------------------------------------------------------
template <typename T>
__global__ void prior_kernel(T* out, int64_t width, int64_t per_cell, int64_t total,
                             AccT<T> step_y, AccT<T> step_x, AccT<T> offset_y, AccT<T> offset_x,
                             bool clip, const AccT<T>* half_extents) {
  PMX_GRID_STRIDE_LOOP(i, total) {
    const int64_t k = i % per_cell, cell = i / per_cell;
    prior_box(step_y, step_x, offset_y, offset_x, clip, half_extents, cell / width, cell % width,
              k, out + 4 * i, FromAcc<T>());
  }
}

void prior_gpu(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  PMX_GPU_FLOAT_SWITCH(out[0].dtype, T, {
    using A = AccT<T>;
    const PriorGrid<A> g = prior_grid<A>(*ctx.attrs, in[0].shape);
    const size_t bytes = g.half_extents.size() * sizeof(A);
    A* half_extents = static_cast<A*>(ctx.workspace(bytes));
    copy_host_to_device(half_extents, g.half_extents.data(), bytes, ctx.run.stream);
    const int64_t total = g.height * g.width * g.anchors_per_cell();
    prior_kernel<T><<<grid_for(total), kBlock, 0, stream_of(ctx)>>>(
        out[0].data<T>(), g.width, g.anchors_per_cell(), total, g.step_y, g.step_x, g.offset_y,
        g.offset_x, g.clip, half_extents);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

// ---------------------------------------------------------------------------------------------
// multibox_target (Note [Anchor matching] in detection.cc)
// ---------------------------------------------------------------------------------------------
enum : int { kIgnored = -1, kNegative = 0, kPositive = 1 };

// A candidate (anchor, label) pair: its IoU and linear index anchor * num_gt + label.
template <typename A>
struct Pick {
  A iou;
  int64_t index;
};

// The better of two picks: the higher IoU, the lower index among equals (the CPU's scan order).
template <typename A>
__device__ __forceinline__ Pick<A> better(Pick<A> a, Pick<A> b) {
  if (a.iou > b.iou) return a;
  if (b.iou > a.iou) return b;
  return a.index < b.index ? a : b;
}

// Per batch item: IoUs (num_anchors x num_labels), the background keys, flags and matches of
// the anchors, the matched flags of the labels.
template <typename A>
struct TargetScratch {
  A* overlaps;
  A* keys;
  int* flag;
  int* match;
  int* gt_matched;
};

template <typename T>
__global__ void target_kernel(const T* anchors, const T* labels, const T* cls_pred,
                              int64_t num_anchors, int64_t num_labels, int64_t width,
                              int64_t num_classes, TargetParams p, TargetScratch<AccT<T>> scratch,
                              T* loc_target, T* loc_mask, T* cls_target) {
  using A = AccT<T>;
  const int64_t b = blockIdx.x, n = num_anchors;
  const int t = threadIdx.x, threads = blockDim.x;
  labels += b * num_labels * width;
  cls_pred += b * num_classes * n;
  loc_target += b * 4 * n;
  loc_mask += b * 4 * n;
  cls_target += b * n;
  A* overlaps = scratch.overlaps + b * n * num_labels;
  A* keys = scratch.keys + b * n;
  int* flag = scratch.flag + b * n;
  int* match = scratch.match + b * n;
  int* gt_matched = scratch.gt_matched + b * num_labels;

  for (int64_t i = t; i < 4 * n; i += threads) loc_target[i] = loc_mask[i] = convert<T>(A(0));
  for (int64_t j = t; j < n; j += threads) {
    cls_target[j] = convert<T>(p.ignore_label);
    flag[j] = kIgnored;
  }
  __shared__ int64_t num_gt_shared;
  if (t == 0) {
    int64_t count = 0;
    while (count < num_labels && convert<float>(labels[count * width]) != -1.0f) ++count;
    num_gt_shared = count;
  }
  __syncthreads();
  const int64_t num_gt = num_gt_shared;
  if (num_gt == 0) return;

  auto box_of = [](const T* src, A* box) {
    for (int c = 0; c < 4; ++c) box[c] = convert<A>(src[c]);
  };
  for (int64_t e = t; e < n * num_gt; e += threads) {
    A anchor[4], gt[4];
    box_of(anchors + 4 * (e / num_gt), anchor);
    box_of(labels + (e % num_gt) * width + 1, gt);
    overlaps[e] = box_iou(anchor, gt);
  }
  for (int64_t k = t; k < num_gt; k += threads) gt_matched[k] = 0;
  __syncthreads();

  // Step 1: one pick per round, the block's argmax over the unmatched pairs.
  constexpr int64_t kNone = INT64_MAX;
  for (int64_t round = 0; round < num_gt; ++round) {
    Pick<A> mine{A(1e-6f), kNone};
    for (int64_t j = t; j < n; j += threads) {
      if (flag[j] == kPositive) continue;
      for (int64_t k = 0; k < num_gt; ++k)
        if (!gt_matched[k] && overlaps[j * num_gt + k] > mine.iou)
          mine = {overlaps[j * num_gt + k], j * num_gt + k};
    }
    const Pick<A> best =
        group_reduce(mine, kBlock, [](Pick<A> a, Pick<A> b) { return better(a, b); });
    if (best.index == kNone) break;
    if (t == 0) {
      flag[best.index / num_gt] = kPositive;
      match[best.index / num_gt] = static_cast<int>(best.index % num_gt);
      gt_matched[best.index % num_gt] = 1;
    }
    __syncthreads();
  }
  if (p.overlap_threshold > 0) {  // step 2: each anchor on its own
    for (int64_t j = t; j < n; j += threads) {
      if (flag[j] == kPositive) continue;
      A iou;
      const int64_t k = best_label(overlaps, num_gt, j, &iou);
      if (k >= 0 && iou > A(static_cast<float>(p.overlap_threshold))) {
        flag[j] = kPositive;
        match[j] = static_cast<int>(k);
      }
    }
    __syncthreads();
  }
  if (p.negative_mining_ratio > 0) {  // step 3: candidates keyed, NaN for the others
    int64_t mine = 0;
    for (int64_t j = t; j < n; j += threads) {
      mine += flag[j] == kPositive;
      A iou;
      best_label(overlaps, num_gt, j, &iou);
      const bool candidate =
          flag[j] != kPositive && iou < A(static_cast<float>(p.negative_mining_thresh));
      keys[j] = candidate ? background_key(background_probability<A>(cls_pred, num_classes, n, j,
                                                                     ToAcc<T>()))
                          : A(NAN);
    }
    const int64_t positives =
        group_reduce(mine, kBlock, [](int64_t a, int64_t b) { return a + b; });
    const int64_t wanted = negatives_wanted(p, positives, n);
    for (int64_t j = t; j < n && wanted > 0; j += threads) {
      const A key = keys[j];
      if (key != key) continue;
      int64_t rank = 0;  // candidates before j in the stable ascending order of keys
      for (int64_t k = 0; k < n; ++k) rank += keys[k] < key || (keys[k] == key && k < j);
      if (rank < wanted) flag[j] = kNegative;
    }
  } else {
    for (int64_t j = t; j < n; j += threads)
      if (flag[j] != kPositive) flag[j] = kNegative;
  }
  __syncthreads();

  for (int64_t j = t; j < n; j += threads) {
    if (flag[j] == kPositive) {
      const T* gt = labels + match[j] * width;
      cls_target[j] = convert<T>(convert<A>(gt[0]) + A(1));
      A anchor[4], box[4], encoded[4];
      box_of(anchors + 4 * j, anchor);
      box_of(gt + 1, box);
      encode_box(anchor, box, p.variances, encoded);
      for (int c = 0; c < 4; ++c) {
        loc_mask[4 * j + c] = convert<T>(A(1));
        loc_target[4 * j + c] = convert<T>(encoded[c]);
      }
    } else if (flag[j] == kNegative) {
      cls_target[j] = convert<T>(A(0));
    }
  }
}

void target_gpu(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const TargetParams p = target_params(*ctx.attrs);
  const int64_t batch = in[1].shape[0], num_labels = in[1].shape[1], width = in[1].shape[2];
  const int64_t num_classes = in[2].shape[1], n = in[0].shape[1];
  if (batch == 0) return;
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    using A = AccT<T>;
    const size_t overlaps = workspace_aligned(batch * n * num_labels * sizeof(A));
    const size_t keys = workspace_aligned(batch * n * sizeof(A));
    const size_t per_anchor = workspace_aligned(batch * n * sizeof(int));
    const size_t per_label = workspace_aligned(batch * num_labels * sizeof(int));
    char* space = static_cast<char*>(ctx.workspace(overlaps + keys + 2 * per_anchor + per_label));
    const TargetScratch<A> scratch{
        reinterpret_cast<A*>(space), reinterpret_cast<A*>(space + overlaps),
        reinterpret_cast<int*>(space + overlaps + keys),
        reinterpret_cast<int*>(space + overlaps + keys + per_anchor),
        reinterpret_cast<int*>(space + overlaps + keys + 2 * per_anchor)};
    target_kernel<T><<<static_cast<unsigned>(batch), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), n, num_labels, width, num_classes, p,
        scratch, out[0].data<T>(), out[1].data<T>(), out[2].data<T>());
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

// ---------------------------------------------------------------------------------------------
// multibox_detection (Note [Detection rows] in detection.cc)
// ---------------------------------------------------------------------------------------------
template <typename T>
__global__ void detection_kernel(const T* cls_prob, const T* loc_pred, const T* anchors,
                                 int64_t num_classes, int64_t n, DetectionParams p, T* rows_copy,
                                 T* out) {
  using A = AccT<T>;
  const int64_t b = blockIdx.x;
  const int t = threadIdx.x, threads = blockDim.x;
  cls_prob += b * num_classes * n;
  loc_pred += b * 4 * n;
  out += b * 6 * n;
  rows_copy += b * 6 * n;
  const A threshold = A(static_cast<float>(p.threshold));
  for (int64_t i = t; i < 6 * n; i += threads) out[i] = convert<T>(A(-1));

  // Rows in anchor order: thread t owns anchors [first, last) and writes its rows after those
  // of the threads before it.
  __shared__ int64_t offsets[kBlock];
  __shared__ int64_t valid_shared;
  const int64_t chunk = (n + threads - 1) / threads;
  const int64_t first = t * chunk < n ? t * chunk : n, last = first + chunk < n ? first + chunk : n;
  int64_t count = 0;
  A score;
  for (int64_t i = first; i < last; ++i)
    count += best_class(cls_prob, num_classes, n, i, p.background_id, threshold, &score,
                        ToAcc<T>()) >= 0;
  offsets[t] = count;
  __syncthreads();
  if (t == 0) {
    int64_t total = 0;
    for (int k = 0; k < threads; ++k) {
      const int64_t c = offsets[k];
      offsets[k] = total;
      total += c;
    }
    valid_shared = total;
  }
  __syncthreads();
  int64_t position = offsets[t];
  for (int64_t i = first; i < last; ++i) {
    const int64_t id =
        best_class(cls_prob, num_classes, n, i, p.background_id, threshold, &score, ToAcc<T>());
    if (id < 0) continue;
    A anchor[4], pred[4], box[4];
    for (int c = 0; c < 4; ++c) {
      anchor[c] = convert<A>(anchors[4 * i + c]);
      pred[c] = convert<A>(loc_pred[4 * i + c]);
    }
    decode_box(anchor, pred, p.variances, p.clip, box);
    T* row = out + 6 * position++;
    row[0] = convert<T>(A(reported_class(id, p.background_id)));
    row[1] = convert<T>(score);
    for (int c = 0; c < 4; ++c) row[2 + c] = convert<T>(box[c]);
  }
  __syncthreads();
  const int64_t valid = valid_shared;
  if (valid == 0 || !p.runs_nms()) return;

  // Stable sort by descending score, keeping the first `kept`.
  const int64_t kept = p.nms_topk > 0 && p.nms_topk < valid ? p.nms_topk : valid;
  for (int64_t i = t; i < 6 * valid; i += threads) rows_copy[i] = out[i];
  __syncthreads();
  for (int64_t i = t; i < valid; i += threads) {
    const A s = convert<A>(rows_copy[6 * i + 1]);
    int64_t rank = 0;
    for (int64_t k = 0; k < valid; ++k) {
      const A other = convert<A>(rows_copy[6 * k + 1]);
      rank += other > s || (other == s && k < i);
    }
    if (rank < kept)
      for (int c = 0; c < 6; ++c) out[6 * rank + c] = rows_copy[6 * i + c];
  }
  for (int64_t i = kept + t; i < valid; i += threads) out[6 * i] = convert<T>(A(-1));

  const A nms_threshold = A(static_cast<float>(p.nms_threshold));
  for (int64_t i = 0; i < kept; ++i) {
    __syncthreads();  // row i's class is final: every earlier row has been applied
    const A id = convert<A>(out[6 * i]);
    if (id < A(0)) continue;
    A box[4];
    for (int c = 0; c < 4; ++c) box[c] = convert<A>(out[6 * i + 2 + c]);
    for (int64_t j = i + 1 + t; j < kept; j += threads) {
      const A other = convert<A>(out[6 * j]);
      if (other < A(0) || !(p.force_suppress || other == id)) continue;
      A other_box[4];
      for (int c = 0; c < 4; ++c) other_box[c] = convert<A>(out[6 * j + 2 + c]);
      if (box_iou(box, other_box) >= nms_threshold) out[6 * j] = convert<T>(A(-1));
    }
  }
}

void detection_gpu(const OpContext& ctx, const std::vector<TBlob>& in,
                   const std::vector<TBlob>& out) {
  const DetectionParams p = detection_params(*ctx.attrs);
  const int64_t batch = in[0].shape[0], num_classes = in[0].shape[1], n = in[0].shape[2];
  if (batch == 0) return;
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    T* rows_copy = static_cast<T*>(ctx.workspace(batch * 6 * n * sizeof(T)));
    detection_kernel<T><<<static_cast<unsigned>(batch), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), num_classes, n, p, rows_copy,
        out[0].data<T>());
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

const bool registered = [] {
  op_registry::get_or_create("multibox_prior").set_gpu(prior_gpu);
  op_registry::get_or_create("multibox_target").set_gpu(target_gpu);
  op_registry::get_or_create("multibox_detection").set_gpu(detection_gpu);
  return true;
}();

}  // namespace
}  // namespace gpu
}  // namespace pymx
