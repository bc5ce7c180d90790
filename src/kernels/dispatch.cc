// Run-time choice of the instruction-set path, and the public entry points
// that only forward to the active path's table.
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "core/logging.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"

namespace mx::kernels {
namespace {

#if defined(__x86_64__) || defined(__i386__)
// F16C (CPUID.1:ECX bit 29); not every compiler's __builtin_cpu_supports knows it.
bool HasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (ecx & (1u << 29)) != 0;
}

// AVX512_BF16 (CPUID.(7,1):EAX bit 5), AMX-BF16 and AMX-TILE (CPUID.(7,0):EDX
// bits 22, 24), and Linux's permission to use the tile data state, asked for
// once (ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA; refused by kernels older
// than 5.16 and where the OS does not enable AMX).
bool HasAmxBf16() {
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
    if ((edx & (1u << 22)) == 0 || (edx & (1u << 24)) == 0) return false;
    if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) == 0 || (eax & (1u << 5)) == 0)
      return false;
#if defined(__linux__) && defined(__x86_64__)
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
  }();
  return has;
}
#endif

bool CpuHas(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return true;
#if defined(__x86_64__) || defined(__i386__)
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && HasF16c();
    case Isa::kAvx512:
      return CpuHas(Isa::kAvx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni");
    case Isa::kAmx:
      return CpuHas(Isa::kAvx512) && HasAmxBf16();
#else
    default:
      return false;
#endif
  }
  return false;
}

const internal::IsaOps& TableFor(Isa isa) {
  switch (isa) {
    case Isa::kAmx:
      return internal::AmxOps();
    case Isa::kAvx512:
      return internal::Avx512Ops();
    case Isa::kAvx2:
      return internal::Avx2Ops();
    case Isa::kScalar:
      break;
  }
  return internal::ScalarOps();
}

Isa BestIsa() {
  if (CpuHas(Isa::kAmx)) return Isa::kAmx;
  if (CpuHas(Isa::kAvx512)) return Isa::kAvx512;
  if (CpuHas(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kScalar;
}

// The environment is read once, on the first kernel call (kernels.h).
Isa InitialIsa() {
  const char* env = std::getenv("MATRICXON_KERNELS");
  const std::string_view setting = env != nullptr ? env : "";
  const Isa isa = IsaForSetting(setting);
  if (!setting.empty() && setting != IsaName(isa)) {
    MX_LOG(kWarn) << "MATRICXON_KERNELS=" << setting
                  << " is not an available path (scalar|avx2|avx512|amx "
                  << "the CPU supports); using " << IsaName(isa);
  }
  return isa;
}

std::atomic<const internal::IsaOps*> g_ops{nullptr};
std::once_flag g_init_once;

}  // namespace

namespace internal {
const IsaOps& Ops() {
  const IsaOps* ops = g_ops.load(std::memory_order_acquire);
  if (ops != nullptr) return *ops;
  std::call_once(g_init_once, [] {
    const IsaOps* expected = nullptr;
    g_ops.compare_exchange_strong(expected, &TableFor(InitialIsa()));
  });
  return *g_ops.load(std::memory_order_acquire);
}
}  // namespace internal

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAmx:
      return "amx";
  }
  return "unknown";
}

bool IsaFromName(std::string_view name, Isa* isa) {
  for (Isa i : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAmx}) {
    if (name == IsaName(i)) {
      *isa = i;
      return true;
    }
  }
  return false;
}

Isa IsaForSetting(std::string_view setting) {
  Isa wanted;
  if (IsaFromName(setting, &wanted) && CpuHas(wanted)) return wanted;
  return BestIsa();
}

std::vector<Isa> AvailableIsas() {
  std::vector<Isa> out;
  for (Isa i : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAmx}) {
    if (CpuHas(i)) out.push_back(i);
  }
  return out;
}

Isa ActiveIsa() { return internal::Ops().isa; }

bool SetActiveIsa(Isa isa) {
  if (!CpuHas(isa)) return false;
  internal::Ops();  // settle the initial choice first so it cannot overwrite this one
  g_ops.store(&TableFor(isa), std::memory_order_release);
  return true;
}

// ------------------------------------------------------------ entry points

bool WeightTypeSupported(DType type) { return internal::DequantizeSupportedRef(type); }

bool Bf16ActivationsRounded() { return internal::Ops().bgemm != nullptr; }

