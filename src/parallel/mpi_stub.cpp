// Built instead of mpi_communicator.cpp when CMake found no MPI (or TH_MPI is off).
#include "parallel/communicator.h"

namespace th {

bool mpi_available() { return false; }

Result<std::unique_ptr<Communicator>> make_mpi_communicator() {
  return Status::error(
      "tensor parallelism needs MPI, and this tokenhive was built without it (install libopenmpi-dev and "
      "rebuild: CMake's TH_MPI)");
}

}  // namespace th
