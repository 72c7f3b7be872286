// A pool of fixed-size engine objects (ops, var queue blocks, vars).
#pragma once

#include <cstddef>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace pymx {

// Note [Why the engine pools its objects]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Ops and var blocks are allocated on the pushing thread and freed on a worker. With malloc that
// producer/consumer pattern defeats the per-thread caches and spends most of a tiny op in
// malloc's slow path (measured: ~40% of the time of `x = x + 1`). Here each thread keeps its own
// free list; a thread holding too many free slots hands a batch to a shared list, and a thread
// with none takes a batch from it (one lock per kBatch objects). Slots are never returned to the
// system. The per-thread state is plain data (no destructor), so objects can still be created
// and destroyed during static destruction; worker threads return their slots when they exit.
template <typename T>
class ObjectPool {
 public:
  template <typename... Args>
  static T* create(Args&&... args) {
    return new (pop()) T(std::forward<Args>(args)...);
  }

  static void destroy(T* object) {
    object->~T();
    push(reinterpret_cast<Slot*>(object));
  }

  // Hands this thread's free slots to the shared list (a thread about to exit).
  static void release_thread_cache() {
    if (t_head == nullptr) return;
    give_batch(t_head);
    t_head = nullptr;
    t_count = 0;
  }

 private:
  union Slot {
    Slot* next;
    alignas(T) unsigned char storage[sizeof(T)];
  };
  static constexpr size_t kBatch = 64;

  struct Shared {
    std::mutex mu;
    std::vector<Slot*> batches;  // each a null-terminated chain of free slots
  };
  static Shared& shared() {
    static Shared* instance = new Shared;  // never destroyed: used during static destruction
    return *instance;
  }

  static void give_batch(Slot* chain) {
    std::lock_guard<std::mutex> lock(shared().mu);
    shared().batches.push_back(chain);
  }

  static void* pop() {
    if (t_head == nullptr) {
      {
        std::lock_guard<std::mutex> lock(shared().mu);
        if (!shared().batches.empty()) {
          t_head = shared().batches.back();
          shared().batches.pop_back();
        }
      }
      if (t_head == nullptr) {
        Slot* block = static_cast<Slot*>(::operator new(sizeof(Slot) * kBatch));
        for (size_t i = 0; i < kBatch; ++i) block[i].next = i + 1 < kBatch ? &block[i + 1] : nullptr;
        t_head = block;
      }
      t_count = 0;  // unknown length: counts only what this thread adds from here on
    }
    Slot* slot = t_head;
    t_head = slot->next;
    if (t_count > 0) --t_count;
    return slot;
  }

  static void push(Slot* slot) {
    slot->next = t_head;
    t_head = slot;
    if (++t_count < 2 * kBatch) return;
    // Keep kBatch slots, hand the rest (the older ones) to the shared list.
    Slot* keep_tail = t_head;
    for (size_t i = 1; i < kBatch; ++i) keep_tail = keep_tail->next;
    Slot* rest = keep_tail->next;
    keep_tail->next = nullptr;
    t_count = kBatch;
    if (rest != nullptr) give_batch(rest);
  }

  static thread_local Slot* t_head;
  static thread_local size_t t_count;
};

template <typename T>
thread_local typename ObjectPool<T>::Slot* ObjectPool<T>::t_head = nullptr;
template <typename T>
thread_local size_t ObjectPool<T>::t_count = 0;

// Note [Recycled objects]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Like ObjectPool, but objects stay constructed between uses, so the capacity of their vectors
// and strings is kept: an object refilled with data of the same sizes allocates nothing. T
// needs a `T* pool_next` member (the free-list link) and a default constructor. Objects are
// handed between threads in batches as in ObjectPool; a thread's cached objects go to the
// shared list when the thread exits (a thread_local releaser registered on first use).
template <typename T>
class RecyclingPool {
 public:
  static T* acquire() {
    if (t_head == nullptr) {
      (void)&t_releaser;  // registers the exit hook of this thread
      std::lock_guard<std::mutex> lock(shared().mu);
      if (!shared().batches.empty()) {
        t_head = shared().batches.back();
        shared().batches.pop_back();
      }
      t_count = 0;  // unknown length: counts only what this thread adds from here on
    }
    if (t_head == nullptr) return new T();
    T* object = t_head;
    t_head = object->pool_next;
    if (t_count > 0) --t_count;
    return object;
  }

  static void release(T* object) {
    object->pool_next = t_head;
    t_head = object;
    if (++t_count < 2 * kBatch) return;
    T* keep_tail = t_head;
    for (size_t i = 1; i < kBatch; ++i) keep_tail = keep_tail->pool_next;
    T* rest = keep_tail->pool_next;
    keep_tail->pool_next = nullptr;
    t_count = kBatch;
    if (rest != nullptr) give_batch(rest);
  }

 private:
  static constexpr size_t kBatch = 64;

  struct Shared {
    std::mutex mu;
    std::vector<T*> batches;  // each a null-terminated chain of free objects
  };
  static Shared& shared() {
    static Shared* instance = new Shared;  // never destroyed: used during static destruction
    return *instance;
  }
  static void give_batch(T* chain) {
    std::lock_guard<std::mutex> lock(shared().mu);
    shared().batches.push_back(chain);
  }

  struct ThreadReleaser {
    ~ThreadReleaser() {
      if (t_head != nullptr) give_batch(t_head);
      t_head = nullptr;
      t_count = 0;
    }
  };

  static thread_local T* t_head;
  static thread_local size_t t_count;
  static thread_local ThreadReleaser t_releaser;
};

template <typename T>
thread_local T* RecyclingPool<T>::t_head = nullptr;
template <typename T>
thread_local size_t RecyclingPool<T>::t_count = 0;
template <typename T>
thread_local typename RecyclingPool<T>::ThreadReleaser RecyclingPool<T>::t_releaser;

}  // namespace pymx
