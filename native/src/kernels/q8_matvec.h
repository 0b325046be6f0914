// Q8_0 matrix x few-columns product for x86-64 CPUs (AVX-512 VNNI, or AVX2) and ARMv8 CPUs (NEON,
// dotprod, i8mm: chosen at run time from the CPU's hwcaps), one ggml graph node a product.
//
// Why: the code predictor multiplies ~80 MB of Q8_0 weights by one column 15 times per frame.
// ggml 0.3.36 has no x86 repacking for Q8_0 and its dot kernel walks one row at a time with a
// single accumulator chain and a per-block half-to-float scale conversion: it cannot keep up
// with the memory bus. Here the weights are repacked at load time, four rows interleaved per
// pair of blocks with their scales gathered per row, quants stored offset by +128 so one
// VNNI instruction (unsigned x signed bytes) multiplies a pair of blocks; the offset's
// contribution is removed exactly in the integer accumulator (the AVX2 kernel, without VNNI,
// multiplies one block at a time with ggml's sign trick instead). The activation column is
// quantized by ggml's own Q8_0 routine, so the integer block sums equal ggml's; the AVX-512
// kernel sums the floats in another order than ggml's mul_mat, the AVX2 kernel in ggml's (its
// results are ggml's bit for bit).
//
// On aarch64 the four rows of a group are interleaved 8 bytes at a time by pairs (the operand of
// one i8mm SMMLA, two dotprod SDOTs, two NEON widening multiplies), the quants stored as they
// are. The three ARM kernels take the same exact integer block sums and sum the floats in the
// same order: their results are equal bit for bit, so a request gives the same codes on every
// ARM core, whatever its extensions. One build runs everywhere: the dotprod and i8mm kernels are
// compiled for those extensions alone and run only where getauxval says the CPU has them.
#pragma once

#include <cstddef>
#include <cstdint>

struct ggml_context;
struct ggml_tensor;

namespace kz::q8 {

// Instruction sets with a kernel (none: ggml's kernels).
enum class Isa { none, avx2, avx512_vnni, neon, neon_dotprod, neon_i8mm };

bool supports(Isa isa);  // whether this CPU runs that kernel
Isa best_isa();          // the fastest kernel this CPU runs (none: use ggml's)
const char *isa_name(Isa isa);

// Whether a Q8_0 matrix of `cols` x `rows` can be packed (rows a multiple of 4, cols of 32).
bool fits(int64_t cols, int64_t rows);

// Bytes per packed group of 4 rows of `cols` values; a packed matrix is an I8 tensor
// [group_bytes(cols), rows / 4, ...] (higher dims: stacked matrices, packed one by one).
int64_t group_bytes(int64_t cols);

// Packs `rows` ggml Q8_0 rows of `cols` values into dst (group_bytes(cols) * rows / 4 bytes).
void pack(const void *q8_0_rows, int64_t cols, int64_t rows, uint8_t *dst);

// What a product node does besides W x, each bit for bit as the ggml nodes it replaces would
// (one node instead of several saves their thread barriers).
struct Extras {
    ggml_tensor *residual = nullptr;         // F32 [rows, n]: residual + W x, as ggml_add
    ggml_tensor *rms_norm_weight = nullptr;  // F32 [cols]: x first becomes ggml_mul(ggml_rms_norm(x, eps), weight)
    float eps = 0.0f;
};

// W x as one graph node, by the kernel of `isa` (which the CPU must support), with `extras`: W a
// packed 2-D I8 tensor (or a 2-D view of one), x F32 [cols, n] with contiguous rows; the result
// is F32 [rows, n].
ggml_tensor *mul_mat(ggml_context *ctx, ggml_tensor *w_packed, ggml_tensor *x, Isa isa, const Extras &extras = {});

// The kernel of a graph node made by mul_mat (none: another node).
Isa product_isa(const ggml_tensor *node);

// Product nodes computed so far in this process by the kernel of `isa`, counted by the kernel as
// it runs (once a node): the evidence of which kernel ran, for tests.
int64_t runs(Isa isa);

}  // namespace kz::q8
