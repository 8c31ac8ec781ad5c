// libtezip_mpi.so, the MPI module (loader/mpi/module_table.hpp): a batch job's collectives on
// MPI_COMM_WORLD (batch/mpi_context.hpp) and the chunk exchange between ranks (loader/exchange.hpp,
// docs/distributed.md). The only code that includes mpi.h; the core loads it on first use.
#include "loader/mpi/module_table.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>

namespace tezip {

// ---- A batch job's collectives on MPI_COMM_WORLD (MpiContext)

namespace {

bool join_world(int& rank, int& size, int& local_size) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return false;
  if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS) throw std::runtime_error("MPI_Init failed");
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  MPI_Comm_size(node, &local_size);
  MPI_Comm_free(&node);
  return true;
}

void leave_world() { MPI_Finalize(); }

bool world_all_ok(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

bool world_root_ok(bool ok) {
  int value = ok ? 1 : 0;
  MPI_Request request;
  MPI_Ibcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD, &request);
  for (int done = 0;;) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return value == 1;
}

std::vector<double> world_gather(std::span<const double> values, int rank, int size) {
  std::vector<double> out(rank == 0 ? values.size() * std::size_t(size) : 0);
  MPI_Gather(values.data(), int(values.size()), MPI_DOUBLE, out.data(), int(values.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return out;
}

}  // namespace

// ---- The chunk exchange (ChunkExchange)

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Tags on the exchange's own duplicate of the communicator.
enum Tag : int { kStatusTag = 1, kSummaryTag = 2, kDataTag = 16 };
constexpr std::size_t kPiece = std::size_t(64) << 20;  // bytes per message, well below INT_MAX
constexpr std::size_t kMessage = 480;

// What a rank says at each step of the exchange. Fixed size, sent as bytes.
struct Status {
  std::int32_t ok = 1;
  std::int32_t answered = 1;
  std::int64_t at = -1;  // the epoch its store holds, -1: unknown
  char message[kMessage] = {};
};

void set_message(Status& s, const std::string& text) {
  s.ok = 0;
  std::snprintf(s.message, sizeof s.message, "%s", text.c_str());
}

void check(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(code, text, &n);
  throw ExchangeError(std::string("MPI ") + what + " failed: " + std::string(text, std::size_t(n)));
}

// Requests that never completed keep their buffers: MPI may still write into or read from them.
std::mutex graveyard_mutex;
std::vector<std::shared_ptr<void>> graveyard;
template <class T>
void bury(T&& buffer) {
  std::lock_guard lock(graveyard_mutex);
  graveyard.push_back(std::make_shared<std::decay_t<T>>(std::forward<T>(buffer)));
}

// Polls `requests` until all complete or the deadline passes; returns the indices still pending.
std::vector<std::size_t> wait_until(std::vector<MPI_Request>& requests, Clock::time_point deadline) {
  auto pause = std::chrono::microseconds(50);
  for (;;) {
    int done = 0;
    check(MPI_Testall(int(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE), "Testall");
    if (done) return {};
    if (Clock::now() > deadline) {
      std::vector<std::size_t> pending;
      for (std::size_t i = 0; i < requests.size(); ++i)
        if (requests[i] != MPI_REQUEST_NULL) {
          int flag = 0;
          MPI_Test(&requests[i], &flag, MPI_STATUS_IGNORE);
          if (!flag) pending.push_back(i);
        }
      if (pending.empty()) return {};
      return pending;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(2000));
  }
}

void abandon(std::vector<MPI_Request>& requests, const std::vector<std::size_t>& pending) {
  for (auto i : pending) {
    MPI_Cancel(&requests[i]);
    MPI_Request_free(&requests[i]);
  }
}

// Exchanges running in the background; MPI is finalised only once they are over.
class MpiExchange;
std::mutex live_mutex;
std::set<MpiExchange*> live;
bool finalize_registered = false;
void finalize_at_exit();

struct ExchangeState {
  std::shared_ptr<ChunkStore> store;
  ExchangeOptions options;
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  bool background = false;
  bool broken = false;  // an exchange failed: the communicator is not freed (peers may be gone)

  // The exchange for `ahead_epoch` running in the background, and its outcome.
  std::thread ahead;
  std::uint64_t ahead_epoch = 0;
  ExchangeStats ahead_stats;
  std::exception_ptr ahead_error;

  Clock::duration timeout() const {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.timeout_s));
  }

  std::string where(std::uint64_t epoch) const { return "tezip exchange for epoch " + std::to_string(epoch) + ": "; }

  // Every rank's status, gathered by rank 0 (waiting up to `root_wait`) and sent back to all: rank 0
  // names a rank that does not answer; a rank that hears nothing from rank 0 says so.
  std::vector<Status> agree(const Status& mine, std::uint64_t epoch, Clock::duration root_wait) {
    const int bytes = int(sizeof(Status));
    auto all = std::make_unique<std::vector<Status>>(std::size_t(size));
    if (rank == 0) {
      (*all)[0] = mine;
      std::vector<MPI_Request> requests(std::size_t(size - 1), MPI_REQUEST_NULL);
      for (int r = 1; r < size; ++r)
        check(MPI_Irecv(&(*all)[std::size_t(r)], bytes, MPI_BYTE, r, kStatusTag, comm, &requests[std::size_t(r - 1)]), "Irecv");
      const auto pending = wait_until(requests, Clock::now() + root_wait);
      auto summary = std::make_unique<std::vector<Status>>(*all);
      for (auto i : pending) {
        auto& st = (*summary)[i + 1];
        st = Status{};
        st.answered = 0;
        set_message(st, "did not answer within " + std::to_string(int(std::chrono::duration<double>(root_wait).count())) +
                            " s (it died, hangs, or is slower than the exchange timeout)");
      }
      if (!pending.empty()) abandon(requests, pending), bury(std::move(all));
      std::vector<MPI_Request> sends;
      for (int r = 1; r < size; ++r)
        if ((*summary)[std::size_t(r)].answered) {
          sends.push_back(MPI_REQUEST_NULL);
          check(MPI_Isend(summary->data(), bytes * size, MPI_BYTE, r, kSummaryTag, comm, &sends.back()), "Isend");
        }
      const auto unsent = wait_until(sends, Clock::now() + timeout());  // they are waiting for it
      std::vector<Status> out = *summary;
      if (!unsent.empty()) {
        for (auto i : unsent) MPI_Request_free(&sends[i]);
        bury(std::move(summary));
      }
      return out;
    }
    auto sent = std::make_unique<Status>(mine);
    std::vector<MPI_Request> requests(2, MPI_REQUEST_NULL);
    check(MPI_Isend(sent.get(), bytes, MPI_BYTE, 0, kStatusTag, comm, &requests[0]), "Isend");
    check(MPI_Irecv(all->data(), bytes * size, MPI_BYTE, 0, kSummaryTag, comm, &requests[1]), "Irecv");
    const auto wait = root_wait + timeout() + std::chrono::seconds(1);
    const auto pending = wait_until(requests, Clock::now() + wait);
    if (!pending.empty()) {
      abandon(requests, pending);
      bury(std::move(sent)), bury(std::move(all));
      broken = true;
      throw ExchangeError(where(epoch) + "rank " + std::to_string(rank) + " heard nothing from rank 0 within " +
                          std::to_string(int(std::chrono::duration<double>(wait).count())) +
                          " s (rank 0 died, hangs, or is slower than the exchange timeout)");
    }
    return *all;
  }

  void raise_failures(const std::vector<Status>& all, const std::string& prefix) {
    std::string text;
    for (std::size_t r = 0; r < all.size(); ++r)
      if (!all[r].ok) text += (text.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + ": " + all[r].message;
    if (!text.empty()) broken = true, throw ExchangeError(prefix + text);
  }

  std::int64_t at_epoch(const StreamPlan& plan) const {
    const std::string tag = store->tag();
    const std::string prefix = exchange_epoch_tag(plan, 0).substr(0, exchange_epoch_tag(plan, 0).find(" epoch="));
    if (tag.rfind(prefix + " epoch=", 0) != 0) return -1;
    return std::strtoll(tag.c_str() + prefix.size() + 7, nullptr, 10);
  }

  // Brings the store from epoch - 1 to what `epoch` needs, without dropping anything yet.
  ExchangeStats transfer(const StreamPlan& plan, std::uint64_t epoch) {
    const auto start = Clock::now();
    ExchangeStats stats;
    stats.epoch = epoch;
    const auto needed = plan.chunks_needed(epoch)[std::size_t(rank)];
    Status mine;
    mine.at = at_epoch(plan);
    std::vector<ChunkMove> moves;
    // The chunks this rank sends, by receiver, read (and checked) before anyone sends anything.
    std::map<int, std::vector<std::uint8_t>> outgoing;
    try {
      if (epoch > 0 && mine.at == std::int64_t(epoch - 1)) {
        moves = chunk_moves(plan, epoch);
        for (const auto& m : moves)
          if (m.from == std::size_t(rank)) {
            const auto bytes = store->read(m.chunk);
            auto& out = outgoing[int(m.to)];
            out.insert(out.end(), bytes.begin(), bytes.end());
            ++stats.sent_chunks, stats.sent_bytes += bytes.size();
            if (m.owned) ++stats.sent_owned_chunks;
          }
      }
    } catch (const std::exception& e) {
      set_message(mine, e.what());
    }
    auto all = agree(mine, epoch, timeout());
    raise_failures(all, where(epoch));
    const bool from_previous =
        epoch > 0 && std::all_of(all.begin(), all.end(), [&](const Status& s) { return s.at == std::int64_t(epoch - 1); });
    Status done;
    if (!from_previous) {
      // Not every rank holds epoch - 1 (the first epoch, a new or rebuilt store): each stages what
      // it lacks from the source, the global file.
      stats = ExchangeStats{};
      stats.epoch = epoch;
      try {
        if (mine.at != std::int64_t(epoch)) {
          for (auto c : needed)
            if (!store->has(c)) ++stats.staged_chunks, stats.staged_bytes += store->chunk_size(c);
          store->stage(needed);
        }
      } catch (const std::exception& e) {
        set_message(done, e.what());
      }
    } else {
      try {
        exchange_data(epoch, moves, std::move(outgoing), stats);
      } catch (const std::exception& e) {
        set_message(done, e.what());
      }
    }
    // Rank 0 waits longer here: a rank may still be timing out on a dead peer in the data phase.
    all = agree(done, epoch, 2 * timeout() + std::chrono::seconds(1));
    raise_failures(all, where(epoch));
    stats.seconds = seconds_since(start);
    return stats;
  }

  void exchange_data(std::uint64_t epoch, const std::vector<ChunkMove>& moves,
                     std::map<int, std::vector<std::uint8_t>> outgoing, ExchangeStats& stats) {
    // Incoming, by sender: the chunks in the order the sender packed them (the order of `moves`).
    std::map<int, std::vector<std::size_t>> incoming;
    for (const auto& m : moves)
      if (m.to == std::size_t(rank)) incoming[int(m.from)].push_back(m.chunk);
    std::vector<std::vector<std::uint8_t>> buffers;
    std::vector<MPI_Request> requests;
    std::vector<int> peer_of;  // per request: the rank on the other side
    std::vector<int> sender_of_buffer;
    for (const auto& [from, chunks] : incoming) {
      std::uint64_t total = 0;
      for (auto c : chunks) total += store->chunk_size(c);
      buffers.emplace_back(std::size_t(total));
      sender_of_buffer.push_back(from);
      auto* data = buffers.back().data();
      for (std::size_t off = 0, piece = 0; off < total; off += kPiece, ++piece) {
        const auto n = int(std::min<std::uint64_t>(kPiece, total - off));
        requests.push_back(MPI_REQUEST_NULL);
        peer_of.push_back(from);
        check(MPI_Irecv(data + off, n, MPI_BYTE, from, kDataTag + int(piece), comm, &requests.back()), "Irecv");
      }
    }
    for (auto& [to, bytes] : outgoing) {
      const std::uint64_t total = bytes.size();
      for (std::size_t off = 0, piece = 0; off < total; off += kPiece, ++piece) {
        const auto n = int(std::min<std::uint64_t>(kPiece, total - off));
        requests.push_back(MPI_REQUEST_NULL);
        peer_of.push_back(to);
        check(MPI_Isend(bytes.data() + off, n, MPI_BYTE, to, kDataTag + int(piece), comm, &requests.back()), "Isend");
      }
    }
    const auto pending = wait_until(requests, Clock::now() + timeout());
    if (!pending.empty()) {
      std::set<int> peers;
      for (auto i : pending) peers.insert(peer_of[i]);
      abandon(requests, pending);
      bury(std::move(buffers)), bury(std::move(outgoing));
      std::string names;
      for (int p : peers) names += (names.empty() ? "" : ", ") + std::to_string(p);
      throw ExchangeError(where(epoch) + "rank " + std::to_string(rank) + " timed out after " +
                          std::to_string(int(options.timeout_s)) + " s moving chunks to or from rank(s) " + names +
                          " (a rank died, hangs, or the network is slower than the exchange timeout)");
    }
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      std::size_t off = 0;
      for (auto c : incoming[sender_of_buffer[i]]) {
        const auto n = std::size_t(store->chunk_size(c));
        store->add(c, std::span<const std::uint8_t>(buffers[i]).subspan(off, n));  // checked against its hash
        off += n;
        ++stats.received_chunks, stats.received_bytes += n;
      }
    }
    store->commit();
  }

  void join_ahead() {
    if (ahead.joinable()) ahead.join();
  }
};

