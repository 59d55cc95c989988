// How the MPI communicator's all_reduce_sum moves the data: the MPI library's own
// MPI_Allreduce; our ring over point-to-point messages (reduce-scatter then all-gather:
// 2(N-1) messages of 1/N of the data each, one after another); or recursive doubling (log2 N
// exchanges of the whole buffer with rank r XOR 2^k: at N = 2 one message each way, at once).
// Process-wide, as the MPI communicator is (one per process); every rank must choose the
// same. Not in communicator.h: only `bench comm` and start-up ($TOKENHIVE_ALLREDUCE) choose.
//
// Default: MPI_Allreduce. Measured at N = 2 between two network namespaces (BENCHMARKS.md,
// "Over a shaped link"): for the 1.1B shape's 8 KiB, Open MPI 4.1's MPI_Allreduce is one
// exchange as our doubling is (33.5 and 34.2 us a call, the ring 61.2), and no faster one
// stood out of the noise of a loaded machine; $TOKENHIVE_ALLREDUCE chooses another.
#pragma once

#include <optional>
#include <string_view>

namespace th {

enum class AllReduceAlgorithm { Library, Ring, Doubling };

/// @brief The algorithm later all-reduces of the MPI communicator use (default: Library).
/// Doubling where the rank count is not a power of two runs MPI_Allreduce.
void set_mpi_all_reduce_algorithm(AllReduceAlgorithm algorithm);

/// @brief "mpi", "ring" or "doubling" (what $TOKENHIVE_ALLREDUCE and `bench comm` take).
inline std::optional<AllReduceAlgorithm> parse_all_reduce_algorithm(std::string_view name) {
  if (name == "mpi") return AllReduceAlgorithm::Library;
  if (name == "ring") return AllReduceAlgorithm::Ring;
  if (name == "doubling") return AllReduceAlgorithm::Doubling;
  return std::nullopt;
}

}  // namespace th
