#!/usr/bin/env python3
"""Host side of the native golden check (native/tests/golden_check): per golden case, the
GGUF files it needs and a plain "key value" case file, so the program under qemu needs no
Python, no JSON and no tokenizer.

    python scripts/aarch64_prepare.py OUT_DIR [DUMPS_DIR]   # prints the case files it wrote

The tiny checkpoints are rebuilt from their presets (and checked against the sha256 the goldens
recorded), then converted to F32 GGUF; the long case also gets F16 and Q8_0 files for the
quantized code predictor gates, and Q8_0 and Q4_0 talkers for the check that ggml repacks them
on ARM. The expected code predictor embedding sums (the talker's next input minus its text row)
are computed here with numpy: the text rows are prompt data, not kernels, so this keeps the
prompt builder out of the C++ check.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from kazetts.validation import goldens  # noqa: E402
from kazetts.tools.convert import convert_checkpoint  # noqa: E402
from kazetts.tools.quantize import quantize_file  # noqa: E402
from kazetts.stages.prompt import build_prompt  # noqa: E402
from kazetts.synthetic.checkpoint import make_checkpoint  # noqa: E402
from kazetts.stages.talker_file import TalkerFile  # noqa: E402

LONG_CASE = "long_window"  # as in tests/test_code_predictor.py's quantized test
ENROLL_CASE = "clone_xvec_16k"  # a Base case: native enrollment of the 16 kHz recording (check_enroll.cpp)
ENROLL_RECORDING = "en_16k"
# check_enroll's bounds on aarch64 against x86-64's values (both 0 on x86-64, tests/test_native_enroll.py).
# Measured under qemu (cortex-a76, GCC 12 cross): the resampled 16 kHz recording within 1.6e-7 of
# python-soxr's (GCC fuses libsoxr's multiply-adds on aarch64, and its FFT is pffft on NEON, not
# SSE), the log-mel of the same 24 kHz audio identical; the voice's codes identical all the same.
ENROLL_GATES = {"enroll_resample_max_abs": 1e-6, "enroll_log_mel_max_abs": 0.0}
REPO = pathlib.Path(__file__).resolve().parents[1]


def checkpoint(out: pathlib.Path, ck: dict) -> pathlib.Path:
    """The tiny checkpoint a golden was dumped from, built once and checked by digest."""
    path = out / "checkpoints" / f"{ck['preset']}-{ck['model_type']}-{ck['seed']}"
    if not (path / "speech_tokenizer" / "model.safetensors").exists():
        make_checkpoint(ck["preset"], path, ck["model_type"], ck["seed"])
    if goldens.checkpoint_digests(path) != ck["sha256"]:
        raise SystemExit(f"{path} differs from the checkpoint the goldens were dumped from")
    return path


def converted(out: pathlib.Path, ck_path: pathlib.Path, out_type: str) -> tuple[pathlib.Path, pathlib.Path]:
    """(talker, mmproj) GGUF files of a checkpoint, converted once."""
    target = out / "models" / ck_path.name
    talker, mmproj = (target / f"{ck_path.name}-{part}-{out_type}.gguf" for part in ("talker", "mmproj"))
    if not (talker.exists() and mmproj.exists()):
        return convert_checkpoint(ck_path, target, out_type, verbose=False)
    return talker, mmproj


def talker_q4_0(talker_f32: pathlib.Path) -> pathlib.Path:
    """The Q4_0 talker (for the check that ggml repacks its matrices on ARM), quantized once."""
    path = talker_f32.with_name(talker_f32.name.replace("-f32.gguf", "-q4_0.gguf"))
    if not path.exists():
        quantize_file(talker_f32, path, "q4_0")
    return path


def embedding_sums(manifest: dict, arrays: dict, talker: pathlib.Path) -> np.ndarray:
    """talker_inputs[f] - text row of step f: what the code predictor's embedding sum must be."""
    case = manifest["case"]
    tf = TalkerFile(talker)
    prompt = build_prompt(
        tf,
        arrays["text_ids"].tolist(),
        language=case["language"],
        speaker=case["speaker"],
        instruct_ids=arrays["instruct_ids"].tolist() if "instruct_ids" in arrays else None,
        speaker_embedding=arrays.get("xvector"),
        text_streaming=not case["non_streaming"],
    )
    n = min(arrays["codes"].shape[0], arrays["talker_inputs"].shape[0])
    return np.stack([arrays["talker_inputs"][f] - prompt.text_row(f) for f in range(n)]).astype(np.float32)


