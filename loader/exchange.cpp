#include "loader/exchange.hpp"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "loader/mpi/module_table.hpp"

namespace tezip {
namespace {

constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

std::string exchange_epoch_tag(const StreamPlan& plan, std::uint64_t epoch) {
  char text[64];
  std::snprintf(text, sizeof text, "fp=%016" PRIx64 " epoch=%" PRIu64, plan.fingerprint(), epoch);
  return text;
}

void drop_unneeded_chunks(ChunkStore& store, const std::vector<std::size_t>& needed, ExchangeStats& stats) {
  std::vector<std::size_t> gone;
  for (auto c : store.held())
    if (!std::binary_search(needed.begin(), needed.end(), c)) gone.push_back(c);
  store.drop(gone);
  stats.dropped_chunks += gone.size();
}

std::vector<ChunkMove> chunk_moves(const StreamPlan& plan, std::uint64_t epoch) {
  if (epoch == 0) return {};
  const auto before = plan.chunks_needed(epoch - 1), now = plan.chunks_needed(epoch);
  const auto owner_before = plan.owners(epoch - 1), owner_now = plan.owners(epoch);
  std::vector<ChunkMove> moves;
  for (std::size_t to = 0; to < now.size(); ++to)
    for (auto c : now[to]) {
      if (std::binary_search(before[to].begin(), before[to].end(), c)) continue;
      std::size_t from = owner_before[c];
      if (from == kNone || !std::binary_search(before[from].begin(), before[from].end(), c)) {
        from = kNone;
        for (std::size_t r = 0; r < before.size() && from == kNone; ++r)
          if (std::binary_search(before[r].begin(), before[r].end(), c)) from = r;
      }
      if (from == kNone) throw std::logic_error("chunk_moves: no rank held chunk " + std::to_string(c));
      moves.push_back({c, from, to, owner_now[c] == to});
    }
  return moves;
}

ExchangeStats prepare_from_source(ChunkStore& store, const StreamPlan& plan, std::uint64_t epoch) {
  const auto start = Clock::now();
  ExchangeStats stats;
  stats.epoch = epoch;
  const auto needed = plan.chunks_needed(epoch)[plan.options().rank];
  for (auto c : needed)
    if (!store.has(c)) ++stats.staged_chunks, stats.staged_bytes += store.chunk_size(c);
  drop_unneeded_chunks(store, needed, stats);  // first, so the capacity holds the epoch's chunks alone
  store.stage(needed);
  store.set_tag(exchange_epoch_tag(plan, epoch));
  stats.seconds = seconds_since(start);
  return stats;
}

bool built_with_mpi() {
#ifdef TEZIP_HAVE_MPI
  return true;
#else
  return false;
#endif
}

struct ChunkExchange::State {
  std::unique_ptr<ExchangeBackend> backend;
};

ChunkExchange::ChunkExchange(std::shared_ptr<ChunkStore> store, std::int64_t comm, const ExchangeOptions& options)
    : state_(std::make_unique<State>()) {
  if (!store) throw std::invalid_argument("ChunkExchange: no chunk store");
  if (!(options.timeout_s > 0)) throw std::invalid_argument("the exchange timeout must be positive");
  const MpiModule* module = nullptr;
  try {
    module = &mpi_module("exchanging chunks between ranks");
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string(e.what()) + "; or use a store without exchange (exchange = 0, or chunks staged " +
                             "from the source each epoch)");
  }
  state_->backend = module->open_exchange(std::move(store), comm, options);
}
ChunkExchange::~ChunkExchange() = default;
void ChunkExchange::finish() { state_->backend->finish(); }
ExchangeStats ChunkExchange::prepare(const StreamPlan& plan, std::uint64_t epoch) { return state_->backend->prepare(plan, epoch); }
const std::shared_ptr<ChunkStore>& ChunkExchange::store() const { return state_->backend->store(); }
int ChunkExchange::rank() const { return state_->backend->rank(); }
int ChunkExchange::size() const { return state_->backend->size(); }
bool ChunkExchange::background() const { return state_->backend->background(); }

}  // namespace tezip
