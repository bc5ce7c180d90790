// MatMul driver: splits the output into (row block x token block) tasks for
// the thread pool and feeds each block to the active path's gemm, either on
// the weights as stored (converted in registers; up to the path's
// direct_max_tokens for the type) or on a row panel converted to f32 first
// (the conversion then amortised over the block's tokens). How the work is
// split only affects speed: every output element has one fixed reduction
// order on a path (isa.h GemmFn).
#include <algorithm>
#include <cstring>
#include <memory>

#include "kernels/isa.h"
#include "kernels/kernels.h"

namespace mx::kernels {
namespace {

constexpr int64_t kTokenBlock = 96;          // tokens per task above the decode sizes
constexpr int64_t kMaxRowBlock = 64;         // rows per task at most
constexpr int64_t kRowAlign = 8;             // row blocks are multiples of this
constexpr int64_t kPanelBytes = 512 * 1024;  // f32 panel per task at most (stays in L2)
constexpr int64_t kTasksPerThread = 8;       // enough tasks for the dynamic counter to balance

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

}  // namespace

void MatMul(const Matrix& w, const float* x, int64_t ldx, int64_t n_tokens, float* y, int64_t ldy,
            ThreadPool* pool) {
  const int64_t n_rows = w.n_rows, n_cols = w.n_cols;
  if (n_tokens <= 0 || n_rows <= 0) return;
  if (n_cols <= 0) {
    for (int64_t t = 0; t < n_tokens; ++t) std::fill(y + t * ldy, y + t * ldy + n_rows, 0.0f);
    return;
  }
  const internal::IsaOps& ops = internal::Ops();
  // Few tokens: stream the stored rows once (converting in registers). Many
  // tokens: convert each row block into a 64-byte aligned f32 panel that every
  // token tile of the task reuses from L2; which is faster depends on the type.
  const bool try_direct = n_tokens <= ops.direct_max_tokens(w.type);
  const int n_threads = pool != nullptr ? pool->n_threads() : 1;

  // Token blocks: all tokens for decode-sized calls, else kTokenBlock each.
  const int64_t token_block = n_tokens <= kTokenBlock ? n_tokens : kTokenBlock;
  const int64_t n_token_blocks = CeilDiv(n_tokens, token_block);
  // Row blocks: enough tasks for every thread, bounded by the panel size.
  const int64_t panel_stride = (n_cols + 15) / 16 * 16;  // floats per panel row
  const int64_t want_row_blocks =
      std::max<int64_t>(1, CeilDiv(kTasksPerThread * n_threads, n_token_blocks));
  int64_t row_block = CeilDiv(CeilDiv(n_rows, want_row_blocks), kRowAlign) * kRowAlign;
  int64_t max_rows = kMaxRowBlock;
  if (!try_direct) {
    max_rows =
        std::max<int64_t>(kRowAlign, kPanelBytes / (panel_stride * 4) / kRowAlign * kRowAlign);
  }
  row_block = std::clamp<int64_t>(row_block, kRowAlign,
                                  std::max<int64_t>(kRowAlign, std::min(max_rows, kMaxRowBlock)));
  const int64_t n_row_blocks = CeilDiv(n_rows, row_block);
  const int64_t n_tasks = n_row_blocks * n_token_blocks;

  auto run_task = [&](int64_t task, int /*thread*/) {
    const int64_t rb = task % n_row_blocks, tb = task / n_row_blocks;
    const int64_t r0 = rb * row_block, rows = std::min(row_block, n_rows - r0);
    const int64_t t0 = tb * token_block, tokens = std::min(token_block, n_tokens - t0);
    const float* xb = x + t0 * ldx;
    float* yb = y + t0 * ldy + r0;
    const uint8_t* wb = w.data + static_cast<size_t>(r0) * w.row_bytes;
    if (try_direct && ops.gemm(w.type, wb, w.row_bytes, rows, n_cols, xb, ldx, tokens, yb, ldy))
      return;
    float* panel = PanelBuffer(static_cast<size_t>(rows * panel_stride));
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* src = wb + static_cast<size_t>(r) * w.row_bytes;
      float* dst = panel + r * panel_stride;
      if (!ops.dequant_row(w.type, src, dst, n_cols))
        internal::DequantizeRowRef(w.type, src, dst, n_cols);
    }
    ops.gemm(DType::kF32, reinterpret_cast<const uint8_t*>(panel),
             static_cast<size_t>(panel_stride) * 4, rows, n_cols, xb, ldx, tokens, yb, ldy);
  };
  if (pool == nullptr || n_tasks == 1) {
    for (int64_t task = 0; task < n_tasks; ++task) run_task(task, 0);
  } else {
    pool->ParallelFor(n_tasks, run_task);
  }
}

}  // namespace mx::kernels
