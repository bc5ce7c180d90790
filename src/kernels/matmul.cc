// MatMul driver: splits the output into (row block x token block) tasks for
// the thread pool and feeds each block to the active path's gemm, either on
// the weights as stored (converted in registers by fused kernels; up to the
// path's direct_max_tokens for the type) or on a row panel converted to f32
// first (the conversion then amortised over the block's tokens). Quantized
// weights take the integer path instead: their inputs are quantized once per
// call (Q8K blocks for K-quants, Q8Block32 for the 32-value types; shared by
// every job with the same input), then qgemm / qgemm32 run on the stored
// weights for any token count; BF16 weights on a path with a tile unit do
// the same with bf16-packed inputs (pack_bf16, bgemm). MatMuls runs several
// products' tasks in one parallel region. How the work is split only affects
// speed: every output element has one fixed reduction order on a path
// (isa.h GemmFn, qdot_blocks.h).
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/isa.h"
#include "kernels/kernels.h"

namespace mx::kernels {
namespace {

constexpr int64_t kTokenBlock = 96;          // tokens per task above the decode sizes
constexpr int64_t kIntTokenBlock = 512;      // the same for the integer path
constexpr int64_t kMaxRowBlock = 64;         // rows per task at most
constexpr int64_t kRowAlign = 8;             // row blocks are multiples of this
constexpr int64_t kIntRowAlign = 32;         // integer prompts: pairs of 16-row panels
constexpr int64_t kIntPanelTokens = 12;      // = qroute_avx512.h kPanelMinTokens: panels from here
constexpr int64_t kBf16RowAlign = 32;        // bf16 tile products: pairs of 16-row tiles
constexpr int64_t kPanelBytes = 512 * 1024;  // f32 panel per task at most (stays in L2)
constexpr int64_t kTasksPerThread = 8;       // enough tasks for stealing to even out the ends

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A per-thread f32 panel, 64-byte aligned, grown on demand and kept.
float* PanelBuffer(size_t n_floats) {
  thread_local std::unique_ptr<float[]> storage;
  thread_local size_t capacity = 0;
  if (capacity < n_floats + 16) {
    capacity = n_floats + 16;
    storage.reset(new float[capacity]);
  }
  uintptr_t p = reinterpret_cast<uintptr_t>(storage.get());
  p = (p + 63) & ~static_cast<uintptr_t>(63);
  return reinterpret_cast<float*>(p);
}

// How a weight type's MatMul reads its input: f32, quantized per token to
// Q8K blocks (K-quants, isa.h QGemmFn) or Q8Block32 blocks (the 32-value
// block types, QGemm32Fn), or packed to bf16 (BF16 on a tile-unit path).
enum class Act { kF32 = 0, kQ8K = 1, kQ8_32 = 2, kBf16 = 3 };
Act ActFor(const internal::IsaOps& ops, DType type) {
  switch (type) {
    case DType::kBF16:
      return ops.bgemm != nullptr ? Act::kBf16 : Act::kF32;
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kTQ1_0:
    case DType::kTQ2_0:
    case DType::kIQ2_XXS:
    case DType::kIQ2_XS:
    case DType::kIQ2_S:
    case DType::kIQ3_XXS:
    case DType::kIQ3_S:
    case DType::kIQ1_S:
    case DType::kIQ1_M:
    case DType::kIQ4_XS:
      return Act::kQ8K;
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kIQ4_NL:
    case DType::kMXFP4:
    case DType::kNVFP4:
    case DType::kQ1_0:
    case DType::kQ2_0:
      return Act::kQ8_32;
    default:
      return Act::kF32;
  }
}
// Input columns per block (kBf16: per Bf16Chunk, of a group of tokens).
int64_t ActBlockValues(Act act) {
  switch (act) {
    case Act::kQ8K:
      return internal::kQ8KValues;
    case Act::kBf16:
      return internal::kBf16ChunkValues;
    default:
      return internal::kQ8Block32Values;
  }
}
// Blocks of one token (kBf16: of one group of tokens, the last one padded)
// over n_cols columns.
int64_t ActBlocks(Act act, int64_t n_cols) {
  return act == Act::kBf16 ? CeilDiv(n_cols, ActBlockValues(act)) : n_cols / ActBlockValues(act);
}

// The calling thread's activation buffers, grown on demand and kept.
template <class Block>
Block* ActBuffer(size_t n_blocks) {
  thread_local std::vector<Block> storage;
  if (storage.size() < n_blocks) storage.resize(n_blocks);
  return storage.data();
}

// Quantizing fewer values than this many 32s runs on the caller (decode sizes).
constexpr int64_t kQuantizeInline32s = 512;
constexpr int64_t kQuantizeTokens = 16;  // tokens per quantization task
static_assert(kQuantizeTokens % internal::kBf16GroupTokens == 0 &&
                  kTokenBlock % internal::kBf16GroupTokens == 0,
              "bf16 packing and tasks start at whole token groups");
constexpr size_t kMaxGatherRowBytes = 0x7FFFFFFF / 16;

}  // namespace

namespace {

// How one product is cut into (row block x token block) tasks.
struct Split {
  bool try_direct;
  Act act;
  const void* qx;  // quantized / packed activations (Q8KBlock, Q8Block32, Bf16Chunk), or null
  int64_t token_block, n_token_blocks;
  int64_t row_block, n_row_blocks;
  int64_t panel_stride;  // floats per panel row
  int64_t n_tasks() const { return n_row_blocks * n_token_blocks; }
};

// n_jobs: the products sharing the parallel region; the tasks per thread are
// counted over all of them (many small products, e.g. the experts of one
// step, get few tasks each instead of a thread's worth each).
Split PlanSplit(const internal::IsaOps& ops, const MatMulJob& j, int n_threads, int64_t n_jobs) {
  Split s;
  const int64_t n_rows = j.w.n_rows, n_cols = j.w.n_cols;
  // Few tokens: stream the stored rows once (converting in registers). Many
  // tokens: convert each row block into a 64-byte aligned f32 panel that every
  // token tile of the task reuses from L2; which is faster depends on the type.
  // (The integer path always reads the stored weights: no f32 panels.)
  s.act = ActFor(ops, j.w.type);
  s.try_direct = s.act != Act::kF32 || j.n_tokens <= ops.direct_max_tokens(j.w.type);
  s.qx = nullptr;
  // Token blocks: all tokens for decode-sized calls, else kTokenBlock each;
  // the integer path packs each row block into panels once per task, so its
  // tasks take up to kIntTokenBlock tokens (their activations stay in L2).
  const int64_t token_block =
      s.act == Act::kF32 || s.act == Act::kBf16 ? kTokenBlock : kIntTokenBlock;
  s.token_block = j.n_tokens <= token_block ? j.n_tokens : token_block;
  s.n_token_blocks = CeilDiv(j.n_tokens, s.token_block);
  // Row blocks: enough tasks for every thread, bounded by the panel size.
  s.panel_stride = (n_cols + 15) / 16 * 16;
  const int64_t want_row_blocks =
      std::max<int64_t>(1, CeilDiv(kTasksPerThread * n_threads, s.n_token_blocks * n_jobs));
  int64_t align = kRowAlign;
  if (s.act == Act::kBf16) align = kBf16RowAlign;
  if ((s.act == Act::kQ8K || s.act == Act::kQ8_32) && j.n_tokens >= kIntPanelTokens)
    align = kIntRowAlign;
  int64_t row_block = CeilDiv(CeilDiv(n_rows, want_row_blocks), align) * align;
  int64_t max_rows = kMaxRowBlock;
  if (!s.try_direct) {
    max_rows =
        std::max<int64_t>(kRowAlign, kPanelBytes / (s.panel_stride * 4) / kRowAlign * kRowAlign);
  }
  s.row_block = std::clamp<int64_t>(row_block, kRowAlign,
                                    std::max<int64_t>(kRowAlign, std::min(max_rows, kMaxRowBlock)));
  s.n_row_blocks = CeilDiv(n_rows, s.row_block);
  return s;
}

// Every job's tasks in one list: job i owns tasks [first[i], first[i + 1]).
struct Planned {
  const MatMulJob* job;
  Split split;
  int64_t first;
};

// Quantizes the inputs of the integer-path jobs, once per distinct input and
// block kind (Q, K and V of a layer share one), and points their splits at
// them. Long inputs are quantized by the pool, token ranges per task.
void QuantizeInputs(const internal::IsaOps& ops, Planned* planned, size_t n_planned,
                    ThreadPool* pool) {
  struct Input {
    const float* x;
    int64_t ldx, n_tokens, n_cols, n_blocks;
    Act act;
    size_t offset;  // first block in the kind's buffer
  };
  Input inputs[kMaxMatMulJobs];
  size_t n_inputs = 0, total[4] = {0, 0, 0, 0}, which[kMaxMatMulJobs];
  for (size_t i = 0; i < n_planned; ++i) {
    const MatMulJob& j = *planned[i].job;
    const Act act = planned[i].split.act;
    if (act == Act::kF32) continue;
    const int64_t n_blocks = ActBlocks(act, j.w.n_cols);
    size_t k = 0;
    while (k < n_inputs &&
           !(inputs[k].x == j.x && inputs[k].ldx == j.ldx && inputs[k].n_tokens == j.n_tokens &&
             inputs[k].n_cols == j.w.n_cols && inputs[k].act == act))
      ++k;
    if (k == n_inputs) {
      const int a = static_cast<int>(act);
      inputs[n_inputs++] = {j.x, j.ldx, j.n_tokens, j.w.n_cols, n_blocks, act, total[a]};
      const int64_t units =
          act == Act::kBf16 ? CeilDiv(j.n_tokens, internal::kBf16GroupTokens) : j.n_tokens;
      total[a] += static_cast<size_t>(units * n_blocks);
    }
    which[i] = k;
  }
  if (n_inputs == 0) return;
  internal::Q8KBlock* q8k = ActBuffer<internal::Q8KBlock>(total[1]);
  internal::Q8Block32* q8_32 = ActBuffer<internal::Q8Block32>(total[2]);
  internal::Bf16Chunk* bf16 = ActBuffer<internal::Bf16Chunk>(total[3]);
  auto base = [&](const Input& in) -> void* {
    switch (in.act) {
      case Act::kQ8K:
        return q8k + in.offset;
      case Act::kBf16:
        return bf16 + in.offset;
      default:
        return q8_32 + in.offset;
    }
  };
  for (size_t i = 0; i < n_planned; ++i) {
    if (planned[i].split.act != Act::kF32) planned[i].split.qx = base(inputs[which[i]]);
  }
  // Work items: (input, token range) of up to kQuantizeTokens tokens.
  int64_t first[kMaxMatMulJobs + 1] = {0};
  for (size_t k = 0; k < n_inputs; ++k)
    first[k + 1] = first[k] + CeilDiv(inputs[k].n_tokens, kQuantizeTokens);
  auto quantize = [&](int64_t item, int /*thread*/) {
    size_t k = 0;
    while (item >= first[k + 1]) ++k;
    const Input& in = inputs[k];
    const int64_t t0 = (item - first[k]) * kQuantizeTokens;
    const int64_t t1 = std::min(in.n_tokens, t0 + kQuantizeTokens);
    if (in.act == Act::kBf16) {
      const int64_t group = t0 / internal::kBf16GroupTokens;
      ops.pack_bf16(in.x + t0 * in.ldx, in.ldx, t1 - t0, in.n_cols,
                    bf16[in.offset + static_cast<size_t>(group * in.n_blocks)].v);
      return;
    }
    const int64_t n = in.n_blocks * ActBlockValues(in.act);
    for (int64_t t = t0; t < t1; ++t) {
      if (in.act == Act::kQ8K) {
        ops.quantize_q8k(in.x + t * in.ldx, n, q8k + in.offset + t * in.n_blocks);
      } else {
        ops.quantize_q8_32(in.x + t * in.ldx, n, q8_32 + in.offset + t * in.n_blocks);
      }
    }
  };
  const int64_t blocks =
      static_cast<int64_t>(total[1] * 8 + total[2] + total[3] * 16);  // ~ work, in 32s
  if (pool == nullptr || first[n_inputs] <= 1 || blocks <= kQuantizeInline32s) {
    for (int64_t item = 0; item < first[n_inputs]; ++item) quantize(item, 0);
  } else {
    pool->ParallelFor(first[n_inputs], quantize);
  }
}

void RunTask(const internal::IsaOps& ops, const MatMulJob& j, const Split& s, int64_t task) {
  const Matrix& w = j.w;
  const int64_t rb = task % s.n_row_blocks, tb = task / s.n_row_blocks;
  const int64_t r0 = rb * s.row_block, rows = std::min(s.row_block, w.n_rows - r0);
  const int64_t t0 = tb * s.token_block, tokens = std::min(s.token_block, j.n_tokens - t0);
  const float* xb = j.x + t0 * j.ldx;
  float* yb = j.y + t0 * j.ldy + r0;
  const uint8_t* wb = w.data + static_cast<size_t>(r0) * w.row_bytes;
  if (s.act == Act::kBf16) {
    const int64_t n_chunks = ActBlocks(s.act, w.n_cols);
    const auto* xp =
        static_cast<const internal::Bf16Chunk*>(s.qx) + t0 / internal::kBf16GroupTokens * n_chunks;
    ops.bgemm(wb, w.row_bytes, rows, w.n_cols, xp->v, tokens, yb, j.ldy);
    return;
  }
  if (s.act != Act::kF32) {
    // The integer kernels gather block headers of up to 16 rows with 32-bit
    // offsets; rows longer than that allows (hundreds of MB) go one at a time.
    const int64_t step = w.row_bytes > kMaxGatherRowBytes ? 1 : rows;
    for (int64_t r = 0; r < rows; r += step) {
      const uint8_t* wr = wb + static_cast<size_t>(r) * w.row_bytes;
      const int64_t n = std::min(step, rows - r);
      if (s.act == Act::kQ8K) {
        const int64_t n_blocks = w.n_cols / internal::kQ8KValues;
        const auto* a = static_cast<const internal::Q8KBlock*>(s.qx) + t0 * n_blocks;
        ops.qgemm(w.type, wr, w.row_bytes, n, n_blocks, a, n_blocks, tokens, yb + r, j.ldy);
      } else {
        const int64_t n_blocks = w.n_cols / internal::kQ8Block32Values;
        const auto* a = static_cast<const internal::Q8Block32*>(s.qx) + t0 * n_blocks;
        ops.qgemm32(w.type, wr, w.row_bytes, n, n_blocks, a, n_blocks, tokens, yb + r, j.ldy);
      }
    }
    return;
  }
  if (s.try_direct &&
      ops.gemm(w.type, wb, w.row_bytes, rows, w.n_cols, xb, j.ldx, tokens, yb, j.ldy))
    return;
  float* panel = PanelBuffer(static_cast<size_t>(rows * s.panel_stride));
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* src = wb + static_cast<size_t>(r) * w.row_bytes;
    float* dst = panel + r * s.panel_stride;
    if (!ops.dequant_row(w.type, src, dst, w.n_cols))
      internal::DequantizeRowRef(w.type, src, dst, w.n_cols);
  }
  ops.gemm(DType::kF32, reinterpret_cast<const uint8_t*>(panel),
           static_cast<size_t>(s.panel_stride) * 4, rows, w.n_cols, xb, j.ldx, tokens, yb, j.ldy);
}

}  // namespace

