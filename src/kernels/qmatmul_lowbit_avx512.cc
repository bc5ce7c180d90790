// AVX-512 kernels of the low-bit types' integer path (lowbit_sweep.h): a
// kind-256 block in four 512-bit vectors (vpmaddubsw of |q| with the
// activations negated where q < 0, vpmaddwd with the group scales); the
// kind-32 types use the 256-bit products. The scalar reference's bits.
#include "kernels/isa.h"
#include "kernels/lowbit_sweep.h"

namespace mx::kernels::internal {
namespace {

struct LowbitPrep256Avx512 {
  __m512i absq[4], sc[4];
  __mmask64 neg[4];
  __m256i mn;
  explicit LowbitPrep256Avx512(const Lowbit256& b) {
    const __m512i scales = _mm512_castsi256_si512(LowbitLoad32(b.sc));
    const __m512i lane = _mm512_setr_epi64(
        0x0003000200010000LL, 0x0007000600050004LL, 0x000B000A00090008LL, 0x000F000E000D000CLL,
        0x0013001200110010LL, 0x0017001600150014LL, 0x001B001A00190018LL, 0x001F001E001D001CLL);
    for (int v = 0; v < 4; ++v) {
      const __m512i q = _mm512_loadu_si512(b.q + 64 * v);
      absq[v] = _mm512_abs_epi8(q);
      neg[v] = _mm512_movepi8_mask(q);
      // int16 lane j pairs values 2j, 2j + 1 of group 4v + j / 8.
      sc[v] =
          _mm512_permutexvar_epi16(_mm512_add_epi16(_mm512_srli_epi16(lane, 3),
                                                    _mm512_set1_epi16(static_cast<short>(4 * v))),
                                   scales);
    }
    mn = LowbitLoad32(b.mn);
  }
  template <bool kHasMin>
  void Sums(const Q8KBlock& x, int32_t* s, int32_t* m) const {
    const __m512i zero = _mm512_setzero_si512();
    __m512i sum = zero;
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      const __m512i xa = _mm512_loadu_si512(x.q + 64 * v);
      const __m512i signed_x = _mm512_mask_sub_epi8(xa, neg[v], zero, xa);
      sum =
          _mm512_add_epi32(sum, _mm512_madd_epi16(_mm512_maddubs_epi16(absq[v], signed_x), sc[v]));
    }
    *s = _mm512_reduce_add_epi32(sum);
    *m = kHasMin ? LowbitSumLanes(_mm256_madd_epi16(mn, LowbitLoad32(x.bsums))) : 0;
  }
};

}  // namespace

void LowbitQGemmAvx512(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows,
                       int64_t n_blocks, const Q8KBlock* a, int64_t lda, int64_t n_tokens, float* y,
                       int64_t ldy) {
  LowbitQGemm<LowbitPrep256Avx512>(type, w, row_bytes, n_rows, n_blocks, a, lda, n_tokens, y, ldy);
}

void LowbitQGemm32Avx512(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows,
                         int64_t n_blocks, const Q8Block32* a, int64_t lda, int64_t n_tokens,
                         float* y, int64_t ldy) {
  LowbitQGemm32(type, w, row_bytes, n_rows, n_blocks, a, lda, n_tokens, y, ldy);
}

}  // namespace mx::kernels::internal
