"""libkazetts' Q8_0 backend for the talker (kazetts/talker_backend.h): its one-column products (the
decoding steps) and its many-column ones (the prefill, native/src/kernels/talker_gemm.h) equal ggml's mul_mat
(its vec_dot and its GEMM) bit for bit, llama.cpp uses both for a Q8_0 talker (the steps' only
off AMD CPUs), and KAZETTS_TALKER_BACKEND=0 / prefill / all keep it out / claim the prefill's /
claim both."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from kazetts import native
from kazetts.stages.talker import Talker

LIB = native.bind(
    {
        "kz_talker_backend_check": (ctypes.c_double, [ctypes.c_int64, ctypes.c_int64, ctypes.c_uint64, ctypes.c_int]),
        "kz_talker_backend_calls": (ctypes.c_int64, []),
        "kz_talker_backend_status": (ctypes.c_char_p, []),
        "kz_talker_backend_check_columns": (
            ctypes.c_double,
            [
                ctypes.c_int64,
                ctypes.c_int64,
                ctypes.c_int64,
                ctypes.c_int64,
                ctypes.c_uint64,
                ctypes.c_int,
                ctypes.c_int,
            ],
        ),
    }
)


def _kernel_or_skip():
    if LIB.kz_talker_backend_check(4, 32, 0, 1) < 0:
        pytest.skip(
            "no talker kernel on this CPU (x86-64 AVX-512 VNNI, or ARM with a ggml built for ARMv8.0; with OpenMP):"
            " ggml's own product runs"
        )


# rows not a multiple of 4 and blocks not a multiple of 16 take the one-row tail kernel
@pytest.mark.parametrize("rows,cols", [(3072, 1024), (1024, 3072), (70, 1024), (5, 96), (1, 32), (12, 512)])
@pytest.mark.parametrize("threads", [1, 2])
def test_products_equal_ggml_mul_mat_bit_for_bit(rows, cols, threads):
    _kernel_or_skip()
    for seed in range(3):
        assert LIB.kz_talker_backend_check(rows, cols, seed, threads) == 0.0


def _columns_kernel_or_skip():
    if LIB.kz_talker_backend_check_columns(8, 32, 2, 32, 0, 1, 0) < 0:
        pytest.skip(
            "no many-column talker kernel on this CPU (x86-64 AVX-512 VNNI, or ARM with a ggml built for ARMv8.0):"
            " ggml's GEMM runs"
        )


# the talker's shapes with a 48-row prompt; rows past the 8-row groups (70, 5, 9), every tile width
# (n mod 6: 0 to 5), one block (32), one-row remainders only (5 rows), more columns than a batch
@pytest.mark.parametrize(
    "rows,cols,n",
    [
        (2048, 1024, 48),
        (1024, 3072, 48),
        (3072, 1024, 48),
        (70, 1024, 7),
        (9, 64, 13),
        (5, 96, 3),
        (16, 32, 2),
        (40, 128, 10),
        (8, 64, 11),
        (24, 256, 66),
    ],
)
@pytest.mark.parametrize("threads", [1, 2])
def test_many_column_products_equal_ggml_gemm_bit_for_bit(rows, cols, n, threads):
    _columns_kernel_or_skip()
    for seed in range(3):
        assert LIB.kz_talker_backend_check_columns(rows, cols, n, cols, seed, threads, 0) == 0.0


# the backend claims 2+ columns at any row stride (a view of a wider matrix): whole blocks more,
# a few floats more (columns not 16-byte aligned), one tile or many, 1 and 2 threads
@pytest.mark.parametrize(
    "rows,cols,n,extra", [(70, 1024, 7, 32), (9, 64, 13, 5), (24, 256, 66, 1), (5, 96, 3, 3), (40, 128, 10, 96)]
)
@pytest.mark.parametrize("threads", [1, 2])
def test_many_column_products_of_strided_columns_equal_ggml_bit_for_bit(rows, cols, n, extra, threads):
    """ggml's mul_mat and the backend's product (columns_product, as graph_compute runs it) of the
    same view, whose columns are cols + extra floats apart."""
    _columns_kernel_or_skip()
    for seed in range(3):
        assert LIB.kz_talker_backend_check_columns(rows, cols, n, cols + extra, seed, threads, 0) == 0.0


@pytest.mark.parametrize("rows,cols,n", [(70, 1024, 7), (16, 64, 2)])
def test_a_kernel_off_by_a_rounding_fails_the_check(rows, cols, n):
    """The check sees a last-bit difference: the same arithmetic with unfused multiply-adds fails."""
    _columns_kernel_or_skip()
    assert LIB.kz_talker_backend_check_columns(rows, cols, n, cols, 0, 1, 1) > 0
    assert LIB.kz_talker_backend_check_columns(rows, cols, n, cols + 5, 0, 1, 1) > 0


def test_bad_arguments_are_refused():
    assert LIB.kz_talker_backend_check_columns(8, 33, 2, 33, 0, 1, 0) == -1
    assert LIB.kz_talker_backend_check_columns(8, 32, 1, 32, 0, 1, 0) == -1
    assert LIB.kz_talker_backend_check_columns(0, 32, 2, 32, 0, 1, 0) == -1
    assert LIB.kz_talker_backend_check_columns(8, 32, 2, 32, 0, 0, 0) == -1
    assert LIB.kz_talker_backend_check_columns(8, 32, 2, 31, 0, 1, 0) == -1, "columns overlapping"
    assert LIB.kz_talker_backend_check_columns(8, 32, 2, 32 + 4097, 0, 1, 0) == -1
    assert LIB.kz_talker_backend_check(4, 33, 0, 1) == -1
    assert LIB.kz_talker_backend_check(0, 32, 0, 1) == -1
    assert LIB.kz_talker_backend_check(4, 32, 0, 0) == -1


def _run(path, steps):
    talker = Talker(path, threads=2, n_ctx=256)
    inputs = np.random.default_rng(0).standard_normal((10 + steps, talker.hidden_size)).astype(np.float32) * 0.05
    talker.reset(10 + steps)
    before = LIB.kz_talker_backend_calls()
    outputs = [talker.step(inputs[:10])]
    prefill_calls = LIB.kz_talker_backend_calls() - before
    outputs += [talker.step(row) for row in inputs[10:]]
    talker.close()
    return outputs, prefill_calls, LIB.kz_talker_backend_calls() - before


def test_a_q8_0_talker_decodes_through_it_with_ggml_s_results(tiny_gguf, monkeypatch):
    _kernel_or_skip()
    path = tiny_gguf("tiny", "custom_voice", "q8_0")[0]
    monkeypatch.setenv("KAZETTS_TALKER_BACKEND", "all")
    ours, prefill_calls, calls = _run(path, 6)
    assert LIB.kz_talker_backend_status().decode() == "avx512-vnni"
    step_calls = calls - prefill_calls
    assert step_calls > 0 and step_calls % 6 == 0, "every step's Q8_0 products run on the kernel"
    # the prefill's products run on it too: 10 columns up to the last layer's attention, then the
    # output row alone (its feed-forward and the head): as many products as a step
    assert prefill_calls == step_calls // 6, "every Q8_0 product of a 10-row prefill runs on the kernel"
    monkeypatch.setenv("KAZETTS_TALKER_BACKEND", "0")
    theirs, _, off_calls = _run(path, 6)
    assert "off" in LIB.kz_talker_backend_status().decode() and off_calls == 0
    for (hidden_a, logits_a), (hidden_b, logits_b) in zip(ours, theirs):
        assert np.array_equal(hidden_a, hidden_b) and np.array_equal(logits_a, logits_b)


def test_prefill_only_leaves_the_steps_to_ggml_with_the_same_results(tiny_gguf, monkeypatch):
    """KAZETTS_TALKER_BACKEND=prefill (the default on AMD CPUs): the prefill's many-column products
    run on the kernel, the steps' on ggml's loop; hidden states and logits stay ggml's."""
    _columns_kernel_or_skip()
    path = tiny_gguf("tiny", "custom_voice", "q8_0")[0]
    monkeypatch.setenv("KAZETTS_TALKER_BACKEND", "all")
    _, all_prefill_calls, all_calls = _run(path, 6)
    monkeypatch.setenv("KAZETTS_TALKER_BACKEND", "prefill")
    ours, prefill_calls, calls = _run(path, 6)
    assert LIB.kz_talker_backend_status().decode() == "avx512-vnni (prefill only: KAZETTS_TALKER_BACKEND)"
    assert calls == prefill_calls, "no step product runs on the kernel"
    # the prefill's products but those of its output row alone (the last feed-forward and the head)
    assert 0 < prefill_calls < all_prefill_calls
    monkeypatch.setenv("KAZETTS_TALKER_BACKEND", "0")
    theirs, _, _ = _run(path, 6)
    for (hidden_a, logits_a), (hidden_b, logits_b) in zip(ours, theirs):
        assert np.array_equal(hidden_a, hidden_b) and np.array_equal(logits_a, logits_b)


