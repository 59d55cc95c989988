#include "tensor/dtype.h"

namespace th {

namespace {
constexpr DTypeInfo kTypes[] = {
    {DType::F32, "f32", 1, 4, true},       {DType::F16, "f16", 1, 2, true},
    {DType::Q4_0, "q4_0", 32, 18, true},   {DType::Q4_1, "q4_1", 32, 20, true},
    {DType::Q5_0, "q5_0", 32, 22, true},   {DType::Q5_1, "q5_1", 32, 24, true},
    {DType::Q8_0, "q8_0", 32, 34, true},   {DType::Q8_1, "q8_1", 32, 36, false},
    {DType::Q2_K, "q2_K", 256, 84, true},  {DType::Q3_K, "q3_K", 256, 110, true},
    {DType::Q4_K, "q4_K", 256, 144, true}, {DType::Q5_K, "q5_K", 256, 176, true},
    {DType::Q6_K, "q6_K", 256, 210, true}, {DType::Q8_K, "q8_K", 256, 292, false},
    {DType::IQ4_NL, "iq4_nl", 32, 18, true}, {DType::IQ4_XS, "iq4_xs", 256, 136, true},
    {DType::I8, "i8", 1, 1, false},        {DType::I16, "i16", 1, 2, false},
    {DType::I32, "i32", 1, 4, false},      {DType::I64, "i64", 1, 8, false},
    {DType::F64, "f64", 1, 8, false},      {DType::BF16, "bf16", 1, 2, true},
};
}  // namespace

const DTypeInfo* dtype_info(uint32_t raw_type) {
  for (const DTypeInfo& i : kTypes)
    if (static_cast<uint32_t>(i.type) == raw_type) return &i;
  return nullptr;
}

}  // namespace th
