#include "batch/batch.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "format/archive.hpp"
#include "compressor/decoder.hpp"
#include "format/errors.hpp"
#include "io/atomic_file.hpp"
#include "io/output_path.hpp"
#include "io/temporary_files.hpp"
#include "predictor/learned_predictor.hpp"
#include "predictor/model_file.hpp"

namespace tezip {

namespace {

// An unsigned number from the environment (SLURM_ARRAY_TASK_ID ...), or nullopt when unset.
std::optional<unsigned> env_number(const char* name) {
  const char* text = std::getenv(name);
  if (!text || !*text) return std::nullopt;
  char* end = nullptr;
  const unsigned long v = std::strtoul(text, &end, 10);
  if (*end != '\0' || v > 1u << 30) throw std::invalid_argument(std::string(name) + "='" + text + "' is not a task number");
  return unsigned(v);
}

}  // namespace

WorkerPlace worker_place(std::optional<unsigned> task_id, std::optional<unsigned> num_tasks, int mpi_rank, int mpi_size) {
  const bool given = task_id.has_value();
  std::optional<unsigned> task = given ? task_id : env_number("SLURM_ARRAY_TASK_ID");
  const std::optional<unsigned> tasks = num_tasks ? num_tasks : env_number("SLURM_ARRAY_TASK_COUNT");
  if (!given && task) {
    const unsigned first = env_number("SLURM_ARRAY_TASK_MIN").value_or(0);
    if (*task < first) throw std::invalid_argument("SLURM_ARRAY_TASK_ID is below SLURM_ARRAY_TASK_MIN");
    *task -= first;
  }
  if (task.has_value() != tasks.has_value()) throw std::invalid_argument("--task-id and --num-tasks go together");
  if (tasks && (*tasks == 0 || *task >= *tasks))
    throw std::invalid_argument("--task-id must be below --num-tasks (a Slurm array must be contiguous: --array=0-N)");
  const unsigned size = unsigned(std::max(1, mpi_size));
  return {task.value_or(0) * size + unsigned(mpi_rank), tasks.value_or(1) * size};
}
namespace {

namespace fs = std::filesystem;

std::string shard_file(std::size_t i) {
  char name[32];
  std::snprintf(name, sizeof name, "shard-%05zu.tzp", i);
  return name;
}

// Largest first, each into the lightest bin; ties by index. Returns the bin of each item.
std::vector<std::size_t> balance(std::span<const std::uint64_t> weights, std::size_t bins) {
  std::vector<std::size_t> order(weights.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return weights[a] > weights[b]; });
  std::vector<std::uint64_t> load(bins, 0);
  std::vector<std::size_t> bin_of(weights.size(), 0);
  for (const std::size_t i : order) {
    const std::size_t lightest = std::size_t(std::min_element(load.begin(), load.end()) - load.begin());
    bin_of[i] = lightest;
    load[lightest] += weights[i];
  }
  return bin_of;
}

// The settings an archive written with `options` records, writer aside (a newer tezip may keep a
// shard an older one wrote, as long as it encodes the same way).
std::vector<std::uint8_t> settings_bytes(ArchiveSettings settings) {
  settings.writer.clear();
  ArchiveIndex index;
  index.settings = std::move(settings);
  return serialize_index(index);
}

// Hidden files a killed worker may have left for shard `file`: ".shard-00003.tzp.unverified" and
// the archive writer's "..shard-00003.tzp.unverified.tmp-PID-N".
void remove_leftovers(const fs::path& dir, const std::string& file) {
  std::error_code ec;
  std::vector<fs::path> leftovers;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const auto name = it->path().filename().string();
    const auto dots = name.find_first_not_of('.');
    if (dots != 0 && dots != std::string::npos && name.compare(dots, file.size(), file) == 0) leftovers.push_back(it->path());
  }
  for (const auto& path : leftovers) fs::remove(path, ec);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

std::vector<std::size_t> BatchPlan::shards_of(unsigned worker) const {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < shards.size(); ++i)
    if (shards[i].worker == worker) out.push_back(i);
  return out;
}

