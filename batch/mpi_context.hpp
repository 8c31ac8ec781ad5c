#pragma once
#include <span>
#include <vector>

namespace tezip {

// This process's place in an MPI job, or a job of one when no MPI launcher (mpirun, srun) started it.
// Built without MPI, the launcher's variables still give rank and size, but active() is false: there
// are no collectives, and the ranks coordinate through files. The MPI calls are in the MPI module
// (loader/mpi/module_table.hpp), loaded only by a process that an MPI launcher started.
class MpiContext {
 public:
  // Joins the MPI job when one launched this process; otherwise a job of one.
  MpiContext();
  ~MpiContext();  // leaves the MPI job
  MpiContext(const MpiContext&) = delete;
  MpiContext& operator=(const MpiContext&) = delete;

  // True when joined to an MPI job: all_ok() and gather() then communicate.
  bool active() const { return active_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  // Ranks on this node, to share its cores among them.
  int local_size() const { return local_size_; }
  // True on every rank when `ok` is true on every rank; also a barrier.
  bool all_ok(bool ok) const;
  // Rank 0's `ok` on every rank (the others' is ignored); also a barrier. The ranks that wait sleep
  // between tests instead of spinning, so that rank 0 keeps the node's cores for what it does first
  // (a batch job's PredNet adaptation).
  bool root_ok(bool ok) const;
  // Rank 0 gets every rank's `values` (the same count on each), rank by rank; other ranks get {}.
  std::vector<double> gather(std::span<const double> values) const;

 private:
  bool active_ = false;
  int rank_ = 0, size_ = 1, local_size_ = 1;
};

}  // namespace tezip
