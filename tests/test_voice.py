"""Voice cloning through kazetts.TTS: enrolment, voice files, x-vector cloning against the
reference's generate_voice_clone goldens, and the requests that are refused."""

from __future__ import annotations

import pathlib
import warnings

import numpy as np
import pytest
import soundfile

from conftest import DUMPS
from kazetts.engine.tts import NO_CODEC_ENCODER
from kazetts.engine.voice import ModelFingerprint, Voice
from kazetts.validation import goldens

CLONE_CASES = [c.name for c in goldens.CASES if c.ref_audio is not None and c.ref_text is None]


@pytest.fixture(scope="module")
def engines(tiny_tts):
    return lambda preset="tiny", model_type="base", seed=0: tiny_tts(preset, model_type, seed)


def recording(name: str):
    return goldens.recording_path(DUMPS, name)


@pytest.mark.parametrize("name", CLONE_CASES)
def test_x_vector_cloning_from_the_recording_matches_generate_voice_clone(name, engines):
    """ref_audio -> audio front end -> speaker encoder -> prompt -> greedy codes, all identical to
    the reference's generate_voice_clone(x_vector_only_mode=True); the same through a saved voice."""
    manifest, arrays = goldens.load_case(DUMPS / name)
    case, ck = manifest["case"], manifest["checkpoint"]
    tts = engines(ck["preset"], ck["model_type"])
    request = dict(
        language=case["language"],
        text_streaming=not case["non_streaming"],
        greedy=True,
        max_frames=case["max_new_tokens"] - 1,
    )
    result = tts.synthesize(case["text"], ref_audio=str(recording(case["ref_audio"])), xvector_only=True, **request)
    assert np.array_equal(result.codes, arrays["codes"])
    assert result.stopped_by == ["eos" if manifest["stopped_by"] == "eos" else "max_frames"]
    assert float(np.abs(result.audio - arrays["waveform"]).max()) <= 1e-4
    voice = tts.enroll(recording(case["ref_audio"]))
    again = tts.synthesize(case["text"], voice=voice, **request)
    assert np.array_equal(again.codes, arrays["codes"])


def test_voice_file_round_trips(engines, tmp_path):
    tts = engines()
    voice = tts.enroll(recording("en_24k"), ref_text=goldens.RECORDINGS["en_24k"].text)
    voice.ref_codes = np.arange(5 * 16, dtype=np.int32).reshape(5, 16)  # as the codec encoder would give
    path = voice.save(tmp_path / "me.voice")
    back = Voice.load(path)
    assert np.array_equal(back.x_vector, voice.x_vector) and back.x_vector.dtype == np.float32
    assert back.model == voice.model == tts.model_fingerprint
    assert back.ref_text == voice.ref_text and np.array_equal(back.ref_codes, voice.ref_codes)
    assert abs(back.ref_seconds - 4.70) < 0.01 and back.has_icl
    plain = Voice.load(tts.enroll(recording("en_16k")).save(tmp_path / "plain.voice"))
    assert plain.ref_text is None and plain.ref_codes is None and not plain.has_icl
    assert not list(tmp_path.glob("*.part"))


def test_a_voice_for_another_model_is_refused(engines, tmp_path):
    proj = engines("tiny-proj").enroll(recording("en_24k"))
    with pytest.raises(
        ValueError, match="made for a base model of hidden size 96, this is a base model of hidden size 64"
    ):
        engines().synthesize("Hello.", voice=proj, max_frames=2)
    other_seed = Voice.load(engines("tiny", "base", 1).enroll(recording("en_24k")).save(tmp_path / "seed1.voice"))
    with pytest.raises(ValueError, match="another speaker encoder"):
        engines().synthesize("Hello.", voice=other_seed, max_frames=2)


def test_a_non_base_model_does_not_clone(engines):
    tts = engines("tiny", "custom_voice")
    with pytest.raises(ValueError, match="voice cloning needs a Base model; this is a custom_voice model"):
        tts.enroll(recording("en_24k"))
    with pytest.raises(ValueError, match="needs a Base model"):
        tts.synthesize("Hello.", ref_audio=str(recording("en_24k")))


