#include "loader/reader.hpp"

#include <algorithm>
#include <cstring>
#include <future>
#include <list>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include "format/dataset_index.hpp"
#include "compressor/decoder.hpp"
#include "format/errors.hpp"
#include "loader/chunk_store.hpp"

namespace tezip {

using DecodedGop = GopFrames;

std::uint16_t Clip::at(std::size_t i) const {
  if (geometry.type == PixelType::U8) return data.at(i);
  if (2 * i + 2 > data.size()) throw std::out_of_range("Clip::at");
  std::uint16_t v;
  std::memcpy(&v, data.data() + 2 * i, 2);
  return v;
}

void pack_frames(std::span<const Pixels* const> frames, const Geometry& geometry, ClipLayout layout,
                 std::span<std::uint8_t> out) {
  const std::size_t frame_bytes = geometry.raw_bytes();
  if (out.size() != frames.size() * frame_bytes) throw std::invalid_argument("pack_frames: output size mismatch");
  const std::size_t plane = geometry.plane_size(), channels = geometry.channels;
  for (std::size_t f = 0; f < frames.size(); ++f) {
    const std::uint16_t* in = frames[f]->data();
    if (frames[f]->size() != geometry.pixel_count()) throw DataError("decoded frame has the wrong size");
    std::uint8_t* o = out.data() + f * frame_bytes;
    if (geometry.type == PixelType::U8) {
      if (layout == ClipLayout::Planar || channels == 1) {
        for (std::size_t i = 0; i < plane * channels; ++i) o[i] = std::uint8_t(in[i]);
      } else {
        for (std::size_t c = 0; c < channels; ++c)
          for (std::size_t i = 0; i < plane; ++i) o[i * channels + c] = std::uint8_t(in[c * plane + i]);
      }
    } else {
      auto* o16 = reinterpret_cast<std::uint16_t*>(o);  // vector storage is suitably aligned
      if (layout == ClipLayout::Planar || channels == 1) {
        std::memcpy(o16, in, plane * channels * 2);
      } else {
        for (std::size_t c = 0; c < channels; ++c)
          for (std::size_t i = 0; i < plane; ++i) o16[i * channels + c] = in[c * plane + i];
      }
    }
  }
}

struct Reader::State {
  struct SequenceRef {
    std::size_t archive = 0, local = 0;
  };
  std::vector<std::unique_ptr<ArchiveDecoder>> archives;
  std::vector<std::size_t> first_block;  // of each archive, in the global block numbering
  std::vector<SequenceRef> sequences;
  std::vector<Block> blocks;
  std::vector<std::size_t> block_archive;  // archive of each block
  std::size_t capacity = 1;
  std::shared_ptr<const ChunkStore> store;  // when reading a store's partial copy

  // LRU of decoded GOPs; an entry is in flight until its future is ready, so a second request for
  // a GOP being decoded waits for it instead of decoding it again.
  mutable std::mutex mutex;
  mutable std::list<std::size_t> recency;  // front: most recently used
  struct Entry {
    std::shared_future<std::shared_ptr<const DecodedGop>> value;
    std::list<std::size_t>::iterator position;
    bool ready = false;
  };
  mutable std::unordered_map<std::size_t, Entry> cache;
  mutable CacheStats stats;

  void evict_locked() const {
    // Only finished entries leave; in-flight ones are owned by the thread decoding them.
    auto it = recency.end();
    while (cache.size() > capacity && it != recency.begin()) {
      --it;
      auto e = cache.find(*it);
      if (e != cache.end() && e->second.ready) {
        cache.erase(e);
        it = recency.erase(it);
      }
    }
  }

  void open(const std::vector<std::filesystem::path>& paths) {
    for (const auto& path : paths) {
      const std::size_t a = archives.size();
      archives.push_back(std::make_unique<ArchiveDecoder>(path));
      const auto& index = archives.back()->index();
      const std::size_t sequence_base = sequences.size();
      first_block.push_back(blocks.size());
      for (std::size_t q = 0; q < index.sequences.size(); ++q) sequences.push_back({a, q});
      for (const auto& c : index.chunks) {
        blocks.push_back({sequence_base + std::size_t(c.sequence), std::size_t(c.first_frame), std::size_t(c.frame_count), c.size,
                          blocks.size() - c.stats.member});
        block_archive.push_back(a);
      }
    }
  }

