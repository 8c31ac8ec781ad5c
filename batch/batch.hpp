#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "format/dataset_index.hpp"
#include "compressor/encoder.hpp"
#include "io/source.hpp"

namespace tezip {

// A dataset compressed by a batch job (docs/batch.md): its sequences are split into shards, each an
// ordinary archive, and the shards among workers (MPI ranks or Slurm array tasks). The plan depends
// only on the input and the shard size, never on the number of workers, so the output does not
// either, and any worker can be rerun alone.

struct SequenceSize {
  std::string name;
  std::uint64_t frames = 0;
  std::uint64_t raw_bytes = 0;
};

struct PlannedShard {
  std::string file;                    // "shard-00003.tzp", in the output folder
  std::vector<std::size_t> sequences;  // indices into BatchPlan::sequences, in dataset order
  std::uint64_t frames = 0;
  std::uint64_t raw_bytes = 0;
  unsigned worker = 0;  // the rank or task that writes it
};

struct BatchPlan {
  std::vector<SequenceSize> sequences;  // the dataset's, in open_sources order
  std::vector<PlannedShard> shards;
  unsigned workers = 1;

  std::vector<std::size_t> shards_of(unsigned worker) const;
};

inline constexpr std::uint64_t kDefaultShardSize = std::uint64_t(1) << 30;  // raw bytes

// ceil(total / shard_size) shards (at least one, at most one per sequence), filled by raw size,
// largest sequence first, each into the lightest shard so far; then shards to workers the same way.
// Ties go to the lower index, so the plan is a pure function of its arguments. A sequence is never
// split: a shard holding one sequence larger than shard_size is that large.
BatchPlan plan_batch(std::vector<SequenceSize> sequences, std::uint64_t shard_size, unsigned workers);

// This process's place among a batch job's workers: every MPI rank of every Slurm array task is
// one worker. The array task comes from `task_id`/`num_tasks` when given, else from
// $SLURM_ARRAY_TASK_ID and $SLURM_ARRAY_TASK_COUNT (numbered from $SLURM_ARRAY_TASK_MIN, as
// --array=1-16 does); without either, one task. Throws std::invalid_argument, with a message for
// the user, on values that do not fit together.
struct WorkerPlace {
  unsigned worker = 0, workers = 1;
};
WorkerPlace worker_place(std::optional<unsigned> task_id, std::optional<unsigned> num_tasks, int mpi_rank, int mpi_size);

struct BatchOptions {
  CompressOptions compress;  // progress is not used: a batch job logs one line per shard
  std::uint64_t shard_size = kDefaultShardSize;
  unsigned workers = 1;
};

struct ShardResult {
  std::size_t shard = 0;
  bool kept = false;    // already complete and verified: not written again
  std::string redone;   // why an existing shard was replaced ("" when there was none)
  std::uint64_t raw_bytes = 0;
  std::uint64_t archive_bytes = 0;
  double seconds = 0;
};

struct WorkerReport {
  unsigned worker = 0;
  std::vector<ShardResult> shards;
  std::uint64_t raw_bytes = 0;      // of this worker's shards, written or kept
  std::uint64_t archive_bytes = 0;
  std::uint64_t written_raw_bytes = 0;  // of the shards written by this run
  double seconds = 0;
};

// Ratio per shard, bytes per worker and the load imbalance, for the final summary.
struct BatchSummary {
  struct Shard {
    std::string file;
    unsigned worker = 0;
    std::size_t sequences = 0;
    std::uint64_t frames = 0, raw_bytes = 0, archive_bytes = 0;
  };
  struct Worker {
    std::size_t shards = 0;
    std::uint64_t raw_bytes = 0, archive_bytes = 0;
    double seconds = -1;  // measured (MPI gathers it); -1 when unknown
  };
  std::vector<Shard> shards;
  std::vector<Worker> workers;
  std::uint64_t raw_bytes = 0, archive_bytes = 0;
  double planned_imbalance = 1;  // max / mean raw bytes per worker
  double time_imbalance = 0;     // max / mean seconds per worker; 0 when not measured
};

class BatchJob {
 public:
  // Opens INPUT (see open_sources) and plans the job; OUTDIR is created when missing.
  BatchJob(const std::filesystem::path& input, std::filesystem::path output_dir, BatchOptions options);
  ~BatchJob();
  BatchJob(const BatchJob&) = delete;
  BatchJob& operator=(const BatchJob&) = delete;

  const BatchPlan& plan() const { return plan_; }
  std::filesystem::path index_path() const { return output_dir_ / "index.json"; }

  // Writes the shards of `worker` that are missing, damaged or not this plan's; keeps those that are
  // complete and verify. A shard is compressed under a hidden name, verified, then renamed into
  // place, so a shard's final name only ever holds a verified archive. Call once per worker and job.
  WorkerReport run_worker(unsigned worker, const std::function<void(const ShardResult&)>& on_shard = {});

  // --adapt (docs/batch.md, "Adapting PredNet to the dataset"): one worker trains PredNet on a sample
  // of the whole input, every worker codes its shards with the result, which lies once beside them
  // as dataset_model_name(SHA-256), listed in index.json; the shards record only its SHA-256.
  bool adapts() const;
  // What an adapted model's metadata records of the request that made it ("batch_request"): a
  // SHA-256 of the input's sequences, the budget, seed, forecast and starting weights.
  const std::string& adapt_request() const { return adapt_request_; }
  // The model an earlier run made for this very request, or nullopt.
  std::optional<std::filesystem::path> find_adapted_model() const;
  // Trains (options.compress.adapt...) on `threads` torch threads (the other workers on its node wait
  // idle) and writes the model into OUTDIR atomically; one worker only.
  struct Adapted {
    std::filesystem::path path;
    AdaptResult result;
  };
  Adapted adapt_model(unsigned threads) const;
  // Polls find_adapted_model() every `poll` seconds; throws OutputError after `timeout` seconds.
  std::filesystem::path wait_for_adapted_model(double timeout, double poll = 1.0) const;
  // How long the workers that do not adapt wait for it: twice the budget, plus 5 minutes.
  double adapt_wait_seconds() const;
  // Codes this job's shards with that model (one find_adapted_model() returns); run_worker needs it.
  void use_adapted_model(const std::filesystem::path& path);

  // When every planned shard is in place, writes OUTDIR/index.json (atomically, unless it already
  // says exactly this) and returns the index; nullopt while some shard is still missing.
  std::optional<DatasetIndex> write_index_if_complete() const;

 private:
  // Why the file at `path` is not shard `shard` of this plan; "" when it is. `deep` decodes it all.
  std::string check_shard(const std::filesystem::path& path, std::size_t shard, bool deep) const;

  std::filesystem::path input_, output_dir_;
  BatchOptions options_;
  std::string adapt_request_;                  // --adapt: adapt_request()
  PredictorIdentity predictor_;                // what the shards record
  std::filesystem::path adapted_model_;        // --adapt: the model in use
  std::vector<std::unique_ptr<SequenceSource>> sources_;
  BatchPlan plan_;
};

BatchSummary summarize(const BatchPlan& plan, const DatasetIndex& index, std::span<const double> worker_seconds = {});

}  // namespace tezip