def test_icl_needs_the_codec_encoder_and_is_a_clear_error_without_it(engines, monkeypatch):
    tts = engines()
    text = goldens.RECORDINGS["en_24k"].text
    assert tts.has_codec_encoder  # kazetts convert writes it into Base mmproj files
    voice = tts.enroll(recording("en_24k"), ref_text=text)
    assert voice.ref_codes is not None and voice.ref_codes.shape[1] == 16 and voice.ref_text == text
    icl = tts.synthesize("Hello.", voice=voice, greedy=True, max_frames=3)
    xvec = tts.synthesize("Hello.", voice=voice, xvector_only=True, greedy=True, max_frames=3)
    assert len(icl.codes) >= 1 and len(xvec.codes) >= 1
    # an mmproj from llama.cpp's converter has no kazetts.enc.* tensors: x-vector cloning only
    monkeypatch.setattr(
        tts, "mmproj_tensors", frozenset(n for n in tts.mmproj_tensors if not n.startswith("kazetts.enc."))
    )
    assert not tts.has_codec_encoder
    for request in (
        dict(ref_audio=str(recording("en_24k")), ref_text=text),  # ICL by default with a text
        dict(ref_audio=str(recording("en_24k")), ref_text=text, xvector_only=False),
        dict(voice=tts.enroll(recording("en_24k"), ref_text=text)),
    ):
        with pytest.raises(ValueError, match="no codec encoder .* use xvector_only=True"):
            tts.synthesize("Hello.", max_frames=2, **request)
    assert NO_CODEC_ENCODER.startswith("this mmproj has no codec encoder")
    with pytest.raises(ValueError, match="needs ref_text"):
        tts.synthesize("Hello.", ref_audio=str(recording("en_24k")), xvector_only=False, max_frames=2)
    r = tts.synthesize(
        "Hello.", ref_audio=str(recording("en_24k")), ref_text=text, xvector_only=True, greedy=True, max_frames=3
    )
    assert len(r.codes) >= 1


@pytest.mark.parametrize(
    "request_, message",
    [
        (dict(voice="me.voice"), "voice must be a kazetts.Voice"),
        (dict(ref_text="words"), "a voice= or ref_audio= to clone"),
        (dict(xvector_only=True), "a voice= or ref_audio= to clone"),
        (dict(ref_audio="a.wav", speaker="vivian"), "replaces speaker= and xvector="),
        (dict(ref_audio="a.wav", xvector=np.zeros(64, np.float32)), "replaces speaker="),
    ],
)
def test_conflicting_clone_requests_are_refused(engines, request_, message):
    with pytest.raises(ValueError, match=message):
        engines().synthesize("Hello.", max_frames=2, **request_)


def test_voice_and_ref_audio_together_are_refused(engines):
    tts = engines()
    voice = tts.enroll(recording("en_24k"))
    with pytest.raises(ValueError, match="either a voice or a ref_audio"):
        tts.synthesize("Hello.", voice=voice, ref_audio=str(recording("en_24k")))
    with pytest.raises(ValueError, match="carries its own ref_text"):
        tts.synthesize("Hello.", voice=voice, ref_text="words")