  std::shared_ptr<const DecodedGop> get(std::size_t block) const {
    std::promise<std::shared_ptr<const DecodedGop>> promise;
    {
      std::unique_lock lock(mutex);
      auto found = cache.find(block);
      if (found != cache.end()) {
        ++stats.hits;
        recency.splice(recency.begin(), recency, found->second.position);
        auto value = found->second.value;
        lock.unlock();
        return value.get();  // rethrows the decoding thread's error
      }
      ++stats.misses;
      recency.push_front(block);
      cache.emplace(block, Entry{promise.get_future().share(), recency.begin(), false});
    }
    try {
      // A block of a group needs the chunk that holds the group too.
      for (const std::size_t needed : {block, blocks[block].unit})
        if (store && !store->has(needed))
          throw ChunkMissing("the chunk store " + store->directory().string() + " does not hold " + store->describe(needed) +
                             "; it holds " + std::to_string(store->held().size()) + " of " + std::to_string(blocks.size()) +
                             " chunks (those this rank's samples need this epoch)");
      const auto a = block_archive[block];
      auto frames = std::make_shared<const DecodedGop>(archives[a]->decode_chunk(block - first_block[a]));
      if (store) store->count_store_read(blocks[block].bytes);
      promise.set_value(frames);
      std::lock_guard lock(mutex);
      auto e = cache.find(block);
      if (e != cache.end()) e->second.ready = true;
      evict_locked();
      return frames;
    } catch (...) {
      promise.set_exception(std::current_exception());
      std::lock_guard lock(mutex);
      // A failed GOP is not cached: the next request tries again and fails again, loudly.
      auto e = cache.find(block);
      if (e != cache.end()) {
        recency.erase(e->second.position);
        cache.erase(e);
      }
      throw;
    }
  }
};

Reader::Reader(const std::filesystem::path& input, const ReaderOptions& options) : state_(std::make_unique<State>()) {
  state_->capacity = std::max<std::size_t>(1, options.cache_gops);
  state_->open(archive_paths(input));
}

Reader::Reader(std::shared_ptr<const ChunkStore> store, const ReaderOptions& options) : state_(std::make_unique<State>()) {
  if (!store) throw std::invalid_argument("Reader: no chunk store");
  state_->capacity = std::max<std::size_t>(1, options.cache_gops);
  state_->open(store->archives());
  state_->store = std::move(store);
}

Reader::~Reader() = default;

std::size_t Reader::num_sequences() const { return state_->sequences.size(); }

namespace {
const SequenceEntry& entry(const std::vector<std::unique_ptr<ArchiveDecoder>>& archives, std::size_t archive, std::size_t local) {
  return archives[archive]->index().sequences[local];
}
}  // namespace

const std::string& Reader::sequence_name(std::size_t sequence) const {
  const auto& r = state_->sequences.at(sequence);
  return entry(state_->archives, r.archive, r.local).name;
}

const Geometry& Reader::geometry(std::size_t sequence) const {
  const auto& r = state_->sequences.at(sequence);
  return entry(state_->archives, r.archive, r.local).geometry;
}

std::size_t Reader::num_frames(std::size_t sequence) const {
  const auto& r = state_->sequences.at(sequence);
  return entry(state_->archives, r.archive, r.local).frames.size();
}

std::span<const Block> Reader::blocks() const { return state_->blocks; }

std::size_t Reader::block_of(std::size_t sequence, std::size_t frame) const {
  const auto& r = state_->sequences.at(sequence);
  return state_->first_block[r.archive] + state_->archives[r.archive]->index().chunk_of(r.local, frame);
}

Clip Reader::frame(std::size_t sequence, std::size_t t, ClipLayout layout) const { return clip(sequence, t, 1, layout); }

Clip Reader::clip(std::size_t sequence, std::size_t start, std::size_t length, ClipLayout layout) const {
  const std::size_t n = num_frames(sequence);
  if (length == 0 || start >= n || length > n - start)
    throw std::out_of_range("clip [" + std::to_string(start) + ", +" + std::to_string(length) + ") outside sequence " +
                            std::to_string(sequence) + " of " + std::to_string(n) + " frames");
  Clip clip;
  clip.sequence = sequence;
  clip.start = start;
  clip.length = length;
  clip.geometry = geometry(sequence);
  clip.layout = layout;
  clip.data.resize(length * clip.geometry.raw_bytes());
  std::size_t done = 0;
  while (done < length) {
    const std::size_t b = block_of(sequence, start + done);
    const auto gop = state_->get(b);
    const auto& block = state_->blocks[b];
    const std::size_t from = start + done - block.first_frame;
    const std::size_t take = std::min(length - done, block.frame_count - from);
    std::vector<const Pixels*> frames;
    for (std::size_t k = 0; k < take; ++k) frames.push_back(&(*gop).at(from + k));
    const std::size_t bytes = clip.geometry.raw_bytes();
    pack_frames(frames, clip.geometry, layout, std::span(clip.data).subspan(done * bytes, take * bytes));
    done += take;
  }
  return clip;
}

Reader::CacheStats Reader::cache_stats() const {
  std::lock_guard lock(state_->mutex);
  return state_->stats;
}

}  // namespace tezip
