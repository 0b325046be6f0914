/* kazetts talker kernel: the talker's Q8_0 matrix products on libkazetts' own kernels, handed to
 * llama.cpp as a small ggml backend.
 *
 * Why: the talker runs through llama.cpp. On x86-64 its Q8_0 matrix x vector product walks one
 * weight row at a time on a single accumulator chain, well below what the memory bus allows. On
 * ARM the ggml kazetts ships is built for ARMv8.0 (it must run on a Cortex-A53; a dotprod build
 * dies of SIGILL there), so its Q8_0 product has neither SDOT nor ggml's repacked kernels (their
 * choice is made when ggml is compiled): libkazetts' ARM kernels, chosen at run time from the
 * CPU's hwcaps, bring SDOT back where the CPU has it.
 * This backend is a ggml device of type ACCEL (as ggml's BLAS backend): llama.cpp adds every
 * ACCEL device to each context it creates, ahead of the CPU. Its buffer type is the CPU's own,
 * so weights load as usual and the CPU backend keeps reading them; it claims only MUL_MAT of a
 * 2-D Q8_0 weight in a host buffer (plain Q8_0 rows: never one of ggml's extra buffer types such
 * as CPU_REPACK, whose rows ggml rearranged) by F32 columns: one column (a decoding step) and 2+
 * columns (the prefill). Its one-column kernel reads four rows at a time but repeats ggml's
 * arithmetic exactly (the column quantized by ggml's own Q8_0 routine, the same integer block
 * sums in the same lanes, the same float operations in the same order, the same final sum):
 * its outputs equal ggml's bit for bit, which a probe checks once before the device is
 * registered. x86-64 (AVX-512 VNNI): ggml's AVX2 vec_dot; the prefill, whose ggml GEMM is
 * llamafile's tinyBLAS (256 bits wide), has a kernel of its own (src/kernels/talker_gemm.h, the
 * same per (row, column) on tiles of 8 rows x 6 columns, probed the same way; when its probe
 * fails the prefill stays on ggml's GEMM). ARM: ggml's ARMv8.0 NEON vec_dot, by a NEON kernel
 * (ARMv8.0) or an SDOT one (CPUs with dotprod, i8mm ones included), equal bits on every core; the
 * prefill runs the same kernel column by column (ggml's ARMv8.0 build computes each (row, column)
 * by that vec_dot too).
 *
 * A ggml backend is process-wide state (ggml's registry has no unregister), unlike the stages'
 * handles: the first successful kz_talker_backend_setup() registers it for the whole process,
 * and every llama.cpp context created afterwards uses it.
 *
 * Which products it claims depends on the CPU: on AMD ones the steps stay on ggml, whose loop
 * (one row after another) streams at the memory bus's speed there while the four interleaved
 * rows of the one-column kernel defeat the hardware prefetcher (Zen 5: ~0.85x ggml's read rate,
 * plus ~1 ms a step of graph splits); elsewhere (a Xeon: 1.5x ggml's; ARM: not measured on a
 * device) the kernel takes them. The prefill, on the many-column kernel, is faster everywhere it
 * was measured (x86-64).
 *
 * Environment, read by each setup call: KAZETTS_TALKER_BACKEND=0 (or "off") keeps the backend out;
 * "prefill" claims only the many-column products and "all" both kinds, whatever the CPU (A/B
 * measurements); once registered, the device claims what the last setup said in contexts created
 * after it.
 *
 * Nothing is registered on an x86-64 CPU without AVX-512 VNNI, on a CPU that is neither x86-64
 * nor AArch64, in a build without OpenMP, with a ggml other than the one whose backend
 * structures this library mirrors, when the probe fails, or on ARM with a ggml built with dotprod
 * (GGML_NATIVE on an ARMv8.2+ device, as Termux's llama-cpp-python): that ggml repacks the Q8_0
 * matrices into its CPU_REPACK buffer for its own SDOT / SMMLA kernels, which keep the products.
 */
#ifndef KAZETTS_TALKER_BACKEND_H
#define KAZETTS_TALKER_BACKEND_H

#include "kazetts/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Call before creating the talker's llama.cpp context. Returns 1 when the kernels will run the
 * talker's Q8_0 matrix products (all, or the prefill's only), 0 when ggml's own do all (see
 * kz_talker_backend_status). */
KZ_API int kz_talker_backend_setup(void);

/* Why the last setup said what it said: the kernel, "avx512-vnni", "neon-dotprod" or "neon" (both
 * kinds of products), followed by " (one column only)" (the many-column kernel failed its probe:
 * the prefill stays on ggml's GEMM) or " (prefill only: ...)" (the steps stay on ggml's loop, and
 * why); or "off (...)" and the reason. */
KZ_API const char *kz_talker_backend_status(void);

/* Products the kernel has computed in this process (tests: it is used). */
KZ_API int64_t kz_talker_backend_calls(void);

/* Largest |kernel - ggml's mul_mat| over one product of a random Q8_0 matrix (rows x cols,
 * cols a multiple of 32) by a random F32 column, on `threads` threads (0 when they agree bit
 * for bit); -1 when there is no kernel on this CPU (or for this ggml: ARM with dotprod compiled
 * in) or the arguments are bad. */
KZ_API double kz_talker_backend_check(int64_t rows, int64_t cols, uint64_t seed, int threads);

/* The same for the kernel of the many-column products (the prefill; x86-64: src/kernels/talker_gemm.h,
 * ARM: the one-column kernel column by column): a random Q8_0 matrix by n >= 2 random F32
 * columns, against ggml's mul_mat of n columns, both run on the same tensors; the columns
 * x_stride floats apart (cols: dense; more: a view of a wider matrix, whose row stride the backend
 * passes on); mutant != 0 runs the tests' mutant instead, the same arithmetic with one rounding
 * changed (x86-64: each fused multiply-add split in two; ARM: ggml's multiply-then-add fused),
 * which must not agree. -1 when there is no such kernel or the arguments are bad. */
KZ_API double kz_talker_backend_check_columns(int64_t rows, int64_t cols, int64_t n, int64_t x_stride, uint64_t seed,
                                              int threads, int mutant);

#ifdef __cplusplus
}
#endif

#endif
