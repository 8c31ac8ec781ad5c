#include "batch/mpi_context.hpp"

#include <cstdlib>

#include "loader/exchange.hpp"
#include "loader/mpi/module_table.hpp"

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

// Under an MPI launcher, with MPI in the build, the MPI module joins the job (loaded only then: a
// process that is not a rank never maps Open MPI). Without MPI the launcher's variables still say
// which share of the work is this process's; the ranks then coordinate through the files they
// write, like Slurm array tasks.
MpiContext::MpiContext() {
  if (!launched_by_mpi()) return;
  if (built_with_mpi()) {
    active_ = mpi_module("a batch job under an MPI launcher").join_world(rank_, size_, local_size_);
    return;
  }
  auto number = [](const char* a, const char* b) -> int {
    const char* v = std::getenv(a) ? std::getenv(a) : std::getenv(b);
    return v ? std::atoi(v) : -1;
  };
  const int rank = number("OMPI_COMM_WORLD_RANK", "PMI_RANK"), size = number("OMPI_COMM_WORLD_SIZE", "PMI_SIZE");
  const int local = number("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS");
  if (size < 1 || rank < 0 || rank >= size) return;
  rank_ = rank, size_ = size, local_size_ = local > 0 ? local : 1;
}

MpiContext::~MpiContext() {
  if (active_) mpi_module("leaving the MPI job").leave_world();
}

bool MpiContext::all_ok(bool ok) const { return active_ ? mpi_module("an MPI batch job").world_all_ok(ok) : ok; }

bool MpiContext::root_ok(bool ok) const { return active_ ? mpi_module("an MPI batch job").world_root_ok(ok) : ok; }

std::vector<double> MpiContext::gather(std::span<const double> values) const {
  if (!active_) return {values.begin(), values.end()};
  return mpi_module("an MPI batch job").world_gather(values, rank_, size_);
}

}  // namespace tezip
