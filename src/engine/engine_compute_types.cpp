// Alternating compute types (EngineConfig::alternate_compute_types): each step plans the
// sequences of one compute type only, the next type with work after the last step's, round
// robin, so a step reads one weight copy. The default runs every type in each step, one
// forward pass per type (Engine::run_batch); BENCHMARKS.md ("Mixed compute types: grouped or
// alternating steps") has the measurement that chose it.
#include <algorithm>

#include "engine/engine.h"

namespace th {

// Keeps in `st` the sequences of this step's type; false (st unchanged) with one type or none.
// Running sequences of the other types keep their blocks and their places: they count against
// max_seqs, and while they fill it only types with a running sequence take a turn (a type of
// waiting sequences alone could admit none).
bool Engine::keep_one_compute_type(SchedulerState& st) {
  std::vector<ComputeType> types, running_types;
  int64_t running = 0;
  for (const SeqSummary& x : st.seqs) {
    const ComputeType t = seqs_.at(static_cast<uint64_t>(x.id))->request.compute_type;
    if (std::find(types.begin(), types.end(), t) == types.end()) types.push_back(t);
    if (x.phase != SeqPhase::Running) continue;
    ++running;
    if (std::find(running_types.begin(), running_types.end(), t) == running_types.end()) running_types.push_back(t);
  }
  std::vector<ComputeType>& turn = running >= st.max_seqs ? running_types : types;
  if (types.size() < 2 || turn.empty()) return false;
  std::sort(turn.begin(), turn.end());
  const auto next = std::upper_bound(turn.begin(), turn.end(), last_step_type_);
  const ComputeType type = next == turn.end() ? turn.front() : *next;
  last_step_type_ = type;

  int64_t others_running = 0;
  std::erase_if(st.seqs, [&](const SeqSummary& x) {
    if (seqs_.at(static_cast<uint64_t>(x.id))->request.compute_type == type) return false;
    if (x.phase == SeqPhase::Running) ++others_running;
    return true;
  });
  st.max_seqs = std::max<int64_t>(1, st.max_seqs - others_running);
  return true;
}

}  // namespace th
