#include "codecs/buffer_pool.hpp"

#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace tezip::codecs {
namespace {

// Size classes four to an octave: a block is rounded up to 2^k, 1.25, 1.5 or 1.75 times it (at
// most 25% more than asked), so a GOP's buffers of one geometry always land in the same classes.
std::size_t class_size(std::size_t bytes) {
  const int k = std::bit_width(bytes - 1) - 1;  // 2^k < bytes <= 2^(k+1), bytes >= kPooledBytes
  const std::size_t base = std::size_t{1} << k, quarter = base / 4;
  return base + (bytes - base + quarter - 1) / quarter * quarter;
}

// TEZIP_BUFFER_POOL_MB, where set to a number: a fixed cap.
std::optional<std::size_t> cap_from_environment() {
  if (const char* v = std::getenv("TEZIP_BUFFER_POOL_MB")) {
    char* end = nullptr;
    const unsigned long long mb = std::strtoull(v, &end, 10);
    if (end != v && *end == '\0') return std::size_t(mb) << 20;
  }
  return std::nullopt;
}

constexpr std::size_t kDefaultCap = std::size_t{256} << 20;

struct Pool {
  std::mutex mutex;
  std::unordered_map<std::size_t, std::vector<void*>> free;  // class size -> blocks
  std::size_t held = 0;
  std::size_t in_use = 0, peak = 0;  // bytes of blocks handed out and not given back; their most
  const std::optional<std::size_t> fixed_cap = cap_from_environment();

  // Without a fixed cap the pool keeps up to what the process once had in use at a time (at least
  // kDefaultCap): memory it has shown it needs again, so that what it maps never passes that peak
  // for long. A Python loader of colour 768x576 video holds several GOPs of 85 MB in flight; a
  // cap of 256 MB left half its page faults in place (docs/performance.md, "The pool keeps what
  // the process uses").
  std::size_t cap() const { return fixed_cap ? *fixed_cap : std::max(kDefaultCap, peak); }
};

Pool& pool();

// The pool's blocks are mappings of their own, not malloc's: where malloc puts a block depends on
// the process's history (glibc raises its mmap threshold up to 32 MiB as large blocks are freed, so
// in a process that has freed large tensors or frames, blocks below that come from malloc's arenas,
// which give memory back and fault it in again as they shrink and grow). A DataLoader worker forked
// from such a process decoded colour vtest at 57-141 frames/s instead of 390-420
// (docs/performance.md, "The buffer pool's own mappings").
//
// A new block is faulted in at once (MADV_POPULATE_WRITE, Linux 5.14) rather than page by page as
// it is first written: one call instead of a page fault for each 4 KiB (on this project's VM the
// faults were 16-23% of the CPU time of decoding a colour clip of four GOPs: docs/performance.md,
// "Blocks faulted in at once"). Blocks of 2 MiB and more are aligned to 2 MiB and offered transparent huge pages
// (MADV_HUGEPAGE: where the system allows them, one page for each 2 MiB). Both are advice: a
// kernel that refuses them leaves the block as an ordinary mapping, faulted in as it is used.
// TEZIP_HUGE_PAGES=0 leaves every block to small pages (where the kernel's compaction to find huge
// pages, `defrag` in /sys/kernel/mm/transparent_hugepage, would stall a job).
constexpr std::size_t kHugePage = std::size_t{2} << 20;

bool huge_pages_wanted() {
  static const bool wanted = [] {
    const char* v = std::getenv("TEZIP_HUGE_PAGES");
    return v == nullptr || std::string(v) != "0";
  }();
  return wanted;
}

void* map_block(std::size_t size) {
  const std::size_t slack = size >= kHugePage && huge_pages_wanted() ? kHugePage : 0;
  void* mapped = ::mmap(nullptr, size + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) throw std::bad_alloc();
  char* block = static_cast<char*>(mapped);
  if (slack != 0) {
    // Keep the 2 MiB-aligned `size` bytes inside the mapping; give back what lies before and after.
    const std::uintptr_t at = reinterpret_cast<std::uintptr_t>(block);
    char* aligned = block + ((kHugePage - at % kHugePage) % kHugePage);
    if (aligned > block) ::munmap(block, std::size_t(aligned - block));
    if (const std::size_t after = std::size_t(block + size + slack - (aligned + size)); after > 0) ::munmap(aligned + size, after);
    block = aligned;
    ::madvise(block, size, MADV_HUGEPAGE);
  }
#ifdef MADV_POPULATE_WRITE
  ::madvise(block, size, MADV_POPULATE_WRITE);
#endif
  return block;
}
void unmap_block(void* block, std::size_t size) noexcept { ::munmap(block, size); }

// A forked child (a DataLoader worker) does not take over its parent's blocks: writing them would
// copy each page from the parent. The pool's lock is held across fork so the child finds the
// lists consistent; the child then unmaps its copies of the blocks (its own mappings).
void lock_for_fork() { pool().mutex.lock(); }
void unlock_in_parent() { pool().mutex.unlock(); }
// Unmaps the blocks the pool holds; the caller holds its lock.
void unmap_held(Pool& p) noexcept {
  for (auto& [size, blocks] : p.free)
    for (void* block : blocks) unmap_block(block, size);
  p.free.clear();
  p.held = 0;
}
void empty_in_child() {
  Pool& p = pool();
  unmap_held(p);
  p.mutex.unlock();
}

// Never destroyed: blocks may be released by other static objects' destructors at exit.
Pool& pool() {
  static Pool* p = [] {
    auto* made = new Pool;
    ::pthread_atfork(lock_for_fork, unlock_in_parent, empty_in_child);
    return made;
  }();
  return *p;
}

}  // namespace

void* pooled_acquire(std::size_t bytes) {
  const std::size_t size = class_size(bytes);
  Pool& p = pool();
  {
    std::lock_guard lock(p.mutex);
    p.in_use += size;
    p.peak = std::max(p.peak, p.in_use);
    if (auto it = p.free.find(size); it != p.free.end() && !it->second.empty()) {
      void* block = it->second.back();
      it->second.pop_back();
      p.held -= size;
      return block;
    }
  }
  try {
    return map_block(size);
  } catch (...) {
    std::lock_guard lock(p.mutex);
    p.in_use -= size;
    throw;
  }
}

void pooled_release(void* block, std::size_t bytes) noexcept {
  if (block == nullptr) return;
  const std::size_t size = class_size(bytes);
  Pool& p = pool();
  {
    std::lock_guard lock(p.mutex);
    p.in_use -= std::min(p.in_use, size);
    if (p.held + size <= p.cap()) {
      try {
        p.free[size].push_back(block);
        p.held += size;
        return;
      } catch (...) {
        // No room for the bookkeeping: free the block instead.
      }
    }
  }
  unmap_block(block, size);
}

void pooled_trim() noexcept {
  Pool& p = pool();
  std::lock_guard lock(p.mutex);
  unmap_held(p);
}

std::size_t pooled_bytes() {
  Pool& p = pool();
  std::lock_guard lock(p.mutex);
  return p.held;
}

}  // namespace tezip::codecs
