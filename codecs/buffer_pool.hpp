#pragma once
// Large buffers kept for reuse. Decoding a GOP allocates frames and plane buffers of hundreds of KB
// to hundreds of MB; glibc hands such blocks out by mmap and returns them by munmap, so every GOP
// faults its buffers in again, page by page, zeroed by the kernel. On this project's machines a
// third or more of a Python loader's time went there (docs/performance.md, "Buffers kept for
// reuse"). Blocks of at least kPooledBytes freed through BufferAllocator are kept, by size class,
// up to a cap on the bytes kept, and handed out again: TEZIP_BUFFER_POOL_MB where set, else the
// most the process has had in use at once, at least 256 MB. The blocks are anonymous mappings of the
// pool's own (mmap), so where they live never depends on malloc's state in the host process
// ("The buffer pool's own mappings"); the host's malloc settings stay as they are.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace tezip::codecs {

inline constexpr std::size_t kPooledBytes = std::size_t{64} << 10;

// A block of at least `bytes` (>= kPooledBytes), from the pool or from malloc; its size class is
// what pooled_release must be told. Throws std::bad_alloc.
void* pooled_acquire(std::size_t bytes);
// Gives a block back (the same `bytes` it was acquired with): kept while the pool holds less than
// its cap (TEZIP_BUFFER_POOL_MB, 0: none kept; unset: the peak of the bytes in use, at least
// 256 MB), else freed.
void pooled_release(void* block, std::size_t bytes) noexcept;
// Bytes the pool holds now (tests, diagnostics).
std::size_t pooled_bytes();
// Unmaps every block the pool holds (not those in use): their memory back to the system, as after
// a job that will not decode again; the peak it keeps to stays as it was.
void pooled_trim() noexcept;

// A std::allocator that leaves new elements uninitialized (default-initialized, not zeroed: for
// buffers written in full before they are read) and takes blocks of kPooledBytes or more from the
// pool above.
template <class T>
struct BufferAllocator : std::allocator<T> {
  using value_type = T;
  template <class U>
  struct rebind {
    using other = BufferAllocator<U>;
  };
  BufferAllocator() noexcept = default;
  template <class U>
  BufferAllocator(const BufferAllocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    if (n > std::size_t(-1) / sizeof(T)) throw std::bad_array_new_length();
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kPooledBytes) return std::allocator<T>::allocate(n);
    return static_cast<T*>(pooled_acquire(bytes));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kPooledBytes) {
      std::allocator<T>::deallocate(p, n);
    } else {
      pooled_release(p, bytes);
    }
  }
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <class U>
  bool operator==(const BufferAllocator<U>&) const noexcept {
    return true;
  }
};

// Bytes in a pooled block (from kPooledBytes), uninitialized until written: chunks as read, clips.
using PooledBytes = std::vector<std::uint8_t, BufferAllocator<std::uint8_t>>;

}  // namespace tezip::codecs
