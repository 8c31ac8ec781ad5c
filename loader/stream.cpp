#include "loader/stream.hpp"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <numeric>
#include <queue>
#include <random>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "loader/chunk_store.hpp"
#include "loader/exchange.hpp"

namespace tezip {
namespace {

constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

// Orders must be the same on every machine and standard library, so the random draws are made
// here rather than with std::shuffle or std::uniform_int_distribution (whose results the
// standard leaves to the implementation).
std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::uint64_t mix(std::initializer_list<std::uint64_t> values) {
  std::uint64_t h = 0x243f6a8885a308d3ull;
  for (auto v : values) h = splitmix(h ^ splitmix(v));
  return h;
}

enum Purpose : std::uint64_t { kDeal = 1, kPick = 2, kPool = 3, kOrder = 4, kBuffer = 5 };

class Random {
 public:
  explicit Random(std::uint64_t seed) : engine_(seed) {}
  std::size_t below(std::size_t n) {
    const std::uint64_t limit = std::numeric_limits<std::uint64_t>::max() - std::numeric_limits<std::uint64_t>::max() % n;
    std::uint64_t x;
    do x = engine_();
    while (x >= limit);
    return std::size_t(x % n);
  }
  template <class T>
  void shuffle(std::vector<T>& v) {
    for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[below(i)]);
  }

 private:
  std::mt19937_64 engine_;
};

// Least-loaded rank first; ties to the lower rank.
using Load = std::pair<std::uint64_t, std::size_t>;
using LoadHeap = std::priority_queue<Load, std::vector<Load>, std::greater<Load>>;

}  // namespace

// ---------------------------------------------------------------------------------------------
// StreamState

std::string StreamState::serialize() const {
  char buf[128];
  std::snprintf(buf, sizeof buf, "tezip-stream/1 epoch=%" PRIu64 " position=%" PRIu64 " config=%016" PRIx64, epoch,
                position, config);
  return buf;
}

StreamState StreamState::parse(const std::string& text) {
  StreamState s;
  int used = 0;
  if (std::sscanf(text.c_str(), "tezip-stream/1 epoch=%" SCNu64 " position=%" SCNu64 " config=%" SCNx64 "%n", &s.epoch,
                  &s.position, &s.config, &used) != 3 ||
      std::size_t(used) != text.size())
    throw std::invalid_argument("not a tezip stream state: '" + text + "'");
  return s;
}

// ---------------------------------------------------------------------------------------------
// StreamPlan

StreamPlan::StreamPlan(const Reader& reader, const StreamOptions& options) : options_(options) {
  if (options.clip_len == 0) throw std::invalid_argument("clip_len must be at least 1");
  if (options.stride == 0) throw std::invalid_argument("stride must be at least 1");
  if (options.world_size == 0 || options.rank >= options.world_size)
    throw std::invalid_argument("rank " + std::to_string(options.rank) + " outside world_size " +
                                std::to_string(options.world_size));
  if (!(options.exchange >= 0 && options.exchange <= 1)) throw std::invalid_argument("exchange must be in [0, 1]");
  const auto blocks = reader.blocks();
  blocks_.assign(blocks.begin(), blocks.end());
  samples_.resize(blocks_.size());
  for (std::size_t b = 0; b < blocks_.size(); ++b) {
    const auto& block = blocks_[b];
    const std::size_t n = reader.num_frames(block.sequence);
    if (n < options.clip_len) continue;
    const std::size_t last_start = n - options.clip_len;  // inclusive
    const std::size_t first = (block.first_frame + options.stride - 1) / options.stride * options.stride;
    const std::size_t end = std::min(block.first_frame + block.frame_count, last_start + 1);
    if (first < end) samples_[b] = {first, (end - first + options.stride - 1) / options.stride};
  }
  if (num_blocks() < options.world_size)
    throw std::invalid_argument("the data has " + std::to_string(num_blocks()) + " GOPs holding samples, fewer than world_size " +
                                std::to_string(options.world_size) + ": shards are cut on GOP boundaries");
  for (std::size_t b = 0; b < blocks_.size(); ++b) {
    if (samples_[b].count == 0) continue;
    if (!units_.empty() && blocks_[units_.back().front()].unit == blocks_[b].unit)
      units_.back().push_back(b);
    else
      units_.push_back({b});
  }
  if (units_.size() < options.world_size) {
    units_.clear();
    for (std::size_t b = 0; b < blocks_.size(); ++b)
      if (samples_[b].count > 0) units_.push_back({b});
  }
}

