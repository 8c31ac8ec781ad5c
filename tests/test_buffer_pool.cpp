#include <catch2/catch.hpp>

#include <malloc.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "codecs/buffer_pool.hpp"
#include "compressor/gop_codec.hpp"
#include "predictor/predictor.hpp"
#include "support/gop_frames.hpp"

using namespace tezip;
using codecs::BufferAllocator;
using codecs::kPooledBytes;

TEST_CASE("the buffer pool hands a released block out again", "[pool]") {
  const std::size_t bytes = 3 * kPooledBytes + 100;
  void* block = codecs::pooled_acquire(bytes);
  std::memset(block, 7, bytes);
  const std::size_t before = codecs::pooled_bytes();
  codecs::pooled_release(block, bytes);
  CHECK(codecs::pooled_bytes() > before);
  // The same size class (sizes are rounded up to a quarter octave), the same block.
  void* again = codecs::pooled_acquire(bytes - 50);
  CHECK(again == block);
  CHECK(codecs::pooled_bytes() == before);
  codecs::pooled_release(again, bytes - 50);
}

TEST_CASE("a new pooled block is resident before it is written, where the kernel can fault it in at once", "[pool]") {
  // The pool asks for MADV_POPULATE_WRITE (Linux 5.14): without it every page of a new block would
  // fault on its first write (docs/performance.md, "Blocks faulted in at once").
  const long page = ::sysconf(_SC_PAGESIZE);
  void* probe = ::mmap(nullptr, std::size_t(page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(probe != MAP_FAILED);
#ifdef MADV_POPULATE_WRITE
  const bool can_populate = ::madvise(probe, std::size_t(page), MADV_POPULATE_WRITE) == 0;
#else
  const bool can_populate = false;
#endif
  ::munmap(probe, std::size_t(page));
  if (!can_populate) {
    WARN("this kernel cannot fault a mapping in at once (MADV_POPULATE_WRITE): nothing to check");
    return;
  }
  // Sizes of their own classes (not handed out before), below and above 2 MiB (huge-page advice).
  for (const std::size_t bytes : {std::size_t{(1u << 20) + 3 * (1u << 18)}, std::size_t{(5u << 20) + 3 * (5u << 18)}}) {
    auto* block = static_cast<unsigned char*>(codecs::pooled_acquire(bytes));
    const std::size_t pages = (bytes + std::size_t(page) - 1) / std::size_t(page);
    std::vector<unsigned char> resident(pages);
    REQUIRE(::mincore(block, bytes, resident.data()) == 0);
    std::size_t in = 0;
    for (unsigned char r : resident) in += r & 1;
    CHECK(in == pages);
    const char* huge = std::getenv("TEZIP_HUGE_PAGES");
    if (bytes >= (std::size_t{2} << 20) && (huge == nullptr || std::string(huge) != "0"))  // aligned for huge pages
      CHECK(reinterpret_cast<std::uintptr_t>(block) % (std::size_t{2} << 20) == 0);
    block[0] = 1, block[bytes - 1] = 2;  // and writable to its end
    CHECK(int(block[0]) + block[bytes - 1] == 3);
    codecs::pooled_release(block, bytes);
  }
}

TEST_CASE("without a fixed cap the pool keeps as much as was in use at once, past 256 MB", "[pool]") {
  if (std::getenv("TEZIP_BUFFER_POOL_MB") != nullptr) {
    WARN("TEZIP_BUFFER_POOL_MB is set: the pool's cap is fixed, nothing to check");
    return;
  }
  // Blocks that earlier test cases in this process left to the pool count against its cap.
  codecs::pooled_trim();
  CHECK(codecs::pooled_bytes() == 0);
  // Four blocks of 96 MB (a size class of its own) in use at once: 384 MB.
  const std::size_t bytes = std::size_t{96} << 20;
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(codecs::pooled_acquire(bytes));
  const std::size_t before = codecs::pooled_bytes();
  for (void* b : blocks) codecs::pooled_release(b, bytes);
  CHECK(codecs::pooled_bytes() - before == 4 * bytes);  // a cap of 256 MB kept two
  for (void*& b : blocks) b = codecs::pooled_acquire(bytes);
  CHECK(codecs::pooled_bytes() == before);  // all four handed out again
  for (void* b : blocks) codecs::pooled_release(b, bytes);
}

TEST_CASE("vectors on the pooled allocator keep their values and leave small blocks to malloc", "[pool]") {
  const std::size_t held = codecs::pooled_bytes();
  {
    std::vector<std::uint16_t, BufferAllocator<std::uint16_t>> small(100, 3);
    CHECK(small[99] == 3);
  }
  CHECK(codecs::pooled_bytes() == held);  // under kPooledBytes: not kept
  std::vector<std::uint32_t, BufferAllocator<std::uint32_t>> grown;
  for (std::uint32_t i = 0; i < 300000; ++i) grown.push_back(i * 2654435761u);
  for (std::uint32_t i = 0; i < 300000; i += 997) REQUIRE(grown[i] == i * 2654435761u);
  const auto copy = grown;
  CHECK(copy == grown);
}

TEST_CASE("a forked child starts with an empty pool", "[pool]") {
  void* block = codecs::pooled_acquire(2 * kPooledBytes);
  codecs::pooled_release(block, 2 * kPooledBytes);
  REQUIRE(codecs::pooled_bytes() >= 2 * kPooledBytes);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(codecs::pooled_bytes() == 0 ? 0 : 1);
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(codecs::pooled_bytes() >= 2 * kPooledBytes);  // the parent keeps its blocks
}

TEST_CASE("the pool's blocks are mappings of their own, whatever malloc's thresholds", "[pool]") {
  // A process that has freed large blocks (tensors, frames) has glibc's mmap threshold raised up to
  // 32 MiB; malloc would then carve a 1 MiB block out of an arena that shrinks and grows (and
  // faults its pages in again). The pool maps its blocks itself: page-aligned, in any process.
  // Checked in a child, so that the threshold set here changes no other test.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
#ifdef M_MMAP_THRESHOLD
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
#endif
    const std::size_t page = std::size_t(::sysconf(_SC_PAGESIZE));
    bool aligned = true;
    std::vector<std::pair<void*, std::size_t>> blocks;
    for (std::size_t bytes = kPooledBytes; bytes <= (std::size_t{4} << 20); bytes = bytes * 3 / 2) {
      void* block = codecs::pooled_acquire(bytes);
      std::memset(block, 1, bytes);
      aligned = aligned && reinterpret_cast<std::uintptr_t>(block) % page == 0;
      blocks.emplace_back(block, bytes);
    }
    for (const auto& [block, bytes] : blocks) codecs::pooled_release(block, bytes);
    ::_exit(aligned ? 0 : 1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("decoded frames do not depend on what pooled blocks held before", "[pool][gop]") {
  // Frames and plane buffers of 256 x 192 are pooled (98 KB and more). Fill blocks of every
  // size class from 64 KB to 8 MB with a pattern and give them back, so that the decoder's
  // buffers come out of the pool dirty; the decoded GOP must equal the encoder's reconstruction.
  std::vector<std::pair<void*, std::size_t>> dirty;
  for (std::size_t bytes = kPooledBytes; bytes <= (std::size_t{8} << 20); bytes += bytes / 4)
    for (int k = 0; k < 3; ++k) {
      void* block = codecs::pooled_acquire(bytes);
      std::memset(block, 0xA5, bytes);
      dirty.emplace_back(block, bytes);
    }
  for (const auto& [block, bytes] : dirty) codecs::pooled_release(block, bytes);
  const FrameShape shape{256, 192, 1, 255};
  const auto frames = test::moving_scene(shape, 6, 9);
  for (const char* name : {"previous", "intra", "bidirectional"}) {
    INFO(name);
    const auto predictor = make_classical_predictor(name);
    CodingSettings settings;
    const GopFrames* gops[] = {&frames};
    const auto encoded = encode_gops(*predictor, shape, gops, settings);
    const std::span<const std::uint8_t> chunks[] = {encoded[0].bytes};
    const std::size_t counts[] = {frames.size()};
    const auto decoded = decode_gops(*predictor, shape, chunks, counts, settings);
    REQUIRE(decoded[0] == frames);  // lossless
  }
}
