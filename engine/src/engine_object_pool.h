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

// The free list of both pools below (see the Note): per-thread chains of free nodes linked
// through `Node::*kLink`, traded with the other threads in batches of kBatch.
template <typename Node, Node* Node::*kLink>
class BatchedFreeList {
 public:
  static constexpr size_t kBatch = 64;

  static bool empty() { return t_head == nullptr; }

  // A free node: this thread's, else from a batch of the shared list; null when there is none.
  static Node* pop() {
    if (t_head == nullptr) {
      {
        std::lock_guard<std::mutex> lock(shared().mu);
        if (!shared().batches.empty()) {
          t_head = shared().batches.back();
          shared().batches.pop_back();
        }
      }
      t_count = 0;  // unknown length: counts only what this thread adds from here on
    }
    if (t_head == nullptr) return nullptr;
    Node* node = t_head;
    t_head = node->*kLink;
    if (t_count > 0) --t_count;
    return node;
  }

  // Makes a null-terminated chain of fresh nodes this thread's (empty) free list.
  static void adopt(Node* chain) { t_head = chain; }

  static void push(Node* node) {
    node->*kLink = t_head;
    t_head = node;
    if (++t_count < 2 * kBatch) return;
    // Keep kBatch nodes, hand the rest (the older ones) to the shared list.
    Node* keep_tail = t_head;
    for (size_t i = 1; i < kBatch; ++i) keep_tail = keep_tail->*kLink;
    Node* rest = keep_tail->*kLink;
    keep_tail->*kLink = nullptr;
    t_count = kBatch;
    if (rest != nullptr) give_batch(rest);
  }

  // Hands this thread's free nodes to the shared list (a thread about to exit).
  static void release_thread() {
    if (t_head == nullptr) return;
    give_batch(t_head);
    t_head = nullptr;
    t_count = 0;
  }

 private:
  struct Shared {
    std::mutex mu;
    std::vector<Node*> batches;  // each a null-terminated chain of free nodes
  };
  static Shared& shared() {
    static Shared* instance = new Shared;  // never destroyed: used during static destruction
    return *instance;
  }

  static void give_batch(Node* chain) {
    std::lock_guard<std::mutex> lock(shared().mu);
    shared().batches.push_back(chain);
  }

  static thread_local Node* t_head;
  static thread_local size_t t_count;
};

template <typename Node, Node* Node::*kLink>
thread_local Node* BatchedFreeList<Node, kLink>::t_head = nullptr;
template <typename Node, Node* Node::*kLink>
thread_local size_t BatchedFreeList<Node, kLink>::t_count = 0;

template <typename T>
class ObjectPool {
 public:
  template <typename... Args>
  static T* create(Args&&... args) {
    return new (pop()) T(std::forward<Args>(args)...);
  }

  static void destroy(T* object) {
    object->~T();
    FreeList::push(reinterpret_cast<Slot*>(object));
  }

  // Hands this thread's free slots to the shared list (a thread about to exit).
  static void release_thread_cache() { FreeList::release_thread(); }

 private:
  union Slot {
    Slot* next;
    alignas(T) unsigned char storage[sizeof(T)];
  };
  using FreeList = BatchedFreeList<Slot, &Slot::next>;

  static void* pop() {
    if (Slot* slot = FreeList::pop()) return slot;
    // No free slot anywhere: a new block of kBatch, the first one returned, the rest kept free.
    Slot* block = static_cast<Slot*>(::operator new(sizeof(Slot) * FreeList::kBatch));
    for (size_t i = 0; i < FreeList::kBatch; ++i)
      block[i].next = i + 1 < FreeList::kBatch ? &block[i + 1] : nullptr;
    FreeList::adopt(block[0].next);
    return block;
  }
};

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
    if (FreeList::empty()) (void)&t_releaser;  // registers the exit hook of this thread
    T* object = FreeList::pop();
    return object != nullptr ? object : new T();
  }

  static void release(T* object) { FreeList::push(object); }

  // Hands this thread's cached objects to the shared list (a thread about to exit that may
  // never have acquired one, so has no releaser registered).
  static void release_thread_cache() { FreeList::release_thread(); }

 private:
  using FreeList = BatchedFreeList<T, &T::pool_next>;

  struct ThreadReleaser {
    ~ThreadReleaser() { FreeList::release_thread(); }
  };

  static thread_local ThreadReleaser t_releaser;
};

template <typename T>
thread_local typename RecyclingPool<T>::ThreadReleaser RecyclingPool<T>::t_releaser;

}  // namespace pymx