std::size_t StreamPlan::unit_samples(const std::vector<std::size_t>& unit) const {
  std::size_t n = 0;
  for (const std::size_t b : unit) n += samples_[b].count;
  return n;
}

std::size_t StreamPlan::num_blocks() const {
  return std::size_t(std::count_if(samples_.begin(), samples_.end(), [](const BlockSamples& s) { return s.count > 0; }));
}

std::size_t StreamPlan::num_samples() const {
  std::size_t n = 0;
  for (const auto& s : samples_) n += s.count;
  return n;
}

std::vector<std::size_t> StreamPlan::owners(std::uint64_t epoch) const {
  const std::size_t world = options_.world_size;
  std::vector<std::size_t> owner(units_.size(), kNone);  // of each unit
  std::vector<std::size_t> order(units_.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  Random deal(mix({options_.seed, 0, kDeal}));
  deal.shuffle(order);
  LoadHeap heap;
  for (std::size_t r = 0; r < world; ++r) heap.push({0, r});
  for (auto u : order) {
    auto [load, r] = heap.top();
    heap.pop();
    owner[u] = r;
    heap.push({load + unit_samples(units_[u]), r});
  }
  for (std::uint64_t e = 1; world > 1 && e <= epoch; ++e) {
    std::vector<std::vector<std::size_t>> held(world);
    for (std::size_t u = 0; u < units_.size(); ++u) held[owner[u]].push_back(u);
    std::vector<std::uint64_t> load(world, 0);
    std::vector<std::pair<std::size_t, std::size_t>> pool;  // (unit, previous owner)
    for (std::size_t r = 0; r < world; ++r) {
      Random pick(mix({options_.seed, e, kPick, r}));
      pick.shuffle(held[r]);
      const auto moving = std::size_t(std::llround(options_.exchange * double(held[r].size())));
      for (std::size_t i = 0; i < held[r].size(); ++i) {
        if (i < moving)
          pool.emplace_back(held[r][i], r);
        else
          load[r] += unit_samples(units_[held[r][i]]);
      }
    }
    Random shuffle_pool(mix({options_.seed, e, kPool}));
    shuffle_pool.shuffle(pool);
    LoadHeap ranks;
    for (std::size_t r = 0; r < world; ++r) ranks.push({load[r], r});
    for (auto [u, from] : pool) {
      auto first = ranks.top();
      ranks.pop();
      if (first.second == from) {  // a moved unit goes elsewhere
        auto second = ranks.top();
        ranks.pop();
        ranks.push(first);
        first = second;
      }
      owner[u] = first.second;
      ranks.push({first.first + unit_samples(units_[u]), first.second});
    }
  }
  std::vector<std::size_t> block_owner(blocks_.size(), kNone);
  for (std::size_t u = 0; u < units_.size(); ++u)
    for (const std::size_t b : units_[u]) block_owner[b] = owner[u];
  return block_owner;
}

std::vector<std::size_t> StreamPlan::shard_sizes(const std::vector<std::size_t>& owner) const {
  std::vector<std::size_t> sizes(options_.world_size, 0);
  for (std::size_t b = 0; b < blocks_.size(); ++b)
    if (owner[b] != kNone) sizes[owner[b]] += samples_[b].count;
  return sizes;
}

ExchangeReport StreamPlan::exchange(std::uint64_t epoch) const {
  const std::size_t world = options_.world_size;
  ExchangeReport report{std::vector<std::uint64_t>(world), std::vector<std::uint64_t>(world), std::vector<std::size_t>(world),
                        std::vector<std::size_t>(world)};
  const auto now = owners(epoch);
  const auto before = epoch ? owners(epoch - 1) : std::vector<std::size_t>(blocks_.size(), kNone);
  for (std::size_t b = 0; b < blocks_.size(); ++b) {
    if (now[b] == kNone) continue;
    report.bytes[now[b]] += blocks_[b].bytes;
    ++report.blocks[now[b]];
    if (before[b] != now[b]) {
      report.new_bytes[now[b]] += blocks_[b].bytes;
      ++report.new_blocks[now[b]];
    }
  }
  return report;
}

std::vector<std::vector<std::size_t>> StreamPlan::chunks_needed(std::uint64_t epoch) const {
  const auto owner = owners(epoch);
  std::vector<std::vector<std::size_t>> needed(options_.world_size);
  for (std::size_t b = 0; b < blocks_.size(); ++b) {
    if (owner[b] == kNone) continue;
    auto& mine = needed[owner[b]];
    // The last sample of the block reads up to this frame; the GOPs after b up to it are needed too.
    const std::size_t last = samples_[b].first_start + (samples_[b].count - 1) * options_.stride + options_.clip_len - 1;
    for (std::size_t c = b; c < blocks_.size() && blocks_[c].sequence == blocks_[b].sequence && blocks_[c].first_frame <= last; ++c)
      mine.push_back(c);
    if (blocks_[b].unit != b) mine.push_back(blocks_[b].unit);  // the chunk that holds its group
  }
  for (auto& mine : needed) {
    std::sort(mine.begin(), mine.end());
    mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
  }
  return needed;
}

std::size_t StreamPlan::samples_per_rank(std::uint64_t epoch) const {
  const auto sizes = shard_sizes(owners(epoch));
  return options_.balance == Balance::Repeat ? *std::max_element(sizes.begin(), sizes.end())
                                             : *std::min_element(sizes.begin(), sizes.end());
}

RankOrder StreamPlan::order(std::uint64_t epoch, std::size_t rank) const {
  if (rank >= options_.world_size) throw std::invalid_argument("rank outside world_size");
  const auto owner = owners(epoch);
  const auto sizes = shard_sizes(owner);
  const std::size_t target = options_.balance == Balance::Repeat ? *std::max_element(sizes.begin(), sizes.end())
                                                                 : *std::min_element(sizes.begin(), sizes.end());
  std::vector<std::size_t> mine;  // units, each of blocks in order
  for (std::size_t u = 0; u < units_.size(); ++u)
    if (owner[units_[u].front()] == rank) mine.push_back(u);
  const bool shuffled = options_.shuffle_buffer > 0;
  if (shuffled) {
    Random order(mix({options_.seed, epoch, kOrder, rank}));
    order.shuffle(mine);
  }
  RankOrder out;
  for (auto u : mine)
    for (const std::size_t b : units_[u])
      for (std::size_t i = 0; i < samples_[b].count; ++i)
        out.decode.push_back({blocks_[b].sequence, samples_[b].first_start + i * options_.stride, b});
  out.own = out.decode.size();
  const std::size_t n = out.own;
  const std::size_t capacity = options_.shuffle_buffer;
  out.deliver.reserve(std::max(n, target));
  if (capacity <= 1) {
    for (std::size_t j = 0; j < n; ++j) out.deliver.push_back(j);
  } else {
    Random draw(mix({options_.seed, epoch, kBuffer, rank}));
    std::vector<std::size_t> buffer;
    buffer.reserve(capacity);
    auto take = [&] {
      const std::size_t r = draw.below(buffer.size());
      out.deliver.push_back(buffer[r]);
      buffer[r] = buffer.back();
      buffer.pop_back();
    };
    for (std::size_t j = 0; j < n; ++j) {
      buffer.push_back(j);
      if (buffer.size() == capacity) take();
    }
    while (!buffer.empty()) take();
  }
  if (target < n) {
    out.deliver.resize(target);
  } else {
    for (std::size_t k = 0; n > 0 && k < target - n; ++k) {
      out.decode.push_back(out.decode[out.deliver[k % n]]);
      out.deliver.push_back(n + k);
    }
  }
  return out;
}

std::uint64_t StreamPlan::fingerprint() const {
  std::uint64_t h = mix({blocks_.size(), num_samples(), options_.clip_len, options_.stride, options_.rank, options_.world_size,
                         options_.seed, options_.shuffle_buffer, std::uint64_t(std::llround(options_.exchange * 1e9)),
                         std::uint64_t(options_.balance)});
  for (std::size_t b = 0; b < blocks_.size(); ++b)
    h = mix({h, blocks_[b].sequence, blocks_[b].first_frame, blocks_[b].frame_count, blocks_[b].bytes, blocks_[b].unit});
  return h;
}

// ---------------------------------------------------------------------------------------------
// Stream

struct Stream::Impl {
  std::shared_ptr<const Reader> reader;
  StreamOptions options;
  std::uint64_t config = 0;
  RankOrder order;
  ExchangeReport report;
  ExchangeStats store_stats;
  std::size_t position = 0;

  // Work is handed out as runs of decode positions from one block, so a GOP is decoded once by
  // one worker while the others move on to the next blocks.
  struct Unit {
    std::size_t begin, end;
  };
  std::vector<Unit> units;
  std::vector<std::size_t> unit_of;  // decode position -> its unit
  std::vector<bool> needed;          // decode positions still to be delivered

  std::mutex mutex;
  std::condition_variable work, done;
  std::size_t next_unit = 0;
  std::size_t window_end = 0;  // workers decode positions below this
  std::size_t highest = 0;     // largest decode position asked for so far
  bool stopping = false;
  std::unordered_map<std::size_t, Sample> ready;
  std::unordered_map<std::size_t, std::exception_ptr> failed;
  std::vector<std::thread> workers;

  Sample decode(std::size_t j) const {
    const auto& ref = order.decode[j];
    Sample s;
    static_cast<Clip&>(s) = reader->clip(ref.sequence, ref.start, options.clip_len, options.layout);
    s.repeated = j >= order.own;
    return s;
  }

  void open_window(std::size_t j) {
    highest = std::max(highest, j);
    window_end = highest + 1 + options.prefetch;
  }

  void run() {
    std::unique_lock lock(mutex);
    for (;;) {
      work.wait(lock, [&] { return stopping || next_unit == units.size() || units[next_unit].begin < window_end; });
      if (stopping || next_unit == units.size()) return;
      const Unit unit = units[next_unit++];
      for (std::size_t j = unit.begin; j < unit.end; ++j) {
        if (!needed[j]) continue;
        lock.unlock();
        std::optional<Sample> sample;
        std::exception_ptr error;
        try {
          sample = decode(j);
        } catch (...) {
          error = std::current_exception();
        }
        lock.lock();
        if (stopping) return;
        if (error)
          failed.emplace(j, error);
        else
          ready.emplace(j, std::move(*sample));
        done.notify_all();
      }
    }
  }

  // Without worker threads the consumer decodes a whole unit the first time it asks for one of its
  // samples: the shuffle delivers the samples of a GOP far apart, and a reader cache smaller than
  // the shuffle window would otherwise decode that GOP again for each of them.
  void decode_unit_locked(std::size_t j) {
    const Unit unit = units[unit_of[j]];
    for (std::size_t k = unit.begin; k < unit.end; ++k) {
      if (!needed[k] || ready.count(k) || failed.count(k)) continue;
      try {
        ready.emplace(k, decode(k));
      } catch (...) {
        failed.emplace(k, std::current_exception());
      }
    }
  }

  void start() {
    // Workers take units of a few positions so that several decode at once; the consumer alone
    // takes every position of a block's run in one unit.
    const std::size_t cap =
        options.threads == 0 ? order.decode.size() : std::max<std::size_t>(1, std::min<std::size_t>(16, options.prefetch + 1));
    unit_of.assign(order.decode.size(), 0);
    for (std::size_t j = 0; j < order.decode.size();) {
      std::size_t k = j + 1;
      while (k < order.decode.size() && k - j < cap && order.decode[k].block == order.decode[j].block) ++k;
      for (std::size_t i = j; i < k; ++i) unit_of[i] = units.size();
      units.push_back({j, k});
      j = k;
    }
    needed.assign(order.decode.size(), false);
    for (std::size_t k = position; k < order.deliver.size(); ++k) needed[order.deliver[k]] = true;
    for (std::size_t k = 0; k <= position && k < order.deliver.size(); ++k) highest = std::max(highest, order.deliver[k]);
    open_window(highest);
    if (position >= order.deliver.size()) return;
    for (unsigned t = 0; t < options.threads; ++t) workers.emplace_back([this] { run(); });
  }

  ~Impl() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
    }
    work.notify_all();
    for (auto& w : workers) w.join();
  }
};

