// The packed weight cache: a bounded, least-recently-used map from a call's weights to their
// packed form (Note [Packed weight cache] in packed_weight_cache.h).
#include "ops/packed_weight_cache.h"

#include <list>
#include <mutex>
#include <unordered_map>

#include "config.h"

namespace pymx {
namespace {

// Slots kept at most, packed or only seen once: bounds the bookkeeping of weights that are
// seen once and never again.
constexpr size_t kMaxSlots = 1024;

// A slot: one (layout, weight, bias) at its current version.
struct SlotKey {
  const void* layout;
  uint64_t weight_identity, bias_identity;
  const void* weight_data;
  const void* bias_data;
  int64_t dims[4];

  bool operator==(const SlotKey& o) const {
    return layout == o.layout && weight_identity == o.weight_identity &&
           bias_identity == o.bias_identity && weight_data == o.weight_data &&
           bias_data == o.bias_data && dims[0] == o.dims[0] && dims[1] == o.dims[1] &&
           dims[2] == o.dims[2] && dims[3] == o.dims[3];
  }
};

struct SlotKeyHash {
  size_t operator()(const SlotKey& k) const {
    uint64_t h = 0x9e3779b97f4a7c15ULL;
    auto mix = [&h](uint64_t v) { h = (h ^ v) * 0x100000001b3ULL + (h >> 29); };
    mix(reinterpret_cast<uintptr_t>(k.layout));
    mix(k.weight_identity);
    mix(k.bias_identity);
    mix(reinterpret_cast<uintptr_t>(k.weight_data));
    mix(reinterpret_cast<uintptr_t>(k.bias_data));
    for (int64_t d : k.dims) mix(static_cast<uint64_t>(d));
    return static_cast<size_t>(h);
  }
};

struct Slot {
  uint64_t weight_version, bias_version;
  std::shared_ptr<const void> packed;  // null while seen only once at this version
  size_t bytes = 0;                    // of `packed`
  std::list<SlotKey>::iterator age;    // its place in Cache::lru (front: most recent)
};

class Cache {
 public:
  explicit Cache(size_t max_bytes) : max_bytes_(max_bytes) {}

  std::shared_ptr<const void> get(const PackedWeightKey& key, size_t bytes,
                                  const std::function<std::shared_ptr<const void>()>& pack) {
    const SlotKey slot_key{key.layout,      key.weight.identity, key.bias.identity,
                           key.weight_data, key.bias_data,
                           {key.dims[0], key.dims[1], key.dims[2], key.dims[3]}};
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = slots_.find(slot_key);
      if (it == slots_.end()) {  // first sight: remember it, the caller packs
        lru_.push_front(slot_key);
        slots_.emplace(slot_key, Slot{key.weight.version, key.bias.version, nullptr, 0,
                                      lru_.begin()});
        evict_beyond_bounds();
        return nullptr;
      }
      Slot& slot = it->second;
      lru_.splice(lru_.begin(), lru_, slot.age);
      if (slot.weight_version != key.weight.version || slot.bias_version != key.bias.version) {
        // A newer version: the old packing can never be asked for again.
        bytes_ -= slot.bytes;
        slot = Slot{key.weight.version, key.bias.version, nullptr, 0, slot.age};
        return nullptr;
      }
      if (slot.packed) return slot.packed;
      if (bytes > max_bytes_) return nullptr;
    }
    std::shared_ptr<const void> packed = pack();  // outside the lock: other kernels go on
    std::lock_guard<std::mutex> lock(mu_);
    auto it = slots_.find(slot_key);
    // Evicted or moved to another version meanwhile, or packed by another worker: keep what is
    // there (equal floats when the versions match).
    if (it == slots_.end() || it->second.weight_version != key.weight.version ||
        it->second.bias_version != key.bias.version)
      return packed;
    if (it->second.packed) return it->second.packed;
    it->second.packed = packed;
    it->second.bytes = bytes;
    bytes_ += bytes;
    evict_beyond_bounds();
    return packed;
  }

 private:
  // Drops the least recently used slots until both bounds hold. Called under mu_.
  void evict_beyond_bounds() {
    while (!lru_.empty() && (bytes_ > max_bytes_ || slots_.size() > kMaxSlots)) {
      auto it = slots_.find(lru_.back());
      bytes_ -= it->second.bytes;
      slots_.erase(it);
      lru_.pop_back();
    }
  }

  const size_t max_bytes_;
  std::mutex mu_;
  std::unordered_map<SlotKey, Slot, SlotKeyHash> slots_;  // guarded by mu_
  std::list<SlotKey> lru_;                                // guarded by mu_
  size_t bytes_ = 0;                                      // guarded by mu_: packed bytes kept
};

Cache& cache() {
  // Never destroyed: kernels may still run on workers during static destruction.
  static Cache* instance = new Cache(config().packed_weight_cache_bytes);
  return *instance;
}

}  // namespace

PackedWeightKey packed_weight_key(const OpContext& ctx, const void* layout, int weight_input,
                                  const void* weight_data, int bias_input, const void* bias_data) {
  PackedWeightKey key;
  key.layout = layout;
  key.weight_data = weight_data;
  key.bias_data = bias_data;
  if (ctx.is_train || config().packed_weight_cache_bytes == 0) return key;
  const ContentStamp weight = ctx.input_stamp(weight_input);
  const ContentStamp bias = bias_input >= 0 ? ctx.input_stamp(bias_input) : ContentStamp{};
  if (bias_input >= 0 && !bias.known()) return key;  // a bias that may change unseen
  key.weight = weight;
  key.bias = bias;
  return key;
}

std::shared_ptr<const void> cached_packed_weights(
    const PackedWeightKey& key, size_t bytes,
    const std::function<std::shared_ptr<const void>()>& pack) {
  if (!key.weight.known()) return nullptr;
  return cache().get(key, bytes, pack);
}

}  // namespace pymx
