// The engine on a GPU, through gpu.h only (no kernels): copy chains across the compute streams
// and the copy streams must see each other's results (event waits), a host op must see a
// device-to-host copy (event synchronize), a copy must not overwrite a buffer a running op still
// reads, and deletions run on a worker stream. Two compute workers per GPU, so consecutive ops
// alternate streams. Skips (exit 0) when no GPU is visible.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "pymx/engine.h"
#include "pymx/gpu.h"
#include "test_util.h"

using namespace pymx;

namespace {

constexpr size_t kCount = size_t(16) << 20;  // floats per buffer (64 MiB)
constexpr size_t kBytes = kCount * sizeof(float);
const Device kGpu = Device::gpu(0);

struct Buffer {
  StorageHandle handle;
  VarHandle var;
};

Buffer device_buffer(Engine* e) { return {gpu::alloc(0, kBytes, nullptr), e->new_var()}; }

float* pinned(float value) {
  float* p = static_cast<float*>(gpu::alloc_pinned(kBytes));
  for (size_t i = 0; i < kCount; ++i) p[i] = value + static_cast<float>(i % 1000);
  return p;
}

void upload(Engine* e, Buffer& dst, const float* src, VarHandle src_var) {
  void* d = dst.handle.dptr;
  e->push_sync([d, src](RunContext ctx) { gpu::copy_host_to_device(d, src, kBytes, ctx.stream); },
               kGpu, {src_var}, {dst.var}, FnProperty::kCopyToGPU);
}

// Copies `src` into `dst` `repeat` times on a compute stream (long enough to expose races).
void device_copy(Engine* e, Buffer& dst, const Buffer& src, int repeat) {
  void* d = dst.handle.dptr;
  const void* s = src.handle.dptr;
  e->push_sync([d, s, repeat](RunContext ctx) {
    for (int i = 0; i < repeat; ++i) gpu::copy_device_to_device(d, 0, s, 0, kBytes, ctx.stream);
  }, kGpu, {src.var}, {dst.var});
}

void download(Engine* e, float* dst, VarHandle dst_var, const Buffer& src) {
  const void* s = src.handle.dptr;
  e->push_sync([dst, s](RunContext ctx) { gpu::copy_device_to_host(dst, s, kBytes, ctx.stream); },
               kGpu, {src.var}, {dst_var}, FnProperty::kCopyFromGPU);
}

size_t mismatches(const float* data, float value) {
  size_t bad = 0;
  for (size_t i = 0; i < kCount; ++i) bad += data[i] != value + static_cast<float>(i % 1000);
  return bad;
}

void free_buffer(Engine* e, Buffer& b, bool* ran_on_stream) {
  StorageHandle h = b.handle;
  e->delete_var([h, ran_on_stream](RunContext ctx) mutable {
    if (ran_on_stream != nullptr) *ran_on_stream = ctx.stream != nullptr;
    if (ctx.stream != nullptr) h.stream = ctx.stream;
    gpu::free(h);
  }, kGpu, b.var);
}

void test_copy_chain(Engine* e) {
  float* junk = pinned(-1.0f);
  float* src = pinned(7.0f);
  float* dst = pinned(0.0f);
  VarHandle junk_var = e->new_var(), src_var = e->new_var(), dst_var = e->new_var(), checked = e->new_var();
  std::vector<Buffer> chain;
  for (int k = 0; k < 8; ++k) chain.push_back(device_buffer(e));
  for (auto& b : chain) upload(e, b, junk, junk_var);  // every buffer starts as junk
  upload(e, chain[0], src, src_var);
  for (size_t k = 1; k < chain.size(); ++k) device_copy(e, chain[k], chain[k - 1], 3);
  download(e, dst, dst_var, chain.back());
  size_t bad_on_host_op = SIZE_MAX;
  e->push_sync([&](RunContext) { bad_on_host_op = mismatches(dst, 7.0f); }, Device::cpu(0),
               {dst_var}, {checked});
  e->wait_for_var(checked);
  EXPECT(bad_on_host_op == 0, bad_on_host_op, " wrong values seen by a host op after D2H");
  e->wait_for_var(dst_var);
  EXPECT(mismatches(dst, 7.0f) == 0, "wrong values after wait_for_var");
  bool on_stream = false;
  for (auto& b : chain) free_buffer(e, b, &on_stream);
  e->wait_for_all();
  EXPECT(on_stream, "a GPU deletion must run on a stream (both engines)");
  for (VarHandle v : {junk_var, src_var, dst_var, checked}) e->delete_var({}, Device::cpu(0), v);
  e->wait_for_all();
  for (float* p : {junk, src, dst}) gpu::free_pinned(p);
}

// A copy into `a` pushed after an op that reads `a` must wait for that read (reader event).
void test_write_after_read(Engine* e) {
  float* first = pinned(1.0f);
  float* second = pinned(2.0f);
  float* out = pinned(0.0f);
  VarHandle first_var = e->new_var(), second_var = e->new_var(), out_var = e->new_var();
  Buffer a = device_buffer(e), b = device_buffer(e);
  upload(e, a, first, first_var);
  device_copy(e, b, a, 40);  // a long read of a on a compute stream
  upload(e, a, second, second_var);  // copy stream: must wait for the read
  download(e, out, out_var, b);
  e->wait_for_var(out_var);
  EXPECT(mismatches(out, 1.0f) == 0, "a copy overwrote a buffer while an op still read it");
  download(e, out, out_var, a);
  e->wait_for_var(out_var);
  EXPECT(mismatches(out, 2.0f) == 0, "the second upload is missing");
  free_buffer(e, a, nullptr);
  free_buffer(e, b, nullptr);
  for (VarHandle v : {first_var, second_var, out_var}) e->delete_var({}, Device::cpu(0), v);
  e->wait_for_all();
  for (float* p : {first, second, out}) gpu::free_pinned(p);
}

}  // namespace

int main() {
  setenv("PYMX_GPU_WORKERS", "2", 0);  // before the first config() read: two compute streams
  if (gpu::device_count() == 0) {
    std::printf("SKIPPED: no GPU visible%s\n", gpu::built_with_cuda() ? "" : " (built without CUDA)");
    return 0;
  }
  for (const char* kind : {"naive", "threaded"}) {
    auto engine = make_engine(kind, 1);
    for (int round = 0; round < 3; ++round) {
      test_copy_chain(engine.get());
      test_write_after_read(engine.get());
    }
    std::printf("%s engine: GPU ordering holds\n", kind);
  }
  std::printf("PASSED\n");
  return 0;
}