def prepare_case(out: pathlib.Path, case_dir: pathlib.Path) -> pathlib.Path:
    manifest, arrays = goldens.load_case(case_dir)
    ck_path = checkpoint(out, manifest["checkpoint"])
    talker, mmproj = converted(out, ck_path, "f32")
    expected = out / "cases" / case_dir.name
    expected.mkdir(parents=True, exist_ok=True)
    np.save(expected / "cp_embedding_sum.npy", embedding_sums(manifest, arrays, talker))
    lines = {
        "name": case_dir.name,
        "golden": case_dir.resolve(),
        "talker": talker.resolve(),
        "mmproj": mmproj.resolve(),
        "codec_eos": manifest["codec_eos_token_id"],
        "stops_at_eos": int(manifest["stopped_by"] == "eos"),
        "expected": expected.resolve(),
        **{f"gate.{name}": repr(value) for name, value in goldens.GATES.items()},
    }
    case = manifest["case"]  # the request itself, for the native engine's check
    lines.update(
        {
            "text": case["text"],
            "language": case["language"],
            "speaker": case["speaker"] or "",
            "instruct": case["instruct"] or "",
            "text_streaming": int(not case["non_streaming"]),
            "max_frames": case["max_new_tokens"] - 1,
        }
    )
    if case_dir.name == ENROLL_CASE:
        lines.update(enroll_inputs(out / "enroll", talker, mmproj))
    if case_dir.name == LONG_CASE:
        for out_type in ("f16", "q8_0"):
            lines[f"mmproj_{out_type}"] = converted(out, ck_path, out_type)[1].resolve()
        lines["talker_q8_0"] = converted(out, ck_path, "q8_0")[0].resolve()
        lines["talker_q4_0"] = talker_q4_0(talker).resolve()
    case_file = out / "cases" / f"{case_dir.name}.txt"
    case_file.write_text("".join(f"{k} {v}\n" for k, v in lines.items()))
    return case_file


def enroll_inputs(out: pathlib.Path, talker: pathlib.Path, mmproj: pathlib.Path) -> dict:
    """The recording and what this host's Python engine makes of it: the 24 kHz audio
    (python-soxr), its log-mel and the ICL voice's x-vector and reference codes."""
    import soundfile

    from kazetts.engine.tts import TTS
    from kazetts.stages import audio_input, mel

    recording = goldens.RECORDINGS[ENROLL_RECORDING]
    pcm, rate = soundfile.read(goldens.recording_path(REPO / "dumps", ENROLL_RECORDING), dtype="float32")
    resampled = audio_input.resample(pcm, rate)
    voice = TTS(talker, mmproj, threads=2).enroll((pcm, rate), recording.text)
    out.mkdir(parents=True, exist_ok=True)
    for name, array in [
        ("pcm", pcm),
        ("resampled", resampled),
        ("log_mel", mel.log_mel(resampled)),
        ("xvector", voice.x_vector.astype(np.float32)),
        ("ref_codes", voice.ref_codes.astype(np.int32)),
    ]:
        np.save(out / f"{name}.npy", array)
    gates = {f"gate.{name}": repr(value) for name, value in ENROLL_GATES.items()}
    return {"enroll": out.resolve(), "enroll_rate": rate, "enroll_text": recording.text, **gates}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=pathlib.Path)
    parser.add_argument("dumps", type=pathlib.Path, nargs="?", default=REPO / "dumps")
    args = parser.parse_args(argv)
    cases = sorted(p.parent for p in args.dumps.glob("*/manifest.json"))
    if not cases:
        raise SystemExit(f"no golden cases under {args.dumps}")
    for case_dir in cases:
        print(prepare_case(args.out_dir, case_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
