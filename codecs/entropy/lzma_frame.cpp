#include "codecs/entropy/lzma_frame.hpp"

#include <lzma.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "codecs/buffer_pool.hpp"
#include "codecs/codec_error.hpp"
#include "codecs/varint.hpp"

namespace tezip::codecs {
namespace {

constexpr unsigned kMinDictLog = 12, kMaxDictLog = 26;  // 4 KiB .. 64 MiB (preset 9's)

struct StreamEnd {
  void operator()(lzma_stream* s) const {
    lzma_end(s);
    delete s;
  }
};
using Stream = std::unique_ptr<lzma_stream, StreamEnd>;

Stream new_stream() { return Stream(new lzma_stream(LZMA_STREAM_INIT)); }

// The decoder's dictionary (as large as the frame, up to 64 MiB) from the buffer pool, already
// faulted in and reused from frame to frame (codecs/buffer_pool.hpp); each block's size ahead of it,
// which lzma_allocator's free does not pass.
constexpr std::size_t kBlockHeader = 64;
void* pooled_alloc(void*, std::size_t count, std::size_t size) {
  if (size != 0 && count > (SIZE_MAX - kBlockHeader) / size) return nullptr;
  const std::size_t bytes = count * size + kBlockHeader;
  void* block = nullptr;
  try {
    block = bytes >= kPooledBytes ? pooled_acquire(bytes) : std::malloc(bytes);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
  if (block == nullptr) return nullptr;
  std::memcpy(block, &bytes, sizeof bytes);
  return static_cast<std::uint8_t*>(block) + kBlockHeader;
}
void pooled_free(void*, void* p) {
  if (p == nullptr) return;
  void* block = static_cast<std::uint8_t*>(p) - kBlockHeader;
  std::size_t bytes = 0;
  std::memcpy(&bytes, block, sizeof bytes);
  if (bytes >= kPooledBytes)
    pooled_release(block, bytes);
  else
    std::free(block);
}
const lzma_allocator kPooledAllocator{&pooled_alloc, &pooled_free, nullptr};

lzma_options_lzma options_for(unsigned dict_log) {
  lzma_options_lzma options;
  if (lzma_lzma_preset(&options, 9 | LZMA_PRESET_EXTREME)) throw std::runtime_error("liblzma: no preset 9e");
  options.dict_size = std::uint32_t(1) << dict_log;
  return options;
}

}  // namespace

std::vector<std::uint8_t> compress_lzma_frame(std::span<const std::uint8_t> bytes, LzmaContexts contexts) {
  const unsigned dict_log =
      std::clamp<unsigned>(unsigned(std::bit_width(std::max<std::size_t>(bytes.size(), 1) - 1)), kMinDictLog, kMaxDictLog);
  lzma_options_lzma options = options_for(dict_log);
  options.lc = contexts.lc, options.lp = contexts.lp, options.pb = contexts.pb;
  const lzma_filter filters[] = {{LZMA_FILTER_LZMA2, &options}, {LZMA_VLI_UNKNOWN, nullptr}};
  Stream s = new_stream();
  if (lzma_raw_encoder(s.get(), filters) != LZMA_OK) throw std::runtime_error("liblzma: cannot start the encoder");
  std::vector<std::uint8_t> out;
  out.push_back(std::uint8_t(dict_log));
  append_varint(bytes.size(), out);
  const std::size_t header = out.size();
  out.resize(header + bytes.size() + bytes.size() / 16 + 1024);
  s->next_in = bytes.data();
  s->avail_in = bytes.size();
  s->next_out = out.data() + header;
  s->avail_out = out.size() - header;
  for (;;) {
    const lzma_ret r = lzma_code(s.get(), LZMA_FINISH);
    if (r == LZMA_STREAM_END) break;
    if (r != LZMA_OK) throw std::runtime_error("liblzma: encoding failed (" + std::to_string(int(r)) + ")");
    if (s->avail_out == 0) {
      const std::size_t done = out.size();
      out.resize(done * 2);
      s->next_out = out.data() + done;
      s->avail_out = out.size() - done;
    }
  }
  out.resize(out.size() - s->avail_out);
  return out;
}

PooledBytes decompress_lzma_frame(std::span<const std::uint8_t> frame, std::size_t min_size, std::size_t max_size,
                                  const char* what) {
  const std::string w = what;
  if (frame.empty()) throw CodecError(w + ": empty");
  const unsigned dict_log = frame[0];
  if (dict_log < kMinDictLog || dict_log > kMaxDictLog) throw CodecError(w + ": bad LZMA dictionary size");
  std::size_t pos = 1;
  const std::uint64_t size = read_varint(frame, pos);
  if (size < min_size || size > max_size) throw CodecError(w + ": decoded size out of range");
  PooledBytes out(size);
  lzma_options_lzma options = options_for(dict_log);
  const lzma_filter filters[] = {{LZMA_FILTER_LZMA2, &options}, {LZMA_VLI_UNKNOWN, nullptr}};
  Stream s = new_stream();
  s->allocator = &kPooledAllocator;
  if (lzma_raw_decoder(s.get(), filters) != LZMA_OK) throw CodecError(w + ": cannot start the LZMA decoder");
  s->next_in = frame.data() + pos;
  s->avail_in = frame.size() - pos;
  s->next_out = out.data();
  s->avail_out = out.size();
  // One call with everything in and room for exactly `size` bytes: the stream must end there.
  lzma_ret r = lzma_code(s.get(), LZMA_FINISH);
  const std::size_t produced = out.size() - s->avail_out;
  if (r == LZMA_OK && s->avail_out == 0) {
    // The output is full but the stream has not ended: anything more is past the declared size.
    std::uint8_t spare = 0;
    s->next_out = &spare;
    s->avail_out = 1;
    r = lzma_code(s.get(), LZMA_FINISH);
    if (s->avail_out == 0) throw CodecError(w + ": more bytes than declared");
  }
  if (r != LZMA_STREAM_END) throw CodecError(w + ": damaged or truncated LZMA stream");
  if (produced != out.size()) throw CodecError(w + ": fewer bytes than declared");
  if (s->avail_in != 0) throw CodecError(w + ": trailing bytes");
  return out;
}

}  // namespace tezip::codecs