BatchPlan plan_batch(std::vector<SequenceSize> sequences, std::uint64_t shard_size, unsigned workers) {
  if (shard_size == 0) throw std::invalid_argument("plan_batch: shard size must be at least 1 byte");
  if (workers == 0) throw std::invalid_argument("plan_batch: at least one worker");
  BatchPlan plan;
  plan.workers = workers;
  plan.sequences = std::move(sequences);
  if (plan.sequences.empty()) return plan;
  std::uint64_t total = 0;
  std::vector<std::uint64_t> sizes;
  for (const auto& s : plan.sequences) {
    total += s.raw_bytes;
    sizes.push_back(s.raw_bytes);
  }
  const std::uint64_t wanted = total / shard_size + (total % shard_size != 0);
  const std::size_t count = std::clamp<std::uint64_t>(wanted, 1, plan.sequences.size());
  const auto shard_of = balance(sizes, count);
  plan.shards.resize(count);
  for (std::size_t i = 0; i < plan.sequences.size(); ++i) {  // in dataset order within each shard
    auto& shard = plan.shards[shard_of[i]];
    shard.sequences.push_back(i);
    shard.frames += plan.sequences[i].frames;
    shard.raw_bytes += plan.sequences[i].raw_bytes;
  }
  std::vector<std::uint64_t> shard_sizes;
  for (std::size_t i = 0; i < count; ++i) {
    plan.shards[i].file = shard_file(i);
    shard_sizes.push_back(plan.shards[i].raw_bytes);
  }
  const auto worker_of = balance(shard_sizes, workers);
  for (std::size_t i = 0; i < count; ++i) plan.shards[i].worker = unsigned(worker_of[i]);
  return plan;
}