namespace {
std::shared_ptr<const Reader> open_reader(const std::filesystem::path& input, const StreamOptions& options) {
  ReaderOptions r;
  r.cache_gops = options.cache_gops ? options.cache_gops : 2 * std::size_t(options.threads) + 4;
  return std::make_shared<const Reader>(input, r);
}
}  // namespace

Stream::Stream(const std::filesystem::path& input, const StreamOptions& options, std::optional<StreamState> resume)
    : Stream(open_reader(input, options), options, resume) {}

Stream::Stream(std::shared_ptr<const Reader> reader, const StreamOptions& options, std::optional<StreamState> resume)
    : impl_(std::make_unique<Impl>()) {
  open(std::move(reader), options, resume);
}

Stream::Stream(std::shared_ptr<ChunkStore> store, std::shared_ptr<ChunkExchange> exchange, const StreamOptions& options,
               std::optional<StreamState> resume)
    : impl_(std::make_unique<Impl>()) {
  if (!store) throw std::invalid_argument("Stream: no chunk store");
  ReaderOptions r;
  r.cache_gops = options.cache_gops ? options.cache_gops : 2 * std::size_t(options.threads) + 4;
  auto reader = std::make_shared<const Reader>(std::shared_ptr<const ChunkStore>(store), r);
  StreamOptions o = options;
  if (resume) o.epoch = resume->epoch;
  const StreamPlan plan(*reader, o);
  impl_->store_stats = exchange ? exchange->prepare(plan, o.epoch) : prepare_from_source(*store, plan, o.epoch);
  open(std::move(reader), options, resume);
}

