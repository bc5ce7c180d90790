// Internal: ggml's lookup tables of the IQ and FP4 weight types (data from
// llama.cpp ggml/src/ggml-common.h, MIT licence; lowbit_tables*.cc). A
// uint64_t grid entry is 8 values, its little-endian bytes (byte j = value
// j); a uint32_t entry 4 values. Plain data: safe to read from every path.
#pragma once

#include <cstdint>

namespace mx::kernels::internal {

// 7-bit sign index -> 8 sign bits (bit 7 = parity, so every 8 values have an
// even number of minus signs). IQ2_XXS, IQ2_XS, IQ3_XXS.
extern const uint8_t kSignsIq2xs[128];
extern const uint64_t kIq2xxsGrid[256];  // IQ2_XXS: values 8, 25, 43
extern const uint64_t kIq2xsGrid[512];   // IQ2_XS: values 8, 25, 43
extern const uint64_t kIq2sGrid[1024];   // IQ2_S: values 8, 25, 43
extern const uint32_t kIq3xxsGrid[256];  // IQ3_XXS: values 4, 12, ..., 62
extern const uint32_t kIq3sGrid[512];    // IQ3_S: values 1, 3, ..., 15
extern const uint64_t kIq1sGrid[2048];   // IQ1_S, IQ1_M: bytes are int8 -1, 0, +1
extern const int8_t kValuesIq4nl[16];    // IQ4_NL, IQ4_XS
extern const int8_t kValuesFp4[16];      // MXFP4, NVFP4: E2M1 values doubled

}  // namespace mx::kernels::internal