namespace {

std::string request_of(const BatchPlan& plan, const CompressOptions& c) {
  nlohmann::json sequences = nlohmann::json::array();
  for (const auto& s : plan.sequences) sequences.push_back({s.name, s.frames, s.raw_bytes});
  std::string start;
  if (c.adapt_from_scratch) {
    start = "stack";
    for (const int channels : c.adapt.net.a_channels) start += " " + std::to_string(channels);
  } else {
    start = load_model_file(c.learned.model.empty() ? default_model_path() : c.learned.model).weights_sha256;
  }
  const nlohmann::json request = {{"sequences", sequences},
                                  {"budget", c.adapt_auto ? nlohmann::json("auto") : nlohmann::json(c.adapt.seconds)},
                                  {"start", start},
                                  {"residual", c.adapt.residual},
                                  {"seed", c.adapt.seed},
                                  {"weight_bits", c.adapt.weight_bits},
                                  {"max_values", c.adapt_max_values}};
  const std::string text = request.dump();
  return sha256_hex(std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

// The "batch_request" an adapted model's metadata records; "" for any other model.
std::string batch_request_of(const ModelFile& model) {
  const auto metadata = nlohmann::json::parse(model.metadata_json, nullptr, false);
  if (!metadata.is_object()) return "";
  const auto it = metadata.find("batch_request");
  return it != metadata.end() && it->is_string() ? it->get<std::string>() : "";
}

// OUTDIR's models written by batch jobs (dataset_model_name, a batch_request): path and model.
std::vector<std::pair<fs::path, ModelFile>> batch_models_in(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const auto name = it->path().filename().string();
    if (name.starts_with("prednet-") && it->path().extension() == ".tzm") files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  std::vector<std::pair<fs::path, ModelFile>> models;
  for (const auto& file : files) {
    try {
      ModelFile model = load_model_file(file);
      if (file.filename() == dataset_model_name(model.weights_sha256) && !batch_request_of(model).empty())
        models.emplace_back(file, std::move(model));
    } catch (const ModelError&) {
      // Damaged (a rerun adapts again) or not ours: left alone.
    }
  }
  return models;
}

}  // namespace

BatchJob::BatchJob(const fs::path& input, fs::path output_dir, BatchOptions options)
    : input_(input), output_dir_(resolved_path(output_dir)), options_(std::move(options)) {
  // Before the input is read: the shards must neither replace nor join it.
  const fs::path inputs[] = {input};
  check_output_apart(output_dir, inputs);
  sources_ = open_sources(input, options_.compress.source);
  std::error_code exists;
  if (fs::exists(index_path(), exists) && !looks_like_dataset_index(index_path()))
    throw OutputError(index_path().string() + ": exists and is not a tezip dataset index; batch would replace it (choose another -o)");
  std::vector<SequenceSize> sizes;
  for (const auto& s : sources_)
    sizes.push_back({s->name(), s->frame_count(), std::uint64_t(s->geometry().raw_bytes()) * s->frame_count()});
  plan_ = plan_batch(std::move(sizes), options_.shard_size, options_.workers);
  options_.compress.progress = {};
  options_.compress.overwrite = true;  // only ever over this job's own hidden files
  // With --adapt the predictor is known once the model is (use_adapted_model).
  if (adapts()) adapt_request_ = request_of(plan_, options_.compress);
  else predictor_ = make_predictor(options_.compress)->identity();
  std::error_code ec;
  fs::create_directories(output_dir_, ec);
  if (ec) throw OutputError(output_dir_.string() + ": cannot create: " + ec.message());
}

BatchJob::~BatchJob() = default;

std::string BatchJob::check_shard(const fs::path& path, std::size_t shard, bool deep) const {
  try {
    const auto& planned = plan_.shards.at(shard);
    const ArchiveReader reader(path);
    const auto& index = reader.index();
    ArchiveSettings expected;
    expected.coding = options_.compress.coding;
    expected.predictor = predictor_;
    expected.gop = options_.compress.gop;
    if (settings_bytes(index.settings) != settings_bytes(expected)) return "written with other settings";
    if (index.sequences.size() != planned.sequences.size()) return "holds other sequences than the plan's";
    for (std::size_t k = 0; k < planned.sequences.size(); ++k) {
      const auto& want = plan_.sequences[planned.sequences[k]];
      if (index.sequences[k].name != want.name || index.sequences[k].frames.size() != want.frames)
        return "holds other sequences than the plan's";
    }
    if (index.raw_bytes() != planned.raw_bytes) return "holds other frames than the plan's";
    if (!deep) return "";
    const auto report = verify(path, std::nullopt, options_.compress.threads);
    if (!report.failures.empty()) return "does not verify: " + report.failures.front();
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

WorkerReport BatchJob::run_worker(unsigned worker, const std::function<void(const ShardResult&)>& on_shard) {
  if (worker >= plan_.workers)
    throw std::invalid_argument("worker " + std::to_string(worker) + " of " + std::to_string(plan_.workers));
  if (adapts() && adapted_model_.empty())
    throw std::logic_error("BatchJob::run_worker: --adapt, and no adapted model in use (use_adapted_model)");
  const auto start = std::chrono::steady_clock::now();
  WorkerReport report;
  report.worker = worker;
  for (const std::size_t i : plan_.shards_of(worker)) {
    const auto shard_start = std::chrono::steady_clock::now();
    const auto& planned = plan_.shards[i];
    const fs::path target = output_dir_ / planned.file;
    ShardResult result;
    result.shard = i;
    result.raw_bytes = planned.raw_bytes;
    std::error_code ec;
    if (fs::exists(target, ec)) {
      // A damaged shard of ours is redone; a file that never was one is someone else's.
      if (!is_tezip_archive_file(target))
        throw OutputError(target.string() + ": exists and is not a tezip archive; batch does not replace it (choose another -o)");
      result.redone = check_shard(target, i, true);
      result.kept = result.redone.empty();
    }
    if (!result.kept) {
      remove_leftovers(output_dir_, planned.file);
      std::vector<std::unique_ptr<SequenceSource>> chosen;
      for (const std::size_t s : planned.sequences) {
        if (!sources_[s]) throw std::logic_error("BatchJob::run_worker: sequence '" + plan_.sequences[s].name + "' used twice");
        chosen.push_back(std::move(sources_[s]));
      }
      const fs::path unverified = output_dir_ / std::string(".").append(planned.file).append(".unverified");
      const TemporaryPath unverified_guard(unverified);  // removed on an interrupt
      compress_sources(std::move(chosen), unverified, options_.compress);
      const std::string problem = check_shard(unverified, i, true);
      if (!problem.empty()) {
        fs::remove(unverified, ec);
        throw DataError(target.string() + ": the shard just written " + problem);
      }
      // Replaces a damaged shard in one step: readers see the old file or the new, never neither.
      fs::rename(unverified, target, ec);
      if (ec) throw OutputError(target.string() + ": cannot rename into place: " + ec.message());
      report.written_raw_bytes += planned.raw_bytes;
    }
    result.archive_bytes = fs::file_size(target);
    result.seconds = seconds_since(shard_start);
    report.raw_bytes += result.raw_bytes;
    report.archive_bytes += result.archive_bytes;
    report.shards.push_back(result);
    if (on_shard) on_shard(result);
  }
  report.seconds = seconds_since(start);
  return report;
}

bool BatchJob::adapts() const { return options_.compress.adapts(); }

std::optional<fs::path> BatchJob::find_adapted_model() const {
  const std::string request = adapt_request();
  for (auto& [path, model] : batch_models_in(output_dir_))
    if (batch_request_of(model) == request) return path;
  return std::nullopt;
}

BatchJob::Adapted BatchJob::adapt_model(unsigned threads) const {
  Adapted adapted;
  try {
    adapted.result = adapt_to_input(input_, options_.compress, resolve_threads(threads), "tezip batch --adapt (training)");
  } catch (const ModelError& e) {  // LearnedModuleError too: no libtorch
    throw InputError(e.what());
  }
  ModelFile& model = adapted.result.model;
  auto metadata = nlohmann::json::parse(model.metadata_json, nullptr, false);
  if (!metadata.is_object()) metadata = nlohmann::json::object();
  metadata["trainer"] = "tezip batch --adapt";
  metadata["batch_request"] = adapt_request();
  model.metadata_json = metadata.dump();
  const auto bytes = model.serialize();
  adapted.path = output_dir_ / dataset_model_name(model.weights_sha256);
  std::error_code ec;
  if (fs::exists(adapted.path, ec)) {
    // Only ever one of ours with these very weights (an earlier run's, under another request).
    bool ours = false;
    try {
      const auto existing = load_model_file(adapted.path);
      ours = !batch_request_of(existing).empty() && existing.weights_sha256 == model.weights_sha256;
    } catch (const ModelError&) {
    }
    if (!ours) throw OutputError(adapted.path.string() + ": exists and is not a model this batch job wrote; batch does not replace it");
  }
  write_file_atomically(adapted.path, bytes);
  return adapted;
}

fs::path BatchJob::wait_for_adapted_model(double timeout, double poll) const {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    if (auto found = find_adapted_model()) return *found;
    if (seconds_since(start) >= timeout) {
      char text[64];
      std::snprintf(text, sizeof text, "%.0f s", timeout);
      throw OutputError(output_dir_.string() + ": worker 0 has not written the PredNet model adapted to this input in " + text +
                        " (it trains before coding; run array task 0, then rerun this one)");
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(poll));
  }
}

double BatchJob::adapt_wait_seconds() const {
  const double budget = options_.compress.adapt_auto ? 600.0 : options_.compress.adapt.seconds;
  return 2 * budget + 300;
}

void BatchJob::use_adapted_model(const fs::path& path) {
  if (!adapts()) throw std::logic_error("BatchJob::use_adapted_model: the job does not adapt");
  auto model = std::make_shared<ModelFile>(load_model_file(path));
  if (batch_request_of(*model) != adapt_request() || path.filename() != dataset_model_name(model->weights_sha256))
    throw DataError(path.string() + ": is not the model adapted for this batch job's input and options");
  CompressOptions& c = options_.compress;
  c.learned.model.clear();
  c.learned.model_data = std::move(model);
  c.learned.model_name = "adapted";
  predictor_ = make_predictor(c)->identity();
  adapted_model_ = path;
}

std::optional<DatasetIndex> BatchJob::write_index_if_complete() const {
  DatasetIndex index;
  for (std::size_t i = 0; i < plan_.shards.size(); ++i) {
    const auto& planned = plan_.shards[i];
    const fs::path path = output_dir_ / planned.file;
    std::error_code ec;
    if (!fs::exists(path, ec)) return std::nullopt;
    // Its writer verified it before giving it this name. A file left by another plan (other shard
    // size or settings) is not this plan's shard: its worker will redo it and write the index then.
    if (!check_shard(path, i, false).empty()) return std::nullopt;
    ShardEntry entry;
    entry.path = planned.file;
    entry.size = fs::file_size(path);
    entry.hash = hash_file(path);
    for (const std::size_t s : planned.sequences) entry.sequences.push_back(plan_.sequences[s].name);
    entry.frames = planned.frames;
    entry.raw_bytes = planned.raw_bytes;
    index.shards.push_back(std::move(entry));
  }
  if (!adapted_model_.empty()) {
    ModelEntry model;
    model.path = adapted_model_.filename().string();
    model.size = fs::file_size(adapted_model_);
    model.hash = hash_file(adapted_model_);
    model.weights_sha256 = predictor_.weights_sha256;
    index.model = std::move(model);
  }
  const auto path = index_path();
  bool same = false;
  try {
    if (is_dataset_index(path)) {
      const auto existing = read_dataset_index(path);
      same = existing.shards.size() == index.shards.size() &&
             std::equal(existing.shards.begin(), existing.shards.end(), index.shards.begin(), [](const auto& a, const auto& b) {
               return a.path == b.path && a.size == b.size && a.hash == b.hash && a.sequences == b.sequences &&
                      a.frames == b.frames && a.raw_bytes == b.raw_bytes;
             }) &&
             existing.model.has_value() == index.model.has_value() &&
             (!index.model || (existing.model->path == index.model->path && existing.model->size == index.model->size &&
                               existing.model->hash == index.model->hash &&
                               existing.model->weights_sha256 == index.model->weights_sha256));
    }
  } catch (const std::exception&) {
    same = false;  // a damaged index is simply rewritten
  }
  if (!same) write_dataset_index(path, index);
  // Every shard now codes with the model in use: models earlier runs adapted under other requests
  // (batch jobs' own files, by their metadata) are no longer referenced.
  if (!adapted_model_.empty())
    for (const auto& [file, model] : batch_models_in(output_dir_))
      if (file.filename() != adapted_model_.filename()) {
        std::error_code ec;
        fs::remove(file, ec);
      }
  return index;
}

BatchSummary summarize(const BatchPlan& plan, const DatasetIndex& index, std::span<const double> worker_seconds) {
  BatchSummary summary;
  summary.workers.resize(plan.workers);
  for (std::size_t i = 0; i < index.shards.size() && i < plan.shards.size(); ++i) {
    const auto& e = index.shards[i];
    const auto& p = plan.shards[i];
    summary.shards.push_back({e.path, p.worker, e.sequences.size(), e.frames, e.raw_bytes, e.size});
    auto& w = summary.workers[p.worker];
    ++w.shards;
    w.raw_bytes += e.raw_bytes;
    w.archive_bytes += e.size;
    summary.raw_bytes += e.raw_bytes;
    summary.archive_bytes += e.size;
  }
  auto imbalance = [](const std::vector<double>& v) {
    const double mean = std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
    return mean > 0 ? *std::max_element(v.begin(), v.end()) / mean : 1.0;
  };
  std::vector<double> raw;
  for (const auto& w : summary.workers) raw.push_back(double(w.raw_bytes));
  summary.planned_imbalance = imbalance(raw);
  if (worker_seconds.size() == plan.workers) {
    for (std::size_t i = 0; i < plan.workers; ++i) summary.workers[i].seconds = worker_seconds[i];
    summary.time_imbalance = imbalance({worker_seconds.begin(), worker_seconds.end()});
  }
  return summary;
}

}  // namespace tezip
