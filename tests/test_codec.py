"""Native codec decoder: parity with the PyTorch goldens, exact streaming, errors, independence."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from kazetts.validation import goldens
from kazetts.validation.goldens import GATES
from kazetts.stages import native
from tests.conftest import DUMPS, REPO

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
        out.append(dec.stream(codes[i:i + n]))
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


def test_stream_equals_full_f16(codec_gguf):
    from kazetts.stages.codec import CodecDecoder
    dec = CodecDecoder(codec_gguf(), threads=1, weights="f16")
    codes = _random_codes(90, 21)
    full = dec.decode(codes)
    for sizes in ([1], [4], [3, 1, 9]):
        diff = float(np.abs(_stream(dec, codes, sizes) - full).max())
        print(f"f16 chunks {sizes}: max abs diff {diff:.1e}")
        assert diff <= 1e-5


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
    p = subprocess.run([str(ref_python), "-c", script, str(tiny_checkpoint()), str(tmp_path / "codes.npy"),
                        str(tmp_path / "ref.npy")], capture_output=True, text=True, cwd=REPO, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    ref = np.load(tmp_path / "ref.npy")
    dec = CodecDecoder(codec_gguf(), threads=1)
    wav = dec.decode(codes)
    diff = float(np.abs(wav - ref).max())
    tail = float(np.abs(wav[300 * 1920:] - ref[300 * 1920:]).max())
    print(f"320 frames vs reference forward: max abs diff {diff:.2e} (frames 300+: {tail:.2e})")
    assert diff <= 1e-4


def test_threads_do_not_change_the_result(codec_gguf):
    from kazetts.stages.codec import CodecDecoder
    codes = _random_codes(12, 3)
    a = CodecDecoder(codec_gguf(), threads=1).decode(codes)
    b = CodecDecoder(codec_gguf(), threads=2).decode(codes)
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
        oa.append(a.stream(ca[i:i + 3]))
        ob.append(b.stream(cb[i:i + 3]))
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
