// NDArray: storage chunks, views, waits and copies between devices.
#include "pymx/ndarray.h"

#include <cstring>
#include <thread>

#include "engine_impl.h"
#include "ops/cast.h"
#include "pymx/gpu.h"
#include "pymx/op.h"

namespace pymx {

// Note [Allocation at first use]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// invoke() pushes an op and returns its outputs at once, long before the op runs. Were their
// memory allocated then, a whole backward pass pushed in one go would hold every gradient buffer
// it ever needs at the same time, and the next step's forward, pushed while the last step's
// backward still runs, would hold its activations on top: the peak would be the sum of what the
// queued ops need, not what the running ones need. So an op's outputs are chunks allocated at
// first use: the op allocates them on its worker just before its kernel runs (on its GPU stream,
// so that it takes blocks that stream has just freed), by then the buffers of the ops before it
// have been freed into the cache, and the peak follows execution as with eager, synchronous
// frameworks (MXNet allocates its outputs late for the same reason). Anyone else who needs the
// address (a copy, a pointer for DLPack) allocates it through blob(); the first user allocates,
// a concurrent one waits for it (state_: unallocated -> allocating -> allocated). A host array larger than the machine's memory is still refused when it is
// created, so that mistake is reported where it is made; other allocation failures surface, with
// the allocator's numbers, at the next wait on the op's results, as any error of the op does.
Chunk::Chunk(size_t bytes, Device dev, Allocation when) : device(dev), bytes_(bytes) {
  // Checked first: a chunk on a device no engine serves could not be freed (~Chunk pushes the
  // free to that device), and the throw would escape a destructor and abort the process.
  check_engine_device(dev);
  if (when == Allocation::kNow) {
    allocate(nullptr);
  } else {
    storage::check_capacity(bytes, dev);
  }
  var = Engine::get()->new_var();
}

void Chunk::allocate(void* stream) {
  for (int seen = kUnallocated; !state_.compare_exchange_weak(
           seen, kAllocating, std::memory_order_acquire, std::memory_order_acquire);
       seen = kUnallocated) {
    if (seen == kAllocated) return;
    if (seen == kAllocating) std::this_thread::yield();  // rare: two first uses at once
  }
  try {
    storage_ = storage::alloc(bytes_, device, stream);
  } catch (...) {
    state_.store(kUnallocated, std::memory_order_release);  // the next use tries again
    throw;
  }
  state_.store(kAllocated, std::memory_order_release);
}

Chunk::Chunk(const ExternalMemory& memory)
    : device(memory.device),
      external_release(memory.release),
      external_context(memory.context),
      external(true) {
  check_engine_device(memory.device);
  storage_.dptr = memory.dptr;
  storage_.size = memory.bytes;
  storage_.device = memory.device;
  bytes_ = memory.bytes;
  state_.store(kAllocated, std::memory_order_relaxed);
  var = Engine::get()->new_var();
}

Chunk::~Chunk() {
  // The engine runs the deletion after every op queued on `var` has finished, so the memory
  // outlives all kernels that may still use it.
  if (external) {
    void (*release)(void*) = external_release;
    void* context = external_context;
    Engine::get()->delete_var(
        [release, context](RunContext ctx) {
          // On a GPU the deletion runs once its stream has waited for the var's ops, which may
          // still be executing: the owner may reuse the memory as soon as it gets it back.
          if (ctx.stream != nullptr) gpu::stream_synchronize(ctx.stream);
          if (release != nullptr) release(context);
        },
        device, var);
    return;
  }
  // Every op that used this chunk held it, so none can allocate it any more.
  StorageHandle handle = storage_;
  Engine::get()->delete_var(
      [handle](RunContext ctx) mutable {
        if (ctx.stream != nullptr) handle.stream = ctx.stream;
        storage::free(handle);
      },
      device, var);
}

namespace {

// The bytes an array of `shape` and `dtype` needs, checked before anything is allocated: a
// negative extent is the caller's error, and a product past 2^63 bytes must not wrap around to
// a small allocation that kernels would then overrun.
size_t checked_nbytes(const Shape& shape, DType dtype) {
  for (int64_t d : shape) PMX_CHECK(d >= 0, "negative dimension in shape ", shape_str(shape));
  constexpr uint64_t kLimit = uint64_t{1} << 63;
  uint64_t bytes = dtype_size(dtype);
  for (int64_t d : shape) {
    if (d != 0 && bytes > kLimit / static_cast<uint64_t>(d)) {
      for (int64_t e : shape)
        if (e == 0) return 0;  // an empty array needs no memory, however large its other extents
      PMX_THROW(Status::kOutOfMemory, "cannot allocate an array of shape ", shape_str(shape),
                " and dtype ", dtype_name(dtype), ": it needs more than 2^63 bytes");
    }
    bytes *= static_cast<uint64_t>(d);
  }
  return static_cast<size_t>(bytes);
}

}  // namespace

NDArray::NDArray(const Shape& shape, Device device, DType dtype, Allocation when)
    : chunk_(std::make_shared<Chunk>(checked_nbytes(shape, dtype), device, when)),
      shape_(shape),
      dtype_(dtype),
      device_(device) {}

NDArray NDArray::from_external(const ExternalMemory& memory, const Shape& shape, DType dtype) {
  const size_t bytes = checked_nbytes(shape, dtype);
  PMX_CHECK(memory.bytes >= bytes, "external memory of ", memory.bytes,
            " bytes is too small for an array of shape ", shape_str(shape), " and dtype ",
            dtype_name(dtype), " (", bytes, " bytes)");
  PMX_CHECK(bytes == 0 || memory.dptr != nullptr, "external memory of ", memory.bytes,
            " bytes at a null address");
  PMX_CHECK(bytes == 0 || reinterpret_cast<uintptr_t>(memory.dptr) % dtype_size(dtype) == 0,
            "external memory at address ", memory.dptr, " is not aligned to the ",
            dtype_size(dtype), "-byte elements of dtype ", dtype_name(dtype));
  NDArray out;
  out.chunk_ = std::make_shared<Chunk>(memory);
  out.shape_ = shape;
  out.dtype_ = dtype;
  out.device_ = memory.device;
  return out;
}

TBlob NDArray::blob() const {
  PMX_ASSERT(chunk_ != nullptr, "blob() of a none array");
  TBlob b;
  void* base = chunk_->data(nullptr);
  b.dptr = base == nullptr ? nullptr : static_cast<char*>(base) + byte_offset_;
  b.shape = shape_;
  b.dtype = dtype_;
  b.device = device_;
  return b;
}

NDArray NDArray::reshape_view(const Shape& shape) const {
  PMX_CHECK(shape_size(shape) == size(), "cannot reshape array of shape ", shape_str(shape_),
            " (", size(), " elements) into shape ", shape_str(shape), " (", shape_size(shape),
            " elements)");
  NDArray v = *this;
  v.shape_ = shape;
  v.entry_ = AutogradEntry();
  return v;
}

NDArray NDArray::slice_view(int64_t begin, int64_t end) const {
  PMX_CHECK(ndim() >= 1, "slice_view of a 0-d array");
  PMX_CHECK(0 <= begin && begin <= end && end <= shape_[0], "slice [", begin, ", ", end,
            ") out of range for axis 0 of length ", shape_[0]);
  NDArray v = *this;
  const size_t row_bytes = nbytes() / (shape_[0] == 0 ? 1 : static_cast<size_t>(shape_[0]));
  v.byte_offset_ += static_cast<size_t>(begin) * row_bytes;
  v.shape_[0] = end - begin;
  v.entry_ = AutogradEntry();
  return v;
}

NDArray NDArray::at_view(int64_t index) const {
  PMX_CHECK(ndim() >= 1, "at_view of a 0-d array");
  PMX_CHECK(0 <= index && index < shape_[0], "index ", index,
            " out of range for axis 0 of length ", shape_[0]);
  NDArray v = slice_view(index, index + 1);
  v.shape_.erase(v.shape_.begin());
  return v;
}

void NDArray::wait_to_read() const {
  if (chunk_) Engine::get()->wait_for_var(chunk_->var);
}

void NDArray::wait_to_write() const {
  if (!chunk_) return;
  // wait_for_var waits for writes only; an empty write op also waits for pending reads.
  Engine::get()->push_sync([](RunContext) {}, device_, {}, {chunk_->var}, FnProperty::kNormal, 0,
                           "wait_to_write");
  Engine::get()->wait_for_var(chunk_->var);
}

void NDArray::sync_copy_from_cpu(const void* data, size_t bytes) {
  PMX_CHECK(bytes == nbytes(), "sync_copy_from_cpu: got ", bytes, " bytes for an array of shape ",
            shape_str(shape_), " and dtype ", dtype_name(dtype_), " (", nbytes(), " bytes)");
  if (bytes == 0) return;
  const TBlob dst = blob();
  // Pushed as a write (not a plain memcpy after a wait) so that pending readers finish first.
  // `data` stays valid because we wait before returning.
  if (device_.is_host()) {
    Engine::get()->push_sync([dst, data, bytes](RunContext) { std::memcpy(dst.dptr, data, bytes); },
                             device_, {}, {chunk_->var}, FnProperty::kNormal, 0,
                             "sync_copy_from_cpu");
  } else {
    Engine::get()->push_sync(
        [dst, data, bytes](RunContext ctx) {
          gpu::copy_host_to_device(dst.dptr, data, bytes, ctx.stream);
          gpu::stream_synchronize(ctx.stream);
        },
        device_, {}, {chunk_->var}, FnProperty::kCopyToGPU, 0, "sync_copy_from_cpu");
  }
  Engine::get()->wait_for_var(chunk_->var);
}

void NDArray::sync_copy_to_cpu(void* data, size_t bytes) const {
  PMX_CHECK(bytes == nbytes(), "sync_copy_to_cpu: got ", bytes, " bytes for an array of shape ",
            shape_str(shape_), " and dtype ", dtype_name(dtype_), " (", nbytes(), " bytes)");
  if (chunk_ == nullptr) return;
  if (device_.is_host()) {
    Engine::get()->wait_for_var(chunk_->var);
    if (bytes != 0) std::memcpy(data, blob().dptr, bytes);
    return;
  }
  if (bytes == 0) {
    Engine::get()->wait_for_var(chunk_->var);
    return;
  }
  // A dummy var orders the wait: the copy reads this array and writes `done`.
  const TBlob src = blob();
  VarHandle done = Engine::get()->new_var();
  Engine::get()->push_sync(
      [src, data, bytes](RunContext ctx) {
        gpu::copy_device_to_host(data, src.dptr, bytes, ctx.stream);
        gpu::stream_synchronize(ctx.stream);
      },
      device_, {chunk_->var}, {done}, FnProperty::kCopyFromGPU, 0, "sync_copy_to_cpu");
  try {
    Engine::get()->wait_for_var(done);
  } catch (...) {
    Engine::get()->delete_var({}, device_, done);
    throw;
  }
  Engine::get()->delete_var({}, device_, done);
}

void NDArray::copy_to(NDArray& dst) const {
  PMX_CHECK(!is_none() && !dst.is_none(), "copy_to: source or destination is a none array");
  PMX_CHECK(shape_ == dst.shape_, "copy_to: source shape ", shape_str(shape_),
            " differs from destination shape ", shape_str(dst.shape_));
  if (same_array(dst)) return;
  Engine* engine = Engine::get();
  const Device src_dev = device_, dst_dev = dst.device_;
  const size_t bytes = nbytes();

  if (src_dev.is_host() && dst_dev.is_host()) {
    const TBlob in = blob(), out = dst.blob();
    engine->push_sync(
        [in, out, bytes](RunContext) {
          if (in.dtype == out.dtype) {
            if (bytes != 0) std::memcpy(out.dptr, in.dptr, bytes);
          } else {
            cast_cpu(in, out);
          }
        },
        dst_dev, {var()}, {dst.var()}, FnProperty::kNormal, 0, "copy_to");
    return;
  }
  // Across host and GPU the bytes move unchanged; a dtype change happens on the host side (or,
  // GPU to GPU, with the cast op on the destination).
  if (dtype_ != dst.dtype_) {
    if (src_dev.is_host()) {
      NDArray converted(shape_, src_dev, dst.dtype_);
      copy_to(converted);
      converted.copy_to(dst);
    } else if (dst_dev.is_host()) {
      NDArray raw(shape_, dst_dev, dtype_);
      copy_to(raw);
      raw.copy_to(dst);
    } else {
      NDArray raw(shape_, dst_dev, dtype_);
      copy_to(raw);
      Attrs attrs{{"dtype", dtype_name(dst.dtype_)}};
      invoke(op_registry::get("cast"), {raw}, attrs, dst_dev, {dst});
    }
    return;
  }
  if (bytes == 0) return;
  const void* src_ptr = blob().dptr;
  void* dst_ptr = dst.blob().dptr;
  if (src_dev.is_host()) {
    engine->push_sync(
        [dst_ptr, src_ptr, bytes](RunContext ctx) {
          gpu::copy_host_to_device(dst_ptr, src_ptr, bytes, ctx.stream);
        },
        dst_dev, {var()}, {dst.var()}, FnProperty::kCopyToGPU, 0, "copy_to");
  } else if (dst_dev.is_host()) {
    engine->push_sync(
        [dst_ptr, src_ptr, bytes](RunContext ctx) {
          gpu::copy_device_to_host(dst_ptr, src_ptr, bytes, ctx.stream);
        },
        src_dev, {var()}, {dst.var()}, FnProperty::kCopyFromGPU, 0, "copy_to");
  } else {
    const int dst_id = dst_dev.id, src_id = src_dev.id;
    engine->push_sync(
        [dst_ptr, dst_id, src_ptr, src_id, bytes](RunContext ctx) {
          gpu::copy_device_to_device(dst_ptr, dst_id, src_ptr, src_id, bytes, ctx.stream);
        },
        src_dev, {var()}, {dst.var()}, FnProperty::kCopyFromGPU, 0, "copy_to");
  }
}

NDArray NDArray::copy_to(Device device) const {
  PMX_CHECK(!is_none(), "copy_to: source is a none array");
  NDArray dst(shape_, device, dtype_);
  copy_to(dst);
  return dst;
}

}  // namespace pymx