// One ChunkExchange over MPI: the state above, and the background thread that runs epoch + 1's
// exchange while epoch is consumed.
class MpiExchange final : public ExchangeBackend {
 public:
  MpiExchange(std::shared_ptr<ChunkStore> store, std::int64_t comm, const ExchangeOptions& options);
  ~MpiExchange() override;
  ExchangeStats prepare(const StreamPlan& plan, std::uint64_t epoch) override;
  void finish() override;
  const std::shared_ptr<ChunkStore>& store() const override { return state_->store; }
  int rank() const override { return state_->rank; }
  int size() const override { return state_->size; }
  bool background() const override { return state_->background; }

 private:
  std::unique_ptr<ExchangeState> state_;
};

MpiExchange::MpiExchange(std::shared_ptr<ChunkStore> store, std::int64_t comm, const ExchangeOptions& options)
    : state_(std::make_unique<ExchangeState>()) {
  auto& s = *state_;  // the store and the timeout were checked by ChunkExchange
  s.store = std::move(store);
  s.options = options;
  int initialized = 0, provided = MPI_THREAD_SINGLE;
  MPI_Initialized(&initialized);
  if (!initialized) {
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "Init_thread");
    if (!finalize_registered) std::atexit(finalize_at_exit), finalize_registered = true;
  } else {
    MPI_Query_thread(&provided);
  }
  s.background = options.background && provided == MPI_THREAD_MULTIPLE;
  const MPI_Comm base = comm == ChunkExchange::kWorld ? MPI_COMM_WORLD : MPI_Comm_f2c(MPI_Fint(comm));
  MPI_Request request = MPI_REQUEST_NULL;
  check(MPI_Comm_idup(base, &s.comm, &request), "Comm_idup");
  std::vector<MPI_Request> requests{request};
  if (!wait_until(requests, Clock::now() + s.timeout()).empty())
    throw ExchangeError("tezip exchange: not every rank of the communicator joined within " +
                        std::to_string(int(options.timeout_s)) + " s");
  MPI_Comm_set_errhandler(s.comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(s.comm, &s.rank);
  MPI_Comm_size(s.comm, &s.size);
  std::lock_guard lock(live_mutex);
  live.insert(this);
}