def test_edge_references_give_a_voice_or_a_clear_error(engines, tmp_path):
    """Stereo, 8 kHz and 96 kHz files enroll (the reference's resampling); silent, empty and
    too short ones do not, with the argument named; 60 s is taken."""
    tts = engines()
    speech, sr = soundfile.read(str(recording("en_24k")), dtype="float32")
    base = tts.enroll((speech, sr)).x_vector
    stereo = tmp_path / "stereo.wav"
    soundfile.write(stereo, np.stack([speech, speech], axis=1), sr, subtype="FLOAT")
    assert np.array_equal(tts.enroll(stereo).x_vector, base)
    import soxr

    for rate in (8000, 96000):
        path = tmp_path / f"r{rate}.wav"
        soundfile.write(path, soxr.resample(speech, sr, rate), rate, subtype="FLOAT")
        x = tts.enroll(path).x_vector
        cos = float(x @ base / np.linalg.norm(x) / np.linalg.norm(base))
        assert np.isfinite(x).all() and cos > 0.9, (rate, cos)
    long = np.tile(speech, int(np.ceil(60 * sr / len(speech))))[: 60 * sr]
    timings: dict = {}
    assert np.isfinite(tts.enroll((long, sr), timings=timings).x_vector).all()
    assert set(timings) == {"audio", "mel", "speaker_encoder"}
    with pytest.warns(RuntimeWarning, match="only 0.10 s"):
        tts.enroll((speech[: sr // 10], sr))
    for audio, message in (
        (np.zeros(sr, np.float32), "silent"),
        (np.zeros(0, np.float32), "empty"),
        (speech[:1000], "needs at least 53 ms"),
    ):
        with pytest.raises(ValueError, match=f"ref_audio: .*{message}"):
            tts.enroll((audio, sr))
    with pytest.raises(ValueError, match="ref_text is empty"):
        tts.enroll((speech, sr), ref_text="  ")


def test_edge_references_clone_in_icl_mode_too(engines, tmp_path):
    """With a transcript the edge recordings go through the codec encoder as well: stereo gives
    the codes of its mono mix; 8 and 96 kHz files, 0.1 s and 60 s give ceil(samples / 1920)
    frames of valid codes at 24 kHz, and ICL speaks from the shortest (a 60 s ICL prompt only
    costs time: 750 reference frames through the talker and the codec)."""
    import soxr

    tts = engines()
    text = goldens.RECORDINGS["en_24k"].text
    speech, sr = soundfile.read(str(recording("en_24k")), dtype="float32")
    assert sr == 24000
    stereo = tmp_path / "stereo.wav"
    soundfile.write(stereo, np.stack([speech, speech], axis=1), sr, subtype="FLOAT")
    assert np.array_equal(
        tts.enroll(stereo, ref_text=text).ref_codes, tts.enroll((speech, sr), ref_text=text).ref_codes
    )
    cases = []
    for rate in (8000, 96000):
        path = tmp_path / f"r{rate}.wav"
        resampled = soxr.resample(speech, sr, rate)
        soundfile.write(path, resampled, rate, subtype="FLOAT")
        cases.append((path, -(-len(resampled) * 24000 // rate)))
    cases += [((speech[: sr // 10], sr), sr // 10), ((np.tile(speech, 13)[: 60 * sr], sr), 60 * sr)]
    for source, samples in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the 0.1 s one warns (tested above)
            voice = tts.enroll(source, ref_text=text)
        assert voice.ref_codes.shape == (-(-samples // 1920), 16), (samples, voice.ref_codes.shape)
        assert voice.ref_codes.min() >= 0 and voice.ref_codes.max() < 2048 and np.isfinite(voice.x_vector).all()
        if samples == sr // 10:
            r = tts.synthesize("Hello.", voice=voice, greedy=True, max_frames=2)
            assert len(r.codes) >= 1 and np.isfinite(r.audio).all() and len(r.audio) == 1920 * len(r.codes)


def test_ref_silence_is_the_reference_with_zeros_appended_by_hand(engines, tmp_path):
    """ref_silence=0.5 gives exactly the voice of the 24 kHz reference with 12000 zeros appended
    (x-vector and ICL codes), for a 24 kHz array and for a file the reference resamples; the voice
    file keeps how it was made; synthesize(ref_audio=, ref_silence=) is that voice."""
    from kazetts.stages.audio_input import reference_audio

    tts = engines()
    text = goldens.RECORDINGS["en_24k"].text
    zeros = np.zeros(12000, np.float32)
    for source in (soundfile.read(str(recording("en_24k")), dtype="float32"), recording("en_16k")):
        at_24k = reference_audio(source, tts.speaker_encoder.min_samples)
        by_hand = tts.enroll((np.concatenate([at_24k, zeros]), 24000), ref_text=text)
        voice = tts.enroll(source, ref_text=text, ref_silence=0.5)
        assert np.array_equal(voice.x_vector, by_hand.x_vector)
        assert np.array_equal(voice.ref_codes, by_hand.ref_codes)
        assert len(voice.ref_codes) == -(-(len(at_24k) + 12000) // 1920)
        assert voice.ref_silence == 0.5 and voice.ref_seconds == len(at_24k) / 24000
    plain = tts.enroll(recording("en_16k"), ref_text=text)
    assert plain.ref_silence == 0.0 and not np.array_equal(plain.x_vector, voice.x_vector)
    back = Voice.load(voice.save(tmp_path / "silence.voice"))
    assert back.ref_silence == 0.5 and back.ref_seconds == pytest.approx(voice.ref_seconds)
    assert Voice.load(plain.save(tmp_path / "plain.voice")).ref_silence == 0.0
    request = dict(greedy=True, max_frames=4)
    direct = tts.synthesize("Hello.", ref_audio=str(recording("en_16k")), ref_text=text, ref_silence=0.5, **request)
    assert np.array_equal(direct.codes, tts.synthesize("Hello.", voice=back, **request).codes)


@pytest.mark.parametrize("value", [-0.1, 2.5, float("nan"), float("inf"), "0.5", True, None])
def test_ref_silence_out_of_range_is_refused(engines, value):
    tts = engines()
    with pytest.raises(ValueError, match=r"ref_silence must be a number of seconds in 0\.\.2"):
        tts.enroll(recording("en_24k"), ref_silence=value)
    with pytest.raises(ValueError, match="ref_silence must be"):
        tts.synthesize("Hello.", ref_audio=str(recording("en_24k")), ref_silence=value, max_frames=2)


def test_ref_silence_goes_with_a_ref_audio_only(engines):
    tts = engines()
    voice = tts.enroll(recording("en_24k"))
    for request in (dict(voice=voice), dict(xvector=voice.x_vector)):
        with pytest.raises(ValueError, match="ref_silence is appended to a ref_audio"):
            tts.synthesize("Hello.", ref_silence=0.5, max_frames=2, **request)


@pytest.mark.parametrize(
    "content, message",
    [
        (b"not a gguf at all", "not a kazetts voice file"),
        (None, "not a kazetts voice file \\(a 'qwen3tts' GGUF\\)"),
    ],
)
def test_a_file_that_is_not_a_voice_is_refused(tmp_path, tiny_gguf, content, message):
    path = tiny_gguf("tiny", "base", "f32")[0] if content is None else tmp_path / "x.voice"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        Voice.load(path)
    with pytest.raises(FileNotFoundError, match="voice file not found"):
        Voice.load(tmp_path / "missing.voice")


def test_fingerprint_check_names_what_differs():
    a = ModelFingerprint("base", 1024, "a" * 64)
    a.check(ModelFingerprint("base", 1024, "a" * 64))
    with pytest.raises(ValueError, match="hidden size 2048, this is a base model of hidden size 1024"):
        a.check(ModelFingerprint("base", 2048, "a" * 64))


# -- the seal and damaged files ---------------------------------------------------------------------


def _whole_voice(ref_silence: float = 0.0) -> Voice:
    """A voice with every part (x-vector, codes, text), made without a model."""
    rng = np.random.default_rng(0)
    return Voice(
        x_vector=rng.standard_normal(64).astype(np.float32),
        model=ModelFingerprint("base", 64, "c" * 64),
        ref_text="Une phrase de référence.",
        ref_codes=rng.integers(0, 2048, (5, 16), dtype=np.int32),
        ref_seconds=0.4,
        ref_silence=ref_silence,
    )


def _sealed_voice(tmp_path) -> pathlib.Path:
    return _whole_voice().save(tmp_path / "sealed.voice")


def _flip_in(path: pathlib.Path, needle: bytes, out: pathlib.Path) -> pathlib.Path:
    data = bytearray(path.read_bytes())
    at = data.index(needle)
    data[at] ^= 0x01
    out.write_bytes(bytes(data))
    return out


def test_a_changed_byte_in_a_voice_file_is_refused(tmp_path):
    path = _sealed_voice(tmp_path)
    voice = Voice.load(path)
    x_vector = voice.x_vector.astype("<f4").tobytes()[:8]
    codes = voice.ref_codes.astype("<i4").tobytes()[:8]
    for name, needle in [("x-vector", x_vector), ("codes", codes), ("text", "référence".encode())]:
        damaged = _flip_in(path, needle, tmp_path / f"{name}.voice")
        with pytest.raises(ValueError, match="is damaged: its content does not match its digest") as error:
            Voice.load(damaged)
        assert str(damaged) in str(error.value), name


def test_a_voice_file_of_format_1_loads_with_a_warning_and_a_seal_is_always_checked(tmp_path):
    from kazetts.validation.gguf_edit import UINT32, GGUFLayout

    path = _sealed_voice(tmp_path)
    unsealed = GGUFLayout.read(path)
    unsealed.set_kv("kazetts.voice.format_version", UINT32, 1)
    unsealed.drop("kazetts.voice.payload_sha256")
    old = unsealed.write(tmp_path / "old.voice")
    with pytest.warns(UserWarning, match="before voice files were sealed"):
        assert Voice.load(old).payload_sha256() == Voice.load(path).payload_sha256()
    downgraded = GGUFLayout.read(_flip_in(path, "référence".encode(), tmp_path / "damaged.voice"))
    downgraded.set_kv("kazetts.voice.format_version", UINT32, 1)  # a damaged byte in the version, too
    with pytest.raises(ValueError, match="does not match its digest"):
        Voice.load(downgraded.write(tmp_path / "downgraded.voice"))


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda L: L.set_tensor("ref_codes", [16, 5], 0), "ref_codes is stored as F32, a voice file holds it as I32"),
        (lambda L: L.set_tensor("ref_codes", [570], 26), "ref_codes has 570 values, not whole frames of 16 codes"),
        (lambda L: L.set_tensor("x_vector", [65], 0), "x_vector has 65 values, the file says hidden size 64"),
        (lambda L: L.drop("x_vector"), "the voice file has no x_vector"),
        (lambda L: L.set_kv("kazetts.voice.ref_text", 6, 0.5), "ref_text is damaged"),
        (lambda L: L.set_kv("kazetts.voice.ref_seconds", 6, float("nan")), "ref_seconds is damaged"),
    ],
)
def test_a_damaged_voice_file_says_what_is_wrong(tmp_path, edit, message):
    from kazetts.validation.gguf_edit import GGUFLayout

    layout = GGUFLayout.read(_sealed_voice(tmp_path))
    edit(layout)
    path = layout.write(tmp_path / "damaged.voice")
    with pytest.raises(ValueError, match=message) as error:
        Voice.load(path)
    assert str(path) in str(error.value)


def test_a_truncated_or_garbled_voice_file_is_one_clear_error(tmp_path):
    data = _sealed_voice(tmp_path).read_bytes()
    for cut in (10, 40, 200, len(data) - 7):
        path = tmp_path / f"cut-{cut}.voice"
        path.write_bytes(data[:cut])
        with pytest.raises(ValueError) as error:
            Voice.load(path)
        assert str(path) in str(error.value) and "\n" not in str(error.value)


def test_fingerprints_that_share_a_prefix_are_shown_apart():
    ours, theirs = (
        ModelFingerprint("base", 64, "9c11225a0971" + "a" * 52),
        ModelFingerprint("base", 64, "9c11225a0971" + "b" * 52),
    )
    with pytest.raises(ValueError) as error:
        ours.check(theirs)
    assert "9c11225a0971bbbb" in str(error.value) and "9c11225a0971aaaa" in str(error.value)


def test_a_voice_too_long_for_the_context_says_so(engines):
    tts = engines("tiny", "base")
    rng = np.random.default_rng(1)
    voice = Voice(
        x_vector=rng.standard_normal(tts.talker.file.hidden_size).astype(np.float32),
        model=tts.model_fingerprint,
        ref_text="A reference.",
        ref_codes=rng.integers(0, 1024, (5000, 16), dtype=np.int32),
        ref_seconds=400.0,
    )
    with pytest.raises(
        ValueError, match=r"the voice's reference is 5000 frames \(400.0 s\).*enroll a shorter reference"
    ):
        tts.synthesize("Hello.", voice=voice, max_frames=2)


# -- one reader and writer (libkazetts' kazetts/voice.h) ----------------------------------------


def _documented_seal(voice: Voice) -> str:
    """docs/voices.md's seal, stated with hashlib: what files of every release carry."""
    import hashlib

    h = hashlib.sha256(b"kazetts.voice/2\0")
    for text in (voice.model.model_type, str(voice.model.hidden_size), voice.model.speaker_encoder_sha256):
        h.update(text.encode() + b"\0")
    h.update(np.array([voice.ref_seconds, voice.ref_silence], dtype="<f4").tobytes())
    h.update((voice.ref_text or "").encode() + b"\0")
    h.update(voice.x_vector.astype("<f4").tobytes())
    if voice.ref_codes is not None:
        h.update(voice.ref_codes.astype("<i4").tobytes())
    return h.hexdigest()


def test_the_native_seal_is_the_documented_one(tmp_path):
    voice = Voice.load(_sealed_voice(tmp_path))
    assert voice.payload_sha256() == _documented_seal(voice)
    bare = Voice(x_vector=voice.x_vector, model=voice.model, ref_silence=0.5)  # no text, no codes
    assert bare.payload_sha256() == _documented_seal(bare) != voice.payload_sha256()


def test_a_voice_file_written_by_the_gguf_package_loads(tmp_path):
    """Files of earlier releases (written by the gguf package) read the same with libkazetts' reader."""
    import gguf

    voice = _whole_voice(ref_silence=0.5)
    w = gguf.GGUFWriter(tmp_path / "old.voice", "kazetts.voice")
    w.add_uint32("kazetts.voice.format_version", 2)
    w.add_string("kazetts.voice.model_type", "base")
    w.add_uint32("kazetts.voice.hidden_size", 64)
    w.add_string("kazetts.voice.speaker_encoder_sha256", "c" * 64)
    w.add_float32("kazetts.voice.ref_seconds", 0.4)
    w.add_float32("kazetts.voice.ref_silence", 0.5)
    w.add_string("kazetts.voice.ref_text", voice.ref_text)
    w.add_string("kazetts.voice.payload_sha256", _documented_seal(voice))
    w.add_tensor("x_vector", voice.x_vector)
    w.add_tensor("ref_codes", voice.ref_codes)
    w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file(), w.close()
    loaded = Voice.load(tmp_path / "old.voice")
    assert (loaded.model, loaded.ref_text, loaded.ref_silence) == (voice.model, voice.ref_text, 0.5)
    assert np.array_equal(loaded.x_vector, voice.x_vector) and np.array_equal(loaded.ref_codes, voice.ref_codes)
    reader = gguf.GGUFReader(voice.save(tmp_path / "new.voice"))  # and the gguf package reads ours
    assert reader.fields["kazetts.voice.payload_sha256"].contents() == _documented_seal(voice)


def test_kz_voice_save_never_leaves_a_partial_or_clobbered_file(tmp_path):
    import ctypes

    from kazetts import native
    from kazetts.engine.voice import NativeVoice

    lib = native.bind(
        {
            "kz_voice_save": (
                ctypes.c_int,
                [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t],
            )
        }
    )
    target = tmp_path / "app.voice"
    target.write_bytes(b"an app's older voice")
    err = native.error_buffer()
    with NativeVoice.read(_sealed_voice(tmp_path)) as v:
        assert lib.kz_voice_save(v._handle, str(target).encode(), 0, err, len(err)) == 2
        assert b"exists; it was left as it was" in err.value and target.read_bytes() == b"an app's older voice"
        assert lib.kz_voice_save(v._handle, str(target).encode(), 1, err, len(err)) == 0
        assert lib.kz_voice_save(v._handle, str(tmp_path / "new.voice").encode(), 0, err, len(err)) == 0
        assert lib.kz_voice_save(v._handle, str(tmp_path / "no" / "dir.voice").encode(), 1, err, len(err)) == 2
    assert Voice.load(target).payload_sha256() == Voice.load(tmp_path / "new.voice").payload_sha256()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.voice", "new.voice", "sealed.voice"]
