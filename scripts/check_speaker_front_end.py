#!/usr/bin/env python3
"""kazetts' torch-free cloning front end beside the reference's own functions (reference env).

Prints one JSON object of figures (tests/test_speaker_encoder.py asserts them):
  filterbank_identical       kazetts.validation.oracles.mel.mel_filterbank == librosa.filters.mel, bit for bit
  mel_max_abs_diff           the log-mel's numpy statement (kazetts.validation.oracles.mel, which
                             tests/test_native_enroll.py holds bit for bit to libkazetts' log-mel; this
                             environment has no libkazetts) vs the reference's mel_spectrogram, per length
  resample_identical         kazetts resample vs librosa.resample (soxr_hq), per source rate
  load_identical             read_audio + to_mono vs Qwen3TTSModel._load_audio_to_np, per file
  stereo_array_reference     what the reference does with a stereo (array, sr) input

    .venv-ref/bin/python scripts/check_speaker_front_end.py TMP_DIR
"""

from __future__ import annotations

import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import librosa  # noqa: E402
import numpy as np  # noqa: E402
import soundfile  # noqa: E402
import torch  # noqa: E402

from kazetts.stages import audio_input, mel  # noqa: E402
from kazetts.validation.oracles import mel as mel_oracle  # noqa: E402
from kazetts.validation.reference import load_reference  # noqa: E402


def main(tmp: pathlib.Path) -> dict:
    ref = load_reference()
    from qwen_tts.inference.qwen3_tts_model import Qwen3TTSModel

    wrapper = object.__new__(Qwen3TTSModel)  # its audio helpers use no model state
    rng = np.random.default_rng(0)
    out: dict = {
        "filterbank_identical": bool(
            np.array_equal(
                librosa.filters.mel(sr=24000, n_fft=1024, n_mels=128, fmin=0, fmax=12000), mel_oracle.mel_filterbank()
            )
        )
    }
    out["mel_max_abs_diff"] = {}
    for n in (1280, 2400, 24000 * 5 + 77):
        y = (0.1 * rng.standard_normal(n)).astype(np.float32)
        want = ref.modeling.mel_spectrogram(
            torch.from_numpy(y)[None],
            n_fft=1024,
            num_mels=128,
            sampling_rate=24000,
            hop_size=256,
            win_size=1024,
            fmin=0,
            fmax=12000,
        )[0].T.numpy()
        out["mel_max_abs_diff"][n] = (
            float(np.abs(mel_oracle.log_mel(y) - want).max()) if want.shape == (mel.n_frames(n), 128) else None
        )
    out["resample_identical"] = {}
    for sr in (8000, 16000, 22050, 44100, 48000, 96000):
        y = (0.1 * rng.standard_normal(sr + 123)).astype(np.float32)
        want = librosa.resample(y, orig_sr=sr, target_sr=24000)
        got = audio_input.resample(y, sr)
        out["resample_identical"][sr] = bool(got.dtype == want.dtype and np.array_equal(got, want))
    out["load_identical"] = {}
    stereo = (0.1 * rng.standard_normal((30000, 2))).astype(np.float32)
    for name, subtype in (("stereo.wav", "PCM_16"), ("stereo.flac", "PCM_24"), ("mono.ogg", "VORBIS")):
        path = tmp / name
        soundfile.write(str(path), stereo[:, 0] if name.startswith("mono") else stereo, 16000, subtype=subtype)
        want, want_sr = wrapper._load_audio_to_np(str(path))
        got, got_sr = audio_input.read_audio(path)
        out["load_identical"][name] = bool(got_sr == want_sr and np.array_equal(audio_input.to_mono(got), want))
    try:
        wrapper._normalize_audio_inputs([(stereo, 16000)])
        out["stereo_array_reference"] = "accepted"
    except Exception as e:  # noqa: BLE001 - what the reference raises is the figure
        out["stereo_array_reference"] = f"{type(e).__name__}: {e}"
    return out


if __name__ == "__main__":
    print(json.dumps(main(pathlib.Path(sys.argv[1]))))
