// Built instead of mpi_communicator.cpp when CMake found no MPI (or TH_MPI is off).
#include "parallel/all_reduce_algorithm.h"
#include "parallel/communicator.h"

namespace th {

bool mpi_available() { return false; }

void set_mpi_all_reduce_algorithm(AllReduceAlgorithm) {}  // no MPI communicator to run it

Result<std::unique_ptr<Communicator>> make_mpi_communicator() {
  return Status::error(
      "tensor parallelism needs MPI, and this tokenhive was built without it (install libopenmpi-dev and "
      "rebuild: CMake's TH_MPI)");
}

}  // namespace th