MpiExchange::~MpiExchange() {
  {
    std::lock_guard lock(live_mutex);
    live.erase(this);
  }
  state_->join_ahead();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && !state_->broken && state_->comm != MPI_COMM_NULL) MPI_Comm_free(&state_->comm);
}

void MpiExchange::finish() { state_->join_ahead(); }

void finalize_at_exit() {
  {
    std::lock_guard lock(live_mutex);
    for (auto* e : live) e->finish();
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

ExchangeStats MpiExchange::prepare(const StreamPlan& plan, std::uint64_t epoch) {
  auto& s = *state_;
  if (plan.options().world_size != std::size_t(s.size) || plan.options().rank != std::size_t(s.rank))
    throw std::invalid_argument("the stream's rank " + std::to_string(plan.options().rank) + " of " +
                                std::to_string(plan.options().world_size) + " is not the communicator's " +
                                std::to_string(s.rank) + " of " + std::to_string(s.size));
  if (plan.num_blocks() && s.store->num_chunks() != plan.owners(0).size())
    throw std::invalid_argument("the chunk store " + s.store->directory().string() + " is not of the stream's data");
  const auto start = Clock::now();
  ExchangeStats stats;
  if (s.ahead.joinable() && s.ahead_epoch == epoch) {
    s.join_ahead();
    if (s.ahead_error) std::rethrow_exception(std::exchange(s.ahead_error, nullptr));
    stats = s.ahead_stats;
  } else {
    s.join_ahead();  // ahead for another epoch: its chunks are extra, dropped below if unneeded
    s.ahead_error = nullptr;
    stats = s.transfer(plan, epoch);
  }
  stats.waited_seconds = seconds_since(start);
  drop_unneeded_chunks(*s.store, plan.chunks_needed(epoch)[std::size_t(s.rank)], stats);
  s.store->set_tag(exchange_epoch_tag(plan, epoch));
  if (s.background) {
    s.ahead_epoch = epoch + 1;
    s.ahead = std::thread([this, plan, epoch] {
      try {
        state_->ahead_stats = state_->transfer(plan, epoch + 1);
      } catch (...) {
        state_->ahead_error = std::current_exception();
      }
    });
  }
  return stats;
}



std::unique_ptr<ExchangeBackend> open_exchange(std::shared_ptr<ChunkStore> store, std::int64_t comm,
                                               const ExchangeOptions& options) {
  return std::make_unique<MpiExchange>(std::move(store), comm, options);
}

const MpiModule kModule{TEZIP_MPI_MODULE_ABI, join_world,   leave_world, world_all_ok,
                        world_root_ok,        world_gather, open_exchange};

}  // namespace
}  // namespace tezip

extern "C" __attribute__((visibility("default"))) const tezip::MpiModule* tezip_mpi_module_v1() { return &tezip::kModule; }
