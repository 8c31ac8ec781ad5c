#pragma once
// How many GOPs the encoder may code at once in the memory this process may still take. A GOP in
// flight holds its frames, their reconstructions and forecasts, a colour transform's copy and the
// symbols of every plane: measured at 10-13 times its pixels as 16-bit values (colour vtest, 32
// frames of 768x576: 1.1 GB for 85 MB; 4K colour, 10 frames: 4.9-5.7 GB for 498 MB; docs/performance.md,
// "Memory per GOP"). Where threads times that would not fit (a Slurm task's cgroup limit, a node
// shared with a training job), fewer GOPs are coded at once; the archive is the same either way.
#include <cstddef>
#include <cstdint>

#include "format/frame.hpp"

namespace tezip {

inline constexpr std::uint64_t kGopMemoryFactor = 13;

// The encoder's estimate for one GOP of `frames` frames of this geometry, in bytes.
std::uint64_t gop_memory_bytes(const Geometry& geometry, std::uint64_t frames);

// The memory this process may still take, in bytes: the smaller of /proc/meminfo's MemAvailable
// and the cgroup (v2) limit less its usage; TEZIP_MEMORY_MB (a whole number of MiB), where set,
// instead. UINT64_MAX where none of them can be read.
std::uint64_t available_memory_bytes();

// Batches (of `batch_bytes` each) that may be in flight at once: what the encoder would keep
// (2 per thread: one coding, one read ahead) or as many as `available` holds, at least 1.
std::size_t batches_in_flight(unsigned threads, std::uint64_t batch_bytes, std::uint64_t available);

}  // namespace tezip