void MatMuls(std::span<const MatMulJob> jobs, ThreadPool* pool) {
  if (jobs.size() > kMaxMatMulJobs) {
    MatMuls(jobs.first(kMaxMatMulJobs), pool);
    MatMuls(jobs.subspan(kMaxMatMulJobs), pool);
    return;
  }
  const internal::IsaOps& ops = internal::Ops();
  const int n_threads = pool != nullptr ? pool->n_threads() : 1;
  Planned planned[kMaxMatMulJobs];
  size_t n_planned = 0;
  int64_t n_tasks = 0;
  for (const MatMulJob& j : jobs) {
    if (j.n_tokens <= 0 || j.w.n_rows <= 0) continue;
    if (j.w.n_cols <= 0) {
      for (int64_t t = 0; t < j.n_tokens; ++t)
        std::fill(j.y + t * j.ldy, j.y + t * j.ldy + j.w.n_rows, 0.0f);
      continue;
    }
    const Split s = PlanSplit(ops, j, n_threads, static_cast<int64_t>(jobs.size()));
    planned[n_planned++] = {&j, s, n_tasks};
    n_tasks += s.n_tasks();
  }
  QuantizeInputs(ops, planned, n_planned, pool);
  auto run_task = [&](int64_t task, int /*thread*/) {
    size_t i = 0;
    while (i + 1 < n_planned && task >= planned[i + 1].first) ++i;
    RunTask(ops, *planned[i].job, planned[i].split, task - planned[i].first);
  };
  if (pool == nullptr || n_tasks <= 1) {
    for (int64_t task = 0; task < n_tasks; ++task) run_task(task, 0);
  } else {
    pool->ParallelFor(n_tasks, run_task);
  }
}

void MatMul(const Matrix& w, const float* x, int64_t ldx, int64_t n_tokens, float* y, int64_t ldy,
            ThreadPool* pool) {
  const MatMulJob job{w, x, ldx, n_tokens, y, ldy};
  MatMuls({&job, 1}, pool);
}

}  // namespace mx::kernels
