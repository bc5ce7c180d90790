// AVX2 kernels of the low-bit types' integer path (lowbit_sweep.h): 256-bit
// vpmaddubsw / vpmaddwd products, the scalar reference's bits.
#include "kernels/isa.h"
#include "kernels/lowbit_sweep.h"

namespace mx::kernels::internal {

void LowbitQGemmAvx2(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows,
                     int64_t n_blocks, const Q8KBlock* a, int64_t lda, int64_t n_tokens, float* y,
                     int64_t ldy) {
  LowbitQGemm<LowbitPrep256Avx2>(type, w, row_bytes, n_rows, n_blocks, a, lda, n_tokens, y, ldy);
}

void LowbitQGemm32Avx2(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows,
                       int64_t n_blocks, const Q8Block32* a, int64_t lda, int64_t n_tokens,
                       float* y, int64_t ldy) {
  LowbitQGemm32(type, w, row_bytes, n_rows, n_blocks, a, lda, n_tokens, y, ldy);
}

}  // namespace mx::kernels::internal
