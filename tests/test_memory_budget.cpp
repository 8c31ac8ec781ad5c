#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <limits>

#include "compressor/memory_budget.hpp"

using namespace tezip;

TEST_CASE("the GOPs in flight are what memory holds, between 1 and 2 per thread", "[memory]") {
  constexpr std::uint64_t GB = std::uint64_t{1} << 30;
  CHECK(batches_in_flight(2, GB, 100 * GB) == 4);  // room for all: 2 per thread
  CHECK(batches_in_flight(8, GB, 5 * GB) == 5);
  CHECK(batches_in_flight(8, GB, 5 * GB - 1) == 4);
  CHECK(batches_in_flight(2, GB, GB / 2) == 1);  // not even one: one at a time
  CHECK(batches_in_flight(2, GB, 0) == 1);
  CHECK(batches_in_flight(3, GB, std::numeric_limits<std::uint64_t>::max()) == 6);  // unknown: no limit
  CHECK(batches_in_flight(0, GB, 100 * GB) == 2);
}

TEST_CASE("a GOP's estimate grows with its pixels, and TEZIP_MEMORY_MB sets the memory available", "[memory]") {
  Geometry g;
  g.width = 768, g.height = 576, g.channels = 3, g.type = PixelType::U8;
  // Measured on colour vtest: 1.1 GB for a GOP of 32 such frames (compressor/memory_budget.hpp).
  const std::uint64_t gop = gop_memory_bytes(g, 32);
  CHECK(gop > std::uint64_t{1000} << 20);
  CHECK(gop < std::uint64_t{1300} << 20);
  CHECK(gop_memory_bytes(g, 16) * 2 == gop);
  ::setenv("TEZIP_MEMORY_MB", "300", 1);
  CHECK(available_memory_bytes() == std::uint64_t{300} << 20);
  ::setenv("TEZIP_MEMORY_MB", "lots", 1);  // not a number: the system's own figure
  CHECK(available_memory_bytes() != std::uint64_t{300} << 20);
  ::unsetenv("TEZIP_MEMORY_MB");
  CHECK(available_memory_bytes() > 0);
}
