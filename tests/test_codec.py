"""Native codec decoder: parity with the PyTorch goldens, exact streaming, errors, independence."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from kazetts import native
from kazetts.validation import goldens
from kazetts.validation.goldens import GATES
from tests.conftest import DUMPS, REPO, edited

STAGES = ["quantized", "pre_conv", "transformer", "upsample"]
CASES = sorted(p.name for p in DUMPS.glob("*") if (p / "manifest.json").exists()) if DUMPS.exists() else []


@pytest.fixture(scope="session")
def codec_gguf(tiny_gguf):
    """mmproj GGUF (F32 conversion) of a tiny checkpoint: codec_gguf(preset, type, seed)."""
    return lambda preset="tiny", model_type="custom_voice", seed=0: tiny_gguf(preset, model_type, "f32", seed)[1]


@pytest.fixture(scope="session")
def decoder(codec_gguf):
    from kazetts.stages.codec import CodecDecoder

    return CodecDecoder(codec_gguf(), threads=1)


def _case(name):
    manifest, arrays = goldens.load_case(DUMPS / name)
    ck = manifest["checkpoint"]
    return manifest, arrays, (ck["preset"], ck["model_type"], ck["seed"])


def _random_codes(n, seed, size=2048):
    return np.random.default_rng(seed).integers(0, size, size=(n, 16)).astype(np.int32)


def _stream(dec, codes, sizes):
    dec.reset()
    out, i, k = [], 0, 0
    while i < len(codes):
        n = sizes[k % len(sizes)]
        out.append(dec.stream(codes[i : i + n]))
        i, k = i + n, k + 1
    assert dec.position == len(codes)
    return np.concatenate(out)


@pytest.mark.parametrize("case", CASES)
def test_golden_f32(case, codec_gguf):
    from kazetts.stages.codec import CodecDecoder

    _, arrays, key = _case(case)
    dec = CodecDecoder(codec_gguf(*key), threads=1, weights="f32")
    wav, inter = dec.decode(arrays["codes"], intermediates=True)
    diffs = {s: float(np.abs(inter[s] - arrays[f"codec_{s}"]).max()) for s in STAGES}
    diffs["waveform"] = float(np.abs(wav - arrays["waveform"]).max())
    print(f"{case} f32 max abs diff: " + ", ".join(f"{k} {v:.2e}" for k, v in diffs.items()))
    for s in STAGES:
        assert inter[s].shape == arrays[f"codec_{s}"].shape
    assert wav.shape == arrays["waveform"].shape
    assert max(diffs.values()) <= GATES["codec_max_abs"], diffs
    if case in goldens.F32_EXACT_CASES:  # an F32 checkpoint in an F32 file: every weight exact
        assert diffs["waveform"] <= GATES["f32_checkpoint_waveform_max_abs"], diffs


@pytest.mark.parametrize("case", CASES)
def test_golden_f16(case, codec_gguf):
    from kazetts.stages.codec import CodecDecoder

    _, arrays, key = _case(case)
    dec = CodecDecoder(codec_gguf(*key), threads=1, weights="f16")
    wav = dec.decode(arrays["codes"])
    ref = arrays["waveform"]
    corr = float(np.corrcoef(wav, ref)[0, 1])
    print(f"{case} f16: correlation {corr:.7f}, max abs diff {np.abs(wav - ref).max():.2e}")
    assert corr >= GATES["codec_f16_min_correlation"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_stream_equals_full_any_chunking(decoder, seed):
    """Beyond 300 frames (the reference chunked_decode's cut) and past many KV windows."""
    codes = _random_codes(310, seed)
    full = decoder.decode(codes)
    rng = np.random.default_rng(100 + seed)
    chunkings = [[int(x) for x in rng.integers(1, 40, size=50)], [int(x) for x in rng.integers(1, 6, size=200)]]
    if seed == 0:
        chunkings = [[1], [2], [3], [7]] + chunkings
    for sizes in chunkings:
        got = _stream(decoder, codes, sizes)
        assert got.shape == full.shape
        diff = float(np.abs(got - full).max())
        print(f"seed {seed} chunks {sizes[:6]}...: max abs diff {diff:.1e}")
        assert diff <= GATES["same_model_max_abs"]


def test_streams_of_one_decoder_are_independent(codec_gguf):
    """Streams of their own on one decoder (kz_codec_stream, one per request said at once, #30):
    interleaved pushes, and pushes from three threads at once, give each stream the bits the
    decoder's own stream gives its codes alone; a reset stream starts anew; errors stay on their
    stream, which still works."""
    import threading

    from kazetts.native import NativeError
    from kazetts.stages.codec import CodecDecoder

    dec = CodecDecoder(codec_gguf(), threads=2, weights="f16")
    codes = [_random_codes(23, 30 + i) for i in range(3)]
    sizes = [[1, 4, 4], [3], [2, 7]]
    alone = [_stream(dec, c, s) for c, s in zip(codes, sizes)]

    def chunks(i):
        out, at, k = [], 0, 0
        while at < len(codes[i]):
            n = sizes[i][k % len(sizes[i])]
            out.append(codes[i][at : at + n])
            at, k = at + n, k + 1
        return out

    streams = [dec.new_stream() for _ in codes]
    got = [[] for _ in codes]
    todo = [chunks(i) for i in range(3)]
    while any(todo):  # interleaved, one chunk of each stream in turn
        for i, t in enumerate(todo):
            if t:
                got[i].append(streams[i].stream(t.pop(0)))
    for i in range(3):
        assert np.array_equal(np.concatenate(got[i]), alone[i]), i

    results = [None] * 3

    def run(i):
        streams[i].reset()
        results[i] = np.concatenate([streams[i].stream(c) for c in chunks(i)])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(3):
        assert np.array_equal(results[i], alone[i]), i

    streams[0].reset()
    with pytest.raises(NativeError, match="expected 16 codebooks"):
        streams[0].stream(codes[0][:2, :8])
    again = np.concatenate([streams[0].stream(c) for c in chunks(0)[:2]])  # (the same chunks as alone)
    assert np.array_equal(again, alone[0][: 5 * dec.samples_per_frame])


def test_stream_equals_full_f16(codec_gguf):
    from kazetts.stages.codec import CodecDecoder

    dec = CodecDecoder(codec_gguf(), threads=1, weights="f16")
    codes = _random_codes(90, 21)
    full = dec.decode(codes)
    for sizes in ([1], [4], [3, 1, 9]):
        diff = float(np.abs(_stream(dec, codes, sizes) - full).max())
        print(f"f16 chunks {sizes}: max abs diff {diff:.1e}")
        assert diff <= GATES["same_model_max_abs"]


def test_full_decode_independent_of_internal_chunk(codec_gguf):
    from kazetts.stages.codec import CodecDecoder

    codes = _random_codes(40, 5)
    dec = CodecDecoder(codec_gguf(), threads=1)
    ref = dec.decode(codes)
    for chunk in (1, 5, 64):
        dec.set_max_chunk(chunk)
        assert np.abs(dec.decode(codes) - ref).max() <= GATES["same_model_max_abs"]


def test_full_decode_beyond_300_frames_matches_reference_model(codec_gguf, tiny_checkpoint, ref_python, tmp_path):
    """The exact model (reference forward on all frames at once), not chunked_decode."""
    from kazetts.stages.codec import CodecDecoder

    codes = _random_codes(320, 9)
    np.save(tmp_path / "codes.npy", codes)
    script = (
        "import sys, numpy as np, torch\n"
        "from kazetts.validation.reference import load_strict\n"
        "_, codec = load_strict(sys.argv[1])\n"
        "c = torch.from_numpy(np.load(sys.argv[2]).astype(np.int64)).T[None]\n"
        "with torch.inference_mode():\n"
        "    np.save(sys.argv[3], codec.decoder(c)[0, 0].numpy())\n"
    )
    p = subprocess.run(
        [str(ref_python), "-c", script, str(tiny_checkpoint()), str(tmp_path / "codes.npy"), str(tmp_path / "ref.npy")],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=900,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    ref = np.load(tmp_path / "ref.npy")
    dec = CodecDecoder(codec_gguf(), threads=1)
    wav = dec.decode(codes)
    diff = float(np.abs(wav - ref).max())
    tail = float(np.abs(wav[300 * 1920 :] - ref[300 * 1920 :]).max())
    print(f"320 frames vs reference forward: max abs diff {diff:.2e} (frames 300+: {tail:.2e})")
    assert diff <= 1e-4


@pytest.mark.parametrize("weights", ["f32", "f16"])
def test_threads_do_not_change_the_result(codec_gguf, weights):
    """The threads split the conv kernels' output blocks (F16 ones widened per thread)."""
    from kazetts.stages.codec import CodecDecoder

    codes = _random_codes(12, 3)
    a = CodecDecoder(codec_gguf(), threads=1, weights=weights).decode(codes)
    b = CodecDecoder(codec_gguf(), threads=2, weights=weights).decode(codes)
    assert np.abs(a - b).max() <= GATES["same_model_max_abs"]


def test_reset_mid_stream(decoder):
    codes = _random_codes(30, 4)
    full = decoder.decode(codes)
    decoder.reset()
    decoder.stream(_random_codes(17, 8))  # an abandoned utterance
    decoder.reset()
    assert decoder.position == 0
    got = np.concatenate([decoder.stream(codes[:13]), decoder.stream(codes[13:])])
    assert np.abs(got - full).max() <= GATES["same_model_max_abs"]


def test_two_handles_are_independent(codec_gguf):
    from kazetts.stages.codec import CodecDecoder

    a, b = CodecDecoder(codec_gguf(), threads=1), CodecDecoder(codec_gguf(), threads=1)
    ca, cb = _random_codes(20, 11), _random_codes(20, 12)
    fa, fb = a.decode(ca), b.decode(cb)
    oa, ob = [], []
    for i in range(0, 20, 3):  # interleaved pushes
        oa.append(a.stream(ca[i : i + 3]))
        ob.append(b.stream(cb[i : i + 3]))
    assert np.abs(np.concatenate(oa) - fa).max() <= GATES["same_model_max_abs"]
    assert np.abs(np.concatenate(ob) - fb).max() <= GATES["same_model_max_abs"]
    b.close()
    assert np.abs(a.decode(ca) - fa).max() <= GATES["same_model_max_abs"]


@pytest.mark.parametrize("bad", [-1, 2048, 1 << 30])
def test_code_out_of_range_is_an_error_and_keeps_the_stream(decoder, bad):
    codes = _random_codes(10, 6)
    full = decoder.decode(codes)
    broken = codes.copy()
    broken[6, 5] = bad
    with pytest.raises(native.NativeError, match="out of range") as info:
        decoder.decode(broken)
    assert info.value.status == 1
    decoder.reset()
    first = decoder.stream(codes[:4])
    with pytest.raises(native.NativeError, match="out of range"):
        decoder.stream(broken[4:])
    assert decoder.position == 4, "a failed push leaves the stream as it was"
    got = np.concatenate([first, decoder.stream(codes[4:])])
    assert np.abs(got - full).max() <= GATES["same_model_max_abs"]


@pytest.mark.parametrize("n_cb", [1, 15, 17])
def test_wrong_codebook_count(decoder, n_cb):
    codes = np.zeros((4, n_cb), np.int32)
    with pytest.raises(native.NativeError, match="16 codebooks") as info:
        decoder.decode(codes)
    assert info.value.status == 1
    with pytest.raises(native.NativeError, match="16 codebooks"):
        decoder.stream(codes)


def test_shapes_and_empty_input(decoder):
    assert decoder.n_codebooks == 16 and decoder.samples_per_frame == 1920 and decoder.sample_rate == 24000
    assert decoder.decode(np.zeros((0, 16), np.int32)).shape == (0,)
    assert decoder.stream(np.zeros((0, 16), np.int32)).shape == (0,)
    with pytest.raises(ValueError):
        decoder.decode(np.zeros(16, np.int32))


def test_load_errors(tmp_path, codec_gguf, tiny_gguf):
    from kazetts.stages.codec import CodecDecoder

    with pytest.raises(native.NativeError) as info:
        CodecDecoder(tmp_path / "missing.gguf")
    assert info.value.status == 2
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf file at all" * 10)
    with pytest.raises(native.NativeError) as info:
        CodecDecoder(junk)
    assert info.value.status == 3
    talker = tiny_gguf("tiny", "custom_voice", "f32", 0)[0]
    with pytest.raises(native.NativeError, match="missing tensor a.gen.wav") as info:
        CodecDecoder(talker)
    assert info.value.status == 3
    with pytest.raises(native.NativeError) as info:
        CodecDecoder(codec_gguf(), threads=0)
    assert info.value.status == 1
    with pytest.raises(ValueError):
        CodecDecoder(codec_gguf(), weights="q4")


# ------------------------------------------------------------------------------- malformed files
# Each a copy of the tiny mmproj with one field made hostile (kazetts.validation.gguf_edit): the
# loader must say what is wrong (KZ_ERR_FORMAT), never abort, read out of bounds or decode a model
# whose channels do not chain (that used to fail inside ggml, at decode time).


def _shape(name, dims):
    return lambda L: L.set_tensor(name, dims)


def _kv(key, type_id, value):
    return lambda L: L.set_kv(key, type_id, value)


U32, F32 = 4, 6
BAD_CODEC_FILES = {
    # found by the fuzzer: a zero-sized dimension (memcpy from a null buffer, UBSan)
    "zero_dim": (_shape("a.gen.wav.dac.blk.1.conv.weight", [10, 12, 0]), "has shape"),
    "residual_conv_channels": (
        _shape("a.gen.wav.dac.blk.1.res.0.conv1.weight", [7, 6, 12]),
        "res.0.conv1 maps 6 -> 12 channels, gets 12",
    ),
    "residual_conv_out": (
        lambda L: (
            L.set_tensor("a.gen.wav.dac.blk.1.res.1.conv2.weight", [1, 12, 6]),
            L.set_tensor("a.gen.wav.dac.blk.1.res.1.conv2.bias", [6]),
        ),
        "res.1.conv2 maps 12 -> 6",
    ),
    "bias_shape": (
        _shape("a.gen.wav.dac.blk.1.res.1.conv2.bias", [6]),
        "conv2.bias has shape \\[6, 1, 1, 1\\], expected \\[12\\]",
    ),
    "entry_channels": (_shape("a.gen.wav.dac.entry.weight", [7, 32, 48]), "dac.entry maps 32 -> 48 channels, gets 64"),
    "post_conv_channels": (
        _shape("a.gen.wav.dac.post_conv.weight", [7, 6, 1]),
        "dac.post_conv maps 6 -> 1 channels, gets 3",
    ),
    "upsample_channels": (
        _shape("a.gen.wav.up.blk.1.conv.weight", [2, 64, 32]),
        "up.blk.1.conv takes 32 channels, gets 64",
    ),
    "dac_block_channels": (
        _shape("a.gen.wav.dac.blk.2.conv.weight", [8, 6, 24]),
        "dac.blk.2.conv takes 24 channels, gets 12",
    ),
    "four_dim_conv": (_shape("a.gen.wav.dac.blk.2.res.0.conv1.weight", [7, 6, 6, 2]), "must be \\[k, cin, cout\\]"),
    "dwconv_kernel_1": (_shape("a.gen.wav.up.blk.0.dwconv.weight", [1, 1, 64]), "dwconv kernel must be >= 2"),
    "codebook_count": (_shape("a.gen.wav.quant.rest.codebook.weight", [16, 2048, 70]), "codebooks"),
    "odd_head_dim": (lambda L: L.set_kv("kazetts.wav.head_dim", U32, 1), "head_dim 1 is odd"),
    "head_dim_zero": (_kv("kazetts.wav.head_dim", U32, 0), "not a multiple of head_dim"),
    "head_dim_huge_float": (_kv("kazetts.wav.head_dim", F32, 1e30), "head_dim is out of range"),
    "head_dim_nan": (_kv("kazetts.wav.head_dim", F32, float("nan")), "not a finite number"),
    "head_dim_string": (_kv("kazetts.wav.head_dim", 8, "sixteen"), "head_dim is not a number"),
    "window_huge": (_kv("kazetts.wav.sliding_window", U32, 0x7FFFFFFF), "sliding_window must be in 1..8192"),
    "window_zero": (_kv("kazetts.wav.sliding_window", U32, 0), "sliding_window must be in"),
    "rope_theta_negative": (_kv("kazetts.wav.rope_theta", F32, -1.0), "must be positive"),
    "layer_count": (_kv("kazetts.wav.num_hidden_layers", U32, 3), "2 codec transformer layers"),
    "int_type": (
        lambda L: L.set_tensor("a.gen.wav.tfm.blk.0.ls1.weight", [32], 26),
        "ls1.weight has unsupported type i32",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CODEC_FILES))
def test_malformed_codec_files_are_format_errors(tmp_path, mmproj_layout, case):
    from kazetts.stages.codec import CodecDecoder

    edit, match = BAD_CODEC_FILES[case]
    path = edited(mmproj_layout, edit, tmp_path / "edited-mmproj.gguf")
    with pytest.raises(native.NativeError, match=match) as info:
        CodecDecoder(path, threads=1)
    assert info.value.status == 3 and str(path) in str(info.value)


def test_a_tensor_table_past_the_end_of_the_file(tmp_path, mmproj_layout):
    from kazetts.stages.codec import CodecDecoder

    L = mmproj_layout.copy()
    L.tensors[-1].dims = [1 << 30]  # the last tensor, its data left as they are
    path = L.write(tmp_path / "past-end.gguf")
    with pytest.raises(native.NativeError, match="past the end of the file") as info:
        CodecDecoder(path, threads=1)
    assert info.value.status == 3


def test_a_deep_codec_loads_and_decodes(tmp_path, mmproj_layout, decoder):
    """100 transformer layers (the weight context and the graph used to hold a fixed 1024 and
    16384 tensors: an abort inside ggml)."""
    from kazetts.stages.codec import CodecDecoder

    L = mmproj_layout.copy()
    L.add_copies("a.gen.wav.tfm.blk.1.", [f"a.gen.wav.tfm.blk.{i}." for i in range(2, 100)])
    L.set_kv("kazetts.wav.num_hidden_layers", U32, 100)
    with CodecDecoder(L.write(tmp_path / "deep.gguf"), threads=1) as deep:
        wav = deep.decode(_random_codes(3, 0))
    assert wav.shape == (3 * deep.samples_per_frame,) and np.isfinite(wav).all()


def test_bad_thread_and_chunk_counts(codec_gguf, decoder):
    from kazetts.stages.codec import CodecDecoder

    with pytest.raises(native.NativeError, match="n_threads must be in 1..512") as info:
        CodecDecoder(codec_gguf(), threads=100000)
    assert info.value.status == 1
    with pytest.raises(native.NativeError, match="max chunk must be in 1..4096"):
        decoder.set_max_chunk(1 << 30)
    with pytest.raises(native.NativeError, match="n_threads must be in"):
        decoder.set_threads(100000)


def test_f16_sums_is_f16_on_a_cpu_without_fp16_arithmetic(codec_gguf, tiny_gguf):
    """codec_weights "f16-sums" (KZ_CODEC_WEIGHTS_F16_SUMS) sums in float16 only on ARM cores with
    FP16 arithmetic, where golden_check's "codec kernels" and "conv gemm" stages gate it under
    qemu (make aarch64-test); on this CPU it is "f16", bit for bit, through the decoder and the
    native engine."""
    import platform

    from kazetts.engine.native_tts import NativeTTS
    from kazetts.stages.codec import CodecDecoder

    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip(f"{platform.machine()}: FP16 arithmetic may be there (make aarch64-test gates it)")
    codes = _random_codes(9, 31)
    f16 = CodecDecoder(codec_gguf(), threads=1, weights="f16").decode(codes)
    assert np.array_equal(CodecDecoder(codec_gguf(), threads=1, weights="f16-sums").decode(codes), f16)
    talker, mmproj = tiny_gguf("tiny", "custom_voice", "f32")
    said = [
        NativeTTS(talker, mmproj, threads=1, codec_weights=w).synthesize(
            "Hello.", speaker="vivian", greedy=True, max_frames=6
        )
        for w in ("f16", "f16-sums")
    ]
    assert np.array_equal(said[0].codes, said[1].codes) and np.array_equal(said[0].audio, said[1].audio)
    with pytest.raises(ValueError, match="f16-sums"):
        CodecDecoder(codec_gguf(), threads=1, weights="f16-fast")
