// Weights kept in a kernel's own layout across inference calls, so that a convolution does not
// rearrange the same weights on every call. See Note [Packed weight cache].
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "pymx/op.h"

namespace pymx {

// Note [Packed weight cache]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// The direct convolution kernels (conv_direct.h, conv_direct_narrow.h, and the fused inference
// blocks of conv_pool_fused.h through conv2d_direct_f32_weights) read their weights rearranged
// into blocks of output channels. At batch 1 that rearrangement is a visible share of
// a layer (9.4 MB read and written for each 512->512 3x3 layer of resnet18, for 1.5 ms of
// arithmetic), yet in inference the weights do not change between calls. So the packed weights
// are kept here, under a key that names the bytes they came from:
//  - the kernel's layout (a tag per packing function) and the sizes the packing depends on;
//  - for the weight and the bias (when there is one): the input's content stamp, its var's
//    identity and version (Note [Content stamps] in var.h), and its data address. The version
//    moves with every write of any kind (an optimizer update, set_data, load_parameters, `w[:] =`,
//    `+=`, a copy into it: all are engine writes on the chunk's var), the identity is never
//    shared by two arrays even when the engine recycles a var or the allocator hands a freed
//    buffer's address to a new array, and the address tells views of one chunk apart. An input
//    whose stamp is unknown (memory that code outside the engine may write, an input the op also
//    writes, an input that any call of its bulk replay writes, a 16-bit input widened by
//    through_float, a call outside invoke) is never cached.
// So a hit returns exactly the floats the packing would produce now, and results are the same
// bits with and without the cache.
// Only inference calls use it (OpContext::is_train false): a training step changes the weights
// after every forward, so each call would pack anyway. A weight is packed into the cache on its
// second call at the same version (the first packs into the kernel's scratch as without a
// cache), so weights used once, and inference passes between training steps, cost only the
// lookup. A slot holds one version of one (layout, weight, bias): a newer version replaces the
// older, which can never be asked for again.
// The packed bytes kept are bounded by PYMX_PACKED_WEIGHT_CACHE_MB (default 64 MiB: resnet18's
// convolutions need 44 MB; 0 turns the cache off), and the slots by kMaxSlots; beyond either
// the least recently used go first. An entry evicted while a kernel uses it lives on until that
// kernel returns (shared ownership), so at most one entry per running kernel exceeds the bound.
// A thread-safe map under one mutex, held only for the lookup and bookkeeping, never while
// packing (two workers missing on one key both pack the same floats; the first insert is kept).

// Names the packed form of one call's weights (see the note).
struct PackedWeightKey {
  const void* layout = nullptr;  // the packing function's tag: one per kernel layout
  ContentStamp weight, bias;     // bias: unknown when there is none
  const void* weight_data = nullptr;
  const void* bias_data = nullptr;
  int64_t dims[4] = {0, 0, 0, 0};  // the sizes the layout depends on
};

// The key of a call whose weight is input `weight_input` of ctx's op and bias `bias_input`
// (-1: none). Its weight stamp is unknown when the call may not use the cache: a training call,
// an unstamped weight or bias, or the cache turned off.
PackedWeightKey packed_weight_key(const OpContext& ctx, const void* layout, int weight_input,
                                  const void* weight_data, int bias_input, const void* bias_data);

// The packed weights `key` names: the cached ones, or those `pack` makes (kept when the key was
// seen before and `bytes` fits the bound). nullptr when the caller is to pack into its own
// scratch: the key's weight stamp is unknown, or the key is new. `pack` returns the packed form
// as a shared_ptr to any type; the caller casts back the result of the same layout's packing.
std::shared_ptr<const void> cached_packed_weights(
    const PackedWeightKey& key, size_t bytes,
    const std::function<std::shared_ptr<const void>()>& pack);

}  // namespace pymx
