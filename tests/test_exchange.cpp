// The partial exchange: chunk_moves (every rank's plan alike), Stream over a store without MPI,
// and, under `mpirun -np 4` (ctest: exchange_mpi), the guarantees of DESIGN.md §7 with each rank's
// own store folder: every sample once per epoch, no read of the global file after the first epoch,
// bytes sent = the plan's moves (round(Q n) blocks of a rank's n), a dead rank or a damaged chunk
// reported on every rank within the timeout, the same samples for 0, 1 and 2 decode threads.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "format/archive.hpp"
#include "format/errors.hpp"
#include "loader/chunk_store.hpp"
#include "loader/exchange.hpp"
#include "loader/stream.hpp"
#include "support/cli_run.hpp"
#include "support/loader_data.hpp"

using namespace tezip;
using namespace tezip::test;
namespace fs = std::filesystem;

namespace {

// 6 sequences, 140 frames, GOPs of 3: 50 chunks, about 12 per rank of 4.
const LoaderData& data() {
  static const LoaderData d = make_loader_data({25, 19, 31, 22, 27, 16}, 3);
  return d;
}

constexpr std::size_t kWorld = 4;

StreamOptions options_for(std::size_t clip_len, double q, std::size_t rank, std::uint64_t epoch) {
  StreamOptions o;
  o.clip_len = clip_len, o.world_size = kWorld, o.rank = rank, o.epoch = epoch, o.exchange = q;
  o.seed = 11, o.shuffle_buffer = 8, o.threads = 2, o.prefetch = 4;
  return o;
}

std::string env(const char* name, const char* fallback = "") {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

// Used only by the mpirun test (builds with MPI).
[[maybe_unused]] std::vector<std::string> lines_of(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE("chunk_moves: each needed chunk comes from a rank that held it, the owned ones from their owner", "[exchange]") {
  const Reader reader(data().archive);
  for (std::size_t clip_len : {1, 4}) {
    const StreamPlan plan(reader, options_for(clip_len, 0.3, 0, 0));
    for (std::uint64_t e = 1; e < 4; ++e) {
      const auto before = plan.chunks_needed(e - 1), now = plan.chunks_needed(e);
      const auto owner_before = plan.owners(e - 1), owner_now = plan.owners(e);
      std::vector<std::set<std::size_t>> held(kWorld);
      for (std::size_t r = 0; r < kWorld; ++r) held[r] = {before[r].begin(), before[r].end()};
      std::vector<std::size_t> moved_blocks(kWorld, 0), blocks(kWorld, 0);
      for (std::size_t b = 0; b < owner_before.size(); ++b)
        if (owner_before[b] != SIZE_MAX) ++blocks[owner_before[b]], moved_blocks[owner_before[b]] += owner_now[b] != owner_before[b];
      for (const auto& m : chunk_moves(plan, e)) {
        CAPTURE(clip_len, e, m.chunk, m.from, m.to);
        CHECK(held[m.from].count(m.chunk));
        CHECK_FALSE(held[m.to].count(m.chunk));
        if (m.owned && owner_before[m.chunk] != SIZE_MAX) CHECK(m.from == owner_before[m.chunk]);
        held[m.to].insert(m.chunk);
      }
      for (std::size_t r = 0; r < kWorld; ++r) {
        for (auto c : now[r]) CHECK(held[r].count(c));
        // Q of a rank's blocks leave it, within one block (round).
        CHECK(moved_blocks[r] == std::size_t(std::llround(0.3 * double(blocks[r]))));
      }
    }
  }
}

TEST_CASE("Stream over a store without an exchange stages only what it lacks", "[exchange]") {
  TempDir dir("tezip-exchange");
  auto store = std::make_shared<ChunkStore>(dir / "store", data().archive);
  const Reader global(data().archive);
  std::uint64_t staged_later = 0;
  for (std::uint64_t epoch = 0; epoch < 3; ++epoch) {
    auto o = options_for(2, 0.0, 1, epoch);  // Q = 0: each rank keeps its blocks
    Stream stream(store, nullptr, o);
    Stream plain(data().archive, o);
    while (auto s = stream.next()) {
      auto p = plain.next();
      REQUIRE(p);
      CHECK((s->sequence == p->sequence && s->start == p->start && s->data == p->data));
    }
    CHECK_FALSE(plain.next());
    if (epoch == 0) CHECK(stream.store_stats().staged_chunks == StreamPlan(global, o).chunks_needed(0)[1].size());
    if (epoch > 0) staged_later += stream.store_stats().staged_bytes;
  }
  CHECK(staged_later == 0);
}

TEST_CASE("ChunkExchange built without MPI says so", "[exchange]") {
  if (built_with_mpi()) SUCCEED("this build has MPI (the mpirun test covers it)");
  else {
    TempDir dir("tezip-exchange");
    auto store = std::make_shared<ChunkStore>(dir / "store", data().archive);
    CHECK_THROWS_WITH(ChunkExchange(store), Catch::Matchers::Contains("built without MPI"));
  }
}

// One rank of the mpirun job started by the test below; writes what it saw into $TEZIP_EXCHANGE_DIR/out.
TEST_CASE("exchange rank (under mpirun)", "[.exchange_rank]") {
  const fs::path dir = env("TEZIP_EXCHANGE_DIR");
  REQUIRE(!dir.empty());
  const std::string scenario = env("TEZIP_EXCHANGE_SCENARIO", "normal");
  const auto clip_len = std::size_t(std::stoul(env("TEZIP_EXCHANGE_CLIP", "1")));
  const double q = std::stod(env("TEZIP_EXCHANGE_Q", "0.3"));
  const std::size_t rank = std::stoul(env("OMPI_COMM_WORLD_RANK", "0"));
  const auto source = dir / ("global-" + std::to_string(rank) + ".tzp");
  std::ofstream out(dir / "out" / ("rank-" + std::to_string(rank) + ".txt"));
  try {
    auto store = std::make_shared<ChunkStore>(dir / ("store-" + std::to_string(rank)), source);
    ExchangeOptions eo;
    // Short where a rank is meant to die (the test waits for the timeout), long where none should
    // ever pass (a loaded machine may start the ranks seconds apart).
    eo.timeout_s = scenario == "die" ? 3 : 30;
    eo.background = scenario != "damage";
    auto exchange = std::make_shared<ChunkExchange>(store, ChunkExchange::kWorld, eo);
    REQUIRE(exchange->rank() == int(rank));
    for (std::uint64_t epoch = 0; epoch < 4; ++epoch) {
      const auto o = options_for(clip_len, q, rank, epoch);
      if (scenario == "damage" && epoch == 1 && rank == 1) {
        // Damage, in this rank's store, a chunk it is to send for epoch 1.
        const StreamPlan plan(Reader(std::shared_ptr<const ChunkStore>(store)), o);
        for (const auto& m : chunk_moves(plan, 1))
          if (m.from == 1) {
            const ArchiveReader copy(store->archives()[0]);
            const auto& c = copy.index().chunks[m.chunk];
            std::fstream f(store->archives()[0], std::ios::in | std::ios::out | std::ios::binary);
            f.seekp(std::streamoff(c.offset + c.size / 2));
            f.put('\x5a');
            break;
          }
      }
      Stream stream(store, exchange, o);
      // From here on the global file is gone: nothing after the first staging may read it.
      if (epoch == 0) fs::rename(source, dir / ("moved-" + std::to_string(rank) + ".tzp"));
      const auto& st = stream.store_stats();
      out << "stats " << epoch << ' ' << st.sent_bytes << ' ' << st.sent_chunks << ' ' << st.received_bytes << ' '
          << st.received_chunks << ' ' << st.staged_bytes << ' ' << st.sent_owned_chunks << ' ' << st.waited_seconds << ' '
          << st.seconds << '\n';
      std::vector<std::uint64_t> hashes;
      while (auto s = stream.next()) {
        hashes.push_back(hash_bytes(s->data));
        out << "sample " << epoch << ' ' << s->sequence << ' ' << s->start << ' ' << s->repeated << ' ' << hashes.back() << '\n';
      }
      for (unsigned threads : {0u, 1u}) {
        auto ot = o;
        ot.threads = threads;
        Stream again(std::make_shared<const Reader>(std::shared_ptr<const ChunkStore>(store)), ot);
        std::vector<std::uint64_t> other;
        while (auto s = again.next()) other.push_back(hash_bytes(s->data));
        out << "threads " << epoch << ' ' << threads << ' ' << (other == hashes ? "same" : "different") << '\n';
      }
      out << "traffic " << epoch << ' ' << store->traffic().source_bytes << '\n';
      out.flush();
      if (scenario == "die" && rank == 2 && epoch == 0) {
        out << "dying\n";
        out.flush();
        std::_Exit(7);
      }
    }
    exchange->finish();
    out << "done\n";
  } catch (const std::exception& e) {
    out << "error " << e.what() << '\n';
    out.flush();
    std::_Exit(3);  // MPI_Finalize might wait for the rank that is gone
  }
}

#ifdef TEZIP_MPIEXEC
namespace {

struct Job {
  std::shared_ptr<TempDir> holder = std::make_shared<TempDir>("tezip-exchange-mpi");
  fs::path dir = holder->path();
  std::map<std::size_t, std::vector<std::string>> lines;  // per rank
  double seconds = 0;
};

Job run_job(const std::string& scenario, std::size_t clip_len, double q) {
  Job job;
  fs::create_directories(job.dir / "out");
  for (std::size_t r = 0; r < kWorld; ++r) fs::copy_file(data().archive, job.dir / ("global-" + std::to_string(r) + ".tzp"));
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  std::ostringstream cmd;
  cmd << "timeout 100 " << quote(TEZIP_MPIEXEC) << " --allow-run-as-root --oversubscribe --mca orte_abort_on_non_zero_status 0"
      << " -np " << kWorld << " -x TEZIP_EXCHANGE_DIR=" << quote(job.dir) << " -x TEZIP_EXCHANGE_SCENARIO=" << scenario
      << " -x TEZIP_EXCHANGE_CLIP=" << clip_len << " -x TEZIP_EXCHANGE_Q=" << q << ' ' << quote(self)
      << " '[exchange_rank]' > " << quote(job.dir / "mpirun.log") << " 2>&1";
  const auto start = std::chrono::steady_clock::now();
  const int status = std::system(cmd.str().c_str());
  job.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::ifstream log(job.dir / "mpirun.log");
  UNSCOPED_INFO("$ " << cmd.str() << "\n" << std::string(std::istreambuf_iterator<char>(log), {}) << "[status " << status << "]");
  for (std::size_t r = 0; r < kWorld; ++r) {
    job.lines[r] = lines_of(job.dir / "out" / ("rank-" + std::to_string(r) + ".txt"));
    std::string all;
    for (const auto& l : job.lines[r]) all += l.rfind("sample", 0) == 0 ? "" : l + "\n";
    UNSCOPED_INFO("rank " << r << ":\n" << all);
    if (!env("TEZIP_EXCHANGE_SHOW").empty()) std::printf("%s rank %zu:\n%s", scenario.c_str(), r, all.c_str());
  }
  return job;
}

std::vector<std::vector<std::string>> fields(const std::vector<std::string>& lines, const std::string& kind) {
  std::vector<std::vector<std::string>> out;
  for (const auto& l : lines) {
    std::istringstream in(l);
    std::vector<std::string> f;
    for (std::string w; in >> w;) f.push_back(w);
    if (!f.empty() && f[0] == kind) out.push_back(f);
  }
  return out;
}

}  // namespace

TEST_CASE("mpirun -np 4: every sample once per epoch from node-local stores, chunks moved over MPI", "[.exchange_mpi]") {
  const Reader global(data().archive);
  for (const auto& [clip_len, q] : {std::pair<std::size_t, double>{1, 0.3}, std::pair<std::size_t, double>{3, 0.1}}) {
    CAPTURE(clip_len, q);
    const auto job = run_job("normal", clip_len, q);
    const StreamPlan plan(global, options_for(clip_len, q, 0, 0));
    std::set<std::pair<std::size_t, std::size_t>> everything;
    for (std::size_t s = 0; s < global.num_sequences(); ++s)
      for (std::size_t t = 0; t + clip_len <= global.num_frames(s); ++t) everything.insert({s, t});
    for (std::size_t r = 0; r < kWorld; ++r) REQUIRE(job.lines.at(r).back() == "done");
    for (std::uint64_t e = 0; e < 4; ++e) {
      CAPTURE(e);
      std::set<std::pair<std::size_t, std::size_t>> seen;
      std::size_t own = 0;
      std::vector<std::size_t> counts(kWorld, 0);
      const auto moves = e ? chunk_moves(plan, e) : std::vector<ChunkMove>{};
      const auto owner_before = e ? plan.owners(e - 1) : std::vector<std::size_t>{};
      const auto owner_now = plan.owners(e);
      for (std::size_t r = 0; r < kWorld; ++r) {
        for (const auto& f : fields(job.lines.at(r), "sample")) {
          if (std::stoull(f[1]) != e) continue;
          ++counts[r];
          const std::pair<std::size_t, std::size_t> key{std::stoul(f[2]), std::stoul(f[3])};
          // The pixels are the archive's.
          CHECK(std::stoull(f[5]) == hash_bytes(global.clip(key.first, key.second, clip_len).data));
          if (f[4] == "1") continue;  // a Balance::Repeat pad
          ++own;
          CHECK(seen.insert(key).second);  // delivered once
        }
        for (const auto& f : fields(job.lines.at(r), "threads"))
          if (std::stoull(f[1]) == e) CHECK(f[3] == "same");
        const auto st = fields(job.lines.at(r), "stats").at(e);
        // What moved is what the plan says: every byte sent is a chunk the receiver needs now.
        std::uint64_t plan_sent = 0, plan_received = 0;
        std::size_t plan_sent_chunks = 0;
        for (const auto& m : moves) {
          if (m.from == r) plan_sent += global.blocks()[m.chunk].bytes, ++plan_sent_chunks;
          if (m.to == r) plan_received += global.blocks()[m.chunk].bytes;
        }
        CHECK(std::stoull(st[2]) == plan_sent);
        CHECK(std::stoull(st[3]) == plan_sent_chunks);
        CHECK(std::stoull(st[4]) == plan_received);
        if (e == 0) {
          CHECK(std::stoull(st[6]) > 0);  // the first epoch is staged from the global file
        } else {
          CHECK(std::stoull(st[6]) == 0);  // later ones never read it (it has been renamed away)
          if (clip_len == 1) {
            // No GOP is read on into: a rank sends exactly the blocks leaving it, round(Q n) of its n.
            std::size_t n = 0, leaving = 0;
            std::uint64_t share = 0;
            for (std::size_t b = 0; b < owner_before.size(); ++b)
              if (owner_before[b] == r) ++n, share += global.blocks()[b].bytes, leaving += owner_now[b] != r;
            CHECK(std::stoull(st[3]) == leaving);
            CHECK(std::abs(double(std::stoull(st[3])) - q * double(n)) <= 0.5);
            UNSCOPED_INFO("rank " << r << " epoch " << e << ": sent " << st[2] << " bytes, Q x share = " << q * double(share));
          }
        }
        const auto traffic = fields(job.lines.at(r), "traffic");
        CHECK(traffic.at(e)[2] == traffic.at(0)[2]);  // bytes read from the source: none after epoch 0
      }
      CHECK(seen == everything);
      CHECK(own == everything.size());
      for (std::size_t r = 1; r < kWorld; ++r) CHECK(counts[r] == counts[0]);
    }
    CHECK(job.seconds < 60);
  }
}

TEST_CASE("mpirun -np 4: a rank that dies is reported on every other rank within the timeout", "[.exchange_mpi]") {
  const auto job = run_job("die", 1, 0.3);
  CHECK(job.seconds < 60);
  CHECK(job.lines.at(2).back() == "dying");
  for (std::size_t r : {0, 1, 3}) {
    CAPTURE(r);
    REQUIRE(!job.lines.at(r).empty());
    const auto& last = job.lines.at(r).back();
    CHECK_THAT(last, Catch::Matchers::StartsWith("error tezip exchange for epoch"));
    CHECK_THAT(last, Catch::Matchers::Contains("rank 2"));
  }
}

TEST_CASE("mpirun -np 4: a damaged chunk in a store is reported on every rank", "[.exchange_mpi]") {
  const auto job = run_job("damage", 1, 0.3);
  CHECK(job.seconds < 60);
  for (std::size_t r = 0; r < kWorld; ++r) {
    CAPTURE(r);
    REQUIRE(!job.lines.at(r).empty());
    const auto& last = job.lines.at(r).back();
    CHECK_THAT(last, Catch::Matchers::StartsWith("error tezip exchange for epoch 1: rank 1: the chunk store"));
    CHECK_THAT(last, Catch::Matchers::Contains("holds a damaged chunk"));
  }
}
#endif
