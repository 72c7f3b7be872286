// NDArray: {shape, dtype, device, shared storage chunk + engine var}. Arrays are always
// contiguous (row-major); a view shares its chunk and adds a byte offset.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "pymx/base.h"
#include "pymx/engine.h"
#include "pymx/storage.h"

namespace pymx {

// What a kernel sees: a raw pointer into the array's memory, valid while its op runs.
struct TBlob {
  void* dptr = nullptr;
  Shape shape;
  DType dtype = DType::kFloat32;
  Device device;

  int64_t size() const { return shape_size(shape); }
  int ndim() const { return static_cast<int>(shape.size()); }
  template <typename T>
  T* data() const { return static_cast<T*>(dptr); }
};

// Memory that pymx uses but does not own (a tensor imported through DLPack): `release(context)`
// hands it back to its owner. `release` may be null when the owner outlives every use.
struct ExternalMemory {
  void* dptr = nullptr;
  size_t bytes = 0;
  Device device;
  void (*release)(void* context) = nullptr;
  void* context = nullptr;
};

// When a chunk gets its memory: at once, or when it is first used. See Note [Allocation at first
// use] in ndarray.cc.
enum class Allocation { kNow, kAtFirstUse };

// Storage plus the var that orders every op touching it. The destructor hands both to the
// engine (delete_var), so memory is freed only after the last queued op on it has finished.
// External memory is released the same way, through its own `release` instead of storage::free.
struct Chunk {
  VarHandle var = nullptr;
  Device device;
  void (*external_release)(void* context) = nullptr;  // set for external memory only
  void* external_context = nullptr;
  bool external = false;
  // Set once the memory's address was handed out of the engine (pmx_array_data: DLPack export),
  // after which code outside the engine may write it unseen (Note [Content stamps] in var.h).
  std::atomic<bool> exposed{false};

  // kAtFirstUse still refuses at once a host array larger than the machine's memory.
  Chunk(size_t bytes, Device device, Allocation when);
  // Wraps `memory` without copying. If this throws, `memory` is not released.
  explicit Chunk(const ExternalMemory& memory);
  ~Chunk();
  Chunk(const Chunk&) = delete;
  Chunk& operator=(const Chunk&) = delete;

  // The memory's address (nullptr for 0 bytes). The first call allocates it, for a GPU on
  // `stream` (see storage::alloc); thread-safe, so concurrent first uses allocate once.
  void* data(void* stream) {
    if (!allocated()) allocate(stream);
    return storage_.dptr;
  }
  bool allocated() const { return state_.load(std::memory_order_acquire) == kAllocated; }

  // Queued ops that hold this chunk to allocate it when they run (invoke's operands). Owners
  // that count references to tell whether anything else still uses the chunk (a graph's buffer
  // pool) discount these: the engine orders a new write after them anyway.
  std::atomic<int> held_by_queued_ops{0};

 private:
  void allocate(void* stream);

  enum State : int { kUnallocated, kAllocating, kAllocated };

  StorageHandle storage_;  // written once, before state_ becomes kAllocated
  size_t bytes_ = 0;
  std::atomic<int> state_{kUnallocated};
};

namespace autograd {
struct Node;  // defined in engine/src/autograd.h
}

// Autograd bookkeeping carried by an array: the node that produced it (while recording), or,
// for a variable marked with attach_grad, its gradient buffer and grad_req.
struct AutogradEntry {
  std::shared_ptr<autograd::Node> node;
  uint32_t index = 0;
};

enum class GradReq : int { kNull = 0, kWrite = 1, kAdd = 3 };  // MXNet's OpReqType values

// Value type: copying an NDArray copies the handle, not the data. Thread-safe as far as the
// engine is: concurrent ops are ordered by the chunk's var.
class NDArray {
 public:
  NDArray() = default;  // the "none" array
  // An array of uninitialised memory for shape/dtype on device, allocated `when` (the ops that
  // create their outputs allocate them when they run: see Note [Allocation at first use]).
  NDArray(const Shape& shape, Device device, DType dtype, Allocation when = Allocation::kNow);
  // An array over `memory` (contiguous row-major, at least shape x dtype bytes, aligned to the
  // element size), no copy. The memory is released once the last handle and the last queued op
  // on it are gone. If this throws, `memory` is not released.
  static NDArray from_external(const ExternalMemory& memory, const Shape& shape, DType dtype);

  bool is_none() const { return chunk_ == nullptr; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  int64_t size() const { return shape_size(shape_); }
  int ndim() const { return static_cast<int>(shape_.size()); }
  size_t nbytes() const { return static_cast<size_t>(size()) * dtype_size(dtype_); }
  VarHandle var() const { return chunk_ ? chunk_->var : nullptr; }
  const std::shared_ptr<Chunk>& chunk() const { return chunk_; }
  size_t byte_offset() const { return byte_offset_; }

  // The kernel's view of this array (allocating its memory if no op has yet). Only dereference
  // inside an op that reads/writes var().
  TBlob blob() const;

  // Views sharing memory and var (no copy, no op pushed).
  NDArray reshape_view(const Shape& shape) const;       // same number of elements
  NDArray slice_view(int64_t begin, int64_t end) const;  // along axis 0
  NDArray at_view(int64_t index) const;                 // drops axis 0

  // Blocking. Rethrow a stored async error (once). Refuse on a worker thread.
  void wait_to_read() const;
  void wait_to_write() const;

  // Synchronous copies between this array and host memory; `bytes` must equal nbytes().
  void sync_copy_from_cpu(const void* data, size_t bytes);
  void sync_copy_to_cpu(void* data, size_t bytes) const;

  // Asynchronous copy into `dst` (same shape; dtype cast allowed). Any device pair.
  void copy_to(NDArray& dst) const;
  // Asynchronous copy into a new array on `device`.
  NDArray copy_to(Device device) const;

  // Autograd state (used by engine/src/autograd.cc and the C API only).
  AutogradEntry& autograd_entry() { return entry_; }
  const AutogradEntry& autograd_entry() const { return entry_; }

  bool same_array(const NDArray& other) const {
    return chunk_ == other.chunk_ && byte_offset_ == other.byte_offset_ && shape_ == other.shape_;
  }

 private:
  std::shared_ptr<Chunk> chunk_;
  Shape shape_;
  DType dtype_ = DType::kFloat32;
  Device device_;
  size_t byte_offset_ = 0;
  AutogradEntry entry_;
};

}  // namespace pymx
