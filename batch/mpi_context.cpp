#include "batch/mpi_context.hpp"

#include <chrono>
#include <cstdlib>
#include <thread>
#include <stdexcept>

#ifdef TEZIP_HAVE_MPI
#include <mpi.h>
#endif

namespace tezip {
namespace {

// Set by Open MPI's mpirun, by PMIx/PMI launchers (srun) and by MPICH's hydra. Without one of them
// MPI_Init would start a singleton job, which is slow and pointless for a job of one.
bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(name)) return true;
  return false;
}

}  // namespace

#ifdef TEZIP_HAVE_MPI

MpiContext::MpiContext() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized || !launched_by_mpi()) return;
  if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS) throw std::runtime_error("MPI_Init failed");
  active_ = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
  MPI_Comm_size(node, &local_size_);
  MPI_Comm_free(&node);
}

MpiContext::~MpiContext() {
  if (active_) MPI_Finalize();
}

bool MpiContext::all_ok(bool ok) const {
  if (!active_) return ok;
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

bool MpiContext::root_ok(bool ok) const {
  if (!active_) return ok;
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

std::vector<double> MpiContext::gather(std::span<const double> values) const {
  if (!active_) return {values.begin(), values.end()};
  std::vector<double> out(rank_ == 0 ? values.size() * std::size_t(size_) : 0);
  MPI_Gather(values.data(), int(values.size()), MPI_DOUBLE, out.data(), int(values.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return out;
}

#else

// Without MPI the launcher's variables still say which share of the work is this process's; the
// ranks then coordinate through the files they write, like Slurm array tasks.
MpiContext::MpiContext() {
  if (!launched_by_mpi()) return;
  auto number = [](const char* a, const char* b) -> int {
    const char* v = std::getenv(a) ? std::getenv(a) : std::getenv(b);
    return v ? std::atoi(v) : -1;
  };
  const int rank = number("OMPI_COMM_WORLD_RANK", "PMI_RANK"), size = number("OMPI_COMM_WORLD_SIZE", "PMI_SIZE");
  const int local = number("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS");
  if (size < 1 || rank < 0 || rank >= size) return;
  rank_ = rank, size_ = size, local_size_ = local > 0 ? local : 1;
}
MpiContext::~MpiContext() = default;
bool MpiContext::all_ok(bool ok) const { return ok; }
bool MpiContext::root_ok(bool ok) const { return ok; }
std::vector<double> MpiContext::gather(std::span<const double> values) const { return {values.begin(), values.end()}; }

#endif

}  // namespace tezip