size_t FastRowAlignment(DType type) {
  return type == DType::kBF16 && Bf16ActivationsRounded() ? 64 : 1;
}
bool QuantizeSupported(DType type) { return internal::QuantizeSupportedRef(type); }

void DequantizeRow(DType type, const uint8_t* src, float* dst, int64_t n) {
  if (internal::Ops().dequant_row(type, src, dst, n)) return;
  internal::DequantizeRowRef(type, src, dst, n);
}

void QuantizeRow(DType type, const float* src, uint8_t* dst, int64_t n) {
  internal::QuantizeRowRef(type, src, dst, n);
}

void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* out) {
  const internal::IsaOps& ops = internal::Ops();
  // As ggml: f32 squares summed in double, mean rounded to f32.
  const double sum = ops.sum_squares(x, n);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  ops.scale_mul(x, w, scale, n, out);
}

void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  internal::Ops().swiglu(gate, up, n, out);
}

void Silu(float* x, int64_t n) { internal::Ops().silu(x, n); }

double LogSumExp(const float* x, int64_t n) {
  const internal::IsaOps& ops = internal::Ops();
  const float max = ops.max_value(x, n);
  if (std::isinf(max)) return max;  // nothing above -inf, or +inf dominates
  return max + std::log(ops.sum_exp(x, n, max));
}

void DeltaRule(float* s, const float* k, const float* v, const float* q, float decay, float beta,
               int64_t d_k, int64_t d_v, float* delta, float* out) {
  internal::Ops().delta_rule(s, k, v, q, decay, beta, d_k, d_v, delta, out);
}

void AttentionRow(const float* q, int n_head, const KvView& kv, int64_t n_pos, float scale,
                  float* out, float* scratch) {
  const int64_t hd = kv.head_dim;
  internal::Ops().attention_rows(q, n_head * hd, 1, n_head, kv, &n_pos, scale, out, n_head * hd,
                                 scratch);
}

void AttentionRows(const float* q, int64_t ldq, int64_t n_q, int n_head, const KvView& kv,
                   const int64_t* n_pos, float scale, float* out, int64_t ldo, float* scratch) {
  internal::Ops().attention_rows(q, ldq, n_q, n_head, kv, n_pos, scale, out, ldo, scratch);
}

bool AttentionSplitAvailable(int64_t n_q, int n_head, const KvView& kv) {
  return internal::Ops().attention_scores != nullptr &&
         internal::AttentionSplitFits(n_q, n_head, kv);
}

void AttentionScores(const float* q, int64_t ldq, int64_t n_q, int n_head, const KvView& kv,
                     const int64_t* n_pos, int64_t p0, int64_t p1, float scale, float* s,
                     int64_t lds) {
  internal::Ops().attention_scores(q, ldq, n_q, n_head, kv, n_pos, p0, p1, scale, s, lds);
}

void AttentionFromScores(int64_t n_q, int n_head, const KvView& kv, const int64_t* n_pos, int kv0,
                         int kv1, float* s, int64_t lds, float* out, int64_t ldo) {
  internal::Ops().attention_from_scores(n_q, n_head, kv, n_pos, kv0, kv1, s, lds, out, ldo);
}

bool KvTypeSupported(DType type) {
  return type == DType::kF16 || type == DType::kF32 || type == DType::kQ8_0 || type == DType::kQ4_0;
}

size_t KvHeadBytes(DType type, int64_t head_dim) {
  return KvTypeSupported(type) ? RowBytes(type, head_dim) : 0;
}

void StoreKvRow(DType type, const float* src, int64_t n, uint8_t* dst) {
  switch (type) {
    case DType::kF16:
      internal::Ops().f32_to_f16(src, n, reinterpret_cast<uint16_t*>(dst));
      return;
    case DType::kQ8_0:
    case DType::kQ4_0:
      // One scalar quantizer for every path: a row is a few hundred values
      // per layer and token, and the bytes must not depend on the path.
      internal::QuantizeKvRowRef(type, src, dst, n);
      return;
    default:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
  }
}

void LoadKvRow(DType type, const uint8_t* src, int64_t n, float* dst) {
  switch (type) {
    case DType::kF16:
      internal::Ops().f16_to_f32(reinterpret_cast<const uint16_t*>(src), n, dst);
      return;
    case DType::kQ8_0:
    case DType::kQ4_0:
      DequantizeRow(type, src, dst, n);
      return;
    default:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
  }
}

}  // namespace mx::kernels
