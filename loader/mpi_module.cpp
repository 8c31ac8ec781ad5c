// The core's side of the MPI module (loader/mpi/module_table.hpp): finds and loads libtezip_mpi.so
// the first time a process needs MPI (a batch job under mpirun or srun, a chunk exchange).
#include <stdexcept>
#include <string>

#include "loader/mpi/module_table.hpp"
#include "predictor/shared_module.hpp"

namespace tezip {
namespace {

struct LoadResult {
  const MpiModule* module = nullptr;
  std::string error;
};

LoadResult load() {
  LoadResult result;
#ifdef TEZIP_HAVE_MPI
  // RTLD_GLOBAL, as when libtezip linked MPI and as mpi4py loads it: an MPI library may dlopen its
  // own plugins, which then look for its symbols in the global namespace.
  result.module = static_cast<const MpiModule*>(load_shared_module(
      "libtezip_mpi.so", "TEZIP_MPI_MODULE", TEZIP_MPI_MODULE_ENTRY, TEZIP_MPI_MODULE_ABI, "MPI", result.error, true));
#else
  result.error = "tezip was built without MPI: rebuild with an MPI library (Debian: libopenmpi-dev) and -DTEZIP_MPI=ON";
#endif
  return result;
}

}  // namespace

const MpiModule& mpi_module(const std::string& purpose) {
  static const LoadResult result = load();  // once, thread-safe
  if (result.module == nullptr) throw std::runtime_error(purpose + " needs MPI: " + result.error);
  return *result.module;
}

}  // namespace tezip
