#include "backend/cpu/vec_ops.h"

namespace th::cpu {

const VecOps& vec_ops(Isa isa) {
  return isa == Isa::Generic ? generic_vec_ops() : isa == Isa::Avx512 ? avx512_vec_ops() : avx2_vec_ops();
}

}  // namespace th::cpu