void Stream::open(std::shared_ptr<const Reader> reader, const StreamOptions& options, std::optional<StreamState> resume) {
  auto& m = *impl_;
  m.reader = std::move(reader);
  m.options = options;
  const StreamPlan plan(*m.reader, options);
  m.config = plan.fingerprint();
  if (resume) {
    if (resume->config != m.config)
      throw std::invalid_argument("the saved stream state belongs to another dataset or other stream options");
    m.options.epoch = resume->epoch;
  }
  m.order = plan.order(m.options.epoch, options.rank);
  m.report = plan.exchange(m.options.epoch);
  if (resume) {
    if (resume->position > m.order.deliver.size())
      throw std::invalid_argument("the saved stream position " + std::to_string(resume->position) + " is past the epoch's " +
                                  std::to_string(m.order.deliver.size()) + " samples");
    m.position = std::size_t(resume->position);
  }
  m.start();
}

Stream::~Stream() = default;

std::optional<Sample> Stream::next() {
  auto& m = *impl_;
  if (m.position >= m.order.deliver.size()) return std::nullopt;
  const std::size_t j = m.order.deliver[m.position];
  Sample sample;
  {
    std::unique_lock lock(m.mutex);
    if (m.options.threads == 0) {
      if (!m.ready.count(j) && !m.failed.count(j)) m.decode_unit_locked(j);
    } else {
      const std::size_t before = m.window_end;
      m.open_window(j);
      if (m.window_end != before) m.work.notify_all();
      m.done.wait(lock, [&] { return m.ready.count(j) || m.failed.count(j); });
    }
    // A damaged GOP raises here, in the consumer; asked again, it is decoded again and fails again.
    if (auto f = m.failed.find(j); f != m.failed.end()) {
      const auto error = f->second;
      if (m.options.threads == 0) m.failed.erase(f);
      std::rethrow_exception(error);
    }
    auto r = m.ready.find(j);
    sample = std::move(r->second);
    m.ready.erase(r);
    m.needed[j] = false;
  }
  sample.position = m.position++;
  return sample;
}

std::size_t Stream::size() const { return impl_->order.deliver.size(); }
std::size_t Stream::position() const { return impl_->position; }
StreamState Stream::state() const { return {impl_->options.epoch, impl_->position, impl_->config}; }
const ExchangeReport& Stream::exchange_report() const { return impl_->report; }
const ExchangeStats& Stream::store_stats() const { return impl_->store_stats; }
const StreamOptions& Stream::options() const { return impl_->options; }
const Reader& Stream::reader() const { return *impl_->reader; }

}  // namespace tezip
