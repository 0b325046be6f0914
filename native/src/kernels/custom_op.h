// Helpers for our ggml custom ops (ggml_custom_4d): the split of the work among ggml's threads,
// and elementwise functions as graph nodes. Internal.
#pragma once

#include "ggml.h"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace kz {

// the rows [r0, r1) thread `ith` of `nth` takes of nrows: an even split, in order
inline std::pair<int64_t, int64_t> thread_rows(int64_t nrows, int ith, int nth) {
    const int64_t per = (nrows + nth - 1) / nth, r0 = std::min<int64_t>(nrows, per * ith);
    return {r0, std::min<int64_t>(nrows, r0 + per)};
}

// dst = F(src[0]), both contiguous F32, the elements split over the threads: a ggml custom op
// for the vector_kernels.h activations (ELU, GELU: ggml's call libm per element)
template <void (*F)(const float *, float *, int64_t)>
void unary_op(ggml_tensor *dst, int ith, int nth, void *) {
    const auto [i0, i1] = thread_rows(ggml_nelements(dst), ith, nth);
    F((const float *)dst->src[0]->data + i0, (float *)dst->data + i0, i1 - i0);
}

// unary_op<F> as a graph node: F of every value of the F32 [ne0, ne1] x
template <void (*F)(const float *, float *, int64_t)>
ggml_tensor *unary(ggml_context *ctx, ggml_tensor *x) {
    ggml_tensor *args[1] = {x};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, x->ne[0], x->ne[1], 1, 1, args, 1, unary_op<F>, GGML_N_TASKS_MAX,
                          nullptr);
}

}  // namespace kz