def _cpu_vendor() -> str:
    with open("/proc/cpuinfo") as info:
        return next((line.split(":")[1].strip() for line in info if line.startswith("vendor_id")), "")


def test_by_default_the_steps_stay_on_ggml_on_amd_cpus_only(tiny_gguf, monkeypatch):
    """On AMD CPUs ggml's one-row loop outran the kernel (Zen 5): the default claims the prefill
    only there, and both kinds of products elsewhere."""
    _columns_kernel_or_skip()
    monkeypatch.delenv("KAZETTS_TALKER_BACKEND", raising=False)
    _, prefill_calls, calls = _run(tiny_gguf("tiny", "custom_voice", "q8_0")[0], 6)
    status = LIB.kz_talker_backend_status().decode()
    if _cpu_vendor() == "AuthenticAMD":
        assert status == "avx512-vnni (prefill only: ggml's own loop is faster on this CPU)"
        assert calls == prefill_calls > 0
    else:
        assert status == "avx512-vnni" and calls > prefill_calls > 0


def test_an_f32_talker_never_reaches_it(tiny_gguf):
    """Only Q8_0 weights are claimed: the F32 talker (the golden path) runs as before."""
    _, prefill_calls, calls = _run(tiny_gguf("tiny", "custom_voice", "f32")[0], 3)
    assert prefill_calls == calls == 0


def test_the_native_engine_uses_it_too(tiny_gguf, monkeypatch):
    """kz_tts loads its talker through llama.h (native/src/stages/talker.cpp), which sets the backend up
    the same way: greedy codes equal those with ggml's product."""
    _kernel_or_skip()
    from kazetts.engine.native_tts import NativeTTS

    talker, mmproj = tiny_gguf("tiny", "custom_voice", "q8_0")

    def codes(setting):
        monkeypatch.setenv("KAZETTS_TALKER_BACKEND", setting)
        tts = NativeTTS(talker, mmproj, threads=2, codec_weights="f32")
        before = LIB.kz_talker_backend_calls()
        result = tts.synthesize("Bonjour !", speaker="vivian", greedy=True, max_frames=6)
        return np.asarray(result.codes), LIB.kz_talker_backend_calls() - before

    (ours, calls), (theirs, off_calls) = codes("1"), codes("0")
    assert calls > 0 and off_calls == 0
    assert np.array_equal(ours, theirs)
