"""`kazetts validate MODEL_DIR DUMPS_DIR`: every stage of kazetts against reference goldens.

For each golden case (a `dumps/<case>/` directory written by scripts/dump_goldens.py from the
checkpoint the GGUF files were converted from) it checks, stage by stage:
  tokens      llama.cpp's tokenizer vs the reference's ids
  speaker     cloning cases: the x-vector of the committed recording (audio front end, log-mel,
              speaker encoder) vs the reference's (max abs diff relative to its largest value)
  prompt      talker prefill embeddings (max abs diff)
  talker      teacher-forced: CB0 identical, hidden state and logit cosines
  predictor   CB1..15 from the golden talker states, logit cosines of the first frames
  codec       intermediates and waveform from the golden codes (max abs diff)
  end-to-end  greedy synthesis (cloning cases: from the recording itself): all 16 codes per
              frame, end-of-speech frame, waveform
and prints one line per stage with its figures; where codes differ it prints the logit margin
(a near tie on random weights is float noise, not a bug). Gates are for F32 files; quantized
files are reported with the same figures and judged by the looser cosine gates below.
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass

import numpy as np

from kazetts.gguf import names as N
from kazetts.gguf.header import GGUFHeader
from kazetts.validation import goldens
from kazetts.stages.audio_input import reference_audio
from kazetts.stages.prompt import build_icl_prompt, build_prompt, chat_text, instruct_text, ref_chat_text
from kazetts.stages.sampling import SamplerConfig, TalkerSampler
from kazetts.validation.oracles.sampling import margin
from kazetts.engine.talker_loop import TeacherForcing, run_talker
from kazetts.engine.tts import reference_cut

F32_GATES = {
    name: goldens.GATES[f"{name}_{kind}"]
    for name, kind in (("prompt", "max_abs"), ("cosine", "min"), ("codec", "max_abs"), ("xvector", "max_rel"))
}
QUANTIZED_GATES = {
    name: goldens.GATES[f"quantized_{name}_{kind}"]
    for name, kind in (("prompt", "max_abs"), ("cosine", "min"), ("codec", "max_abs"), ("xvector", "max_rel"))
}


@dataclass
class Check:
    case: str
    stage: str
    passed: bool
    detail: str


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity in float64."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(-1) / np.maximum(np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1), 1e-30)


def case_dirs(dumps: pathlib.Path) -> list[pathlib.Path]:
    dumps = pathlib.Path(dumps)
    if (dumps / "manifest.json").is_file():
        return [dumps]
    dirs = sorted(p.parent for p in dumps.glob("*/manifest.json"))
    if not dirs:
        raise ValueError(f"no golden case (manifest.json) under {dumps}")
    return dirs


def golden_dirs(dumps: pathlib.Path) -> list[tuple[pathlib.Path, bool]]:
    """(case directory, is a voice-clone case) for a dumps directory, its clone/ directory or one case."""
    dumps = pathlib.Path(dumps)
    clone = dumps.name == goldens.CLONE_DIR or dumps.parent.name == goldens.CLONE_DIR
    if clone:
        return [(d, True) for d in case_dirs(dumps)]
    clones = sorted(p.parent for p in (dumps / goldens.CLONE_DIR).glob("*/manifest.json"))
    return [(d, False) for d in case_dirs(dumps)] + [(d, True) for d in clones]


def skip_reason(tts, case_dir: pathlib.Path) -> str:
    """Why a golden case cannot be checked against this model ("" when it can)."""
    manifest, arrays = goldens.load_case(case_dir)
    talker_keys = GGUFHeader(tts.talker.file.path).kv
    for config, digest in manifest["checkpoint"]["sha256"].items():
        ours = talker_keys.get(N.K_SOURCE_SHA256 + config)
        if ours is not None and ours != digest:
            return f"dumped from a checkpoint with another {config}"
    model_type = manifest["checkpoint"]["model_type"]
    if model_type != tts.model_type:
        return f"dumped from a {model_type} model, this is {tts.model_type}"
    if arrays["prompt_embeds"].shape[1] != tts.talker.hidden_size:
        return (
            f"dumped from a model of hidden size {arrays['prompt_embeds'].shape[1]}, this is {tts.talker.hidden_size}"
        )
    ref_audio = manifest["case"].get("ref_audio")
    if ref_audio in goldens.RECORDINGS and not goldens.recording_path(case_dir.parent, ref_audio).is_file():
        return f"its recording {goldens.recording_path(case_dir.parent, ref_audio)} is missing"
    if ref_audio and manifest["case"].get("ref_text") and not tts.has_codec_encoder:
        return "an ICL case: this mmproj has no codec encoder"
    return ""


def _first_mismatch_margin(logits_rows: np.ndarray, got: np.ndarray, want: np.ndarray) -> str:
    bad = np.nonzero(got != want)[0]
    if not len(bad):
        return ""
    return f"; first mismatch at {bad[0]}: reference logit margin {margin(logits_rows[bad[0]]):.3g}"


def validate_case(tts, case_dir: pathlib.Path, quantized: bool) -> list[Check]:
    gates = QUANTIZED_GATES if quantized else F32_GATES
    manifest, a = goldens.load_case(case_dir)
    case, name, checks = manifest["case"], case_dir.name, []
    exact = not quantized and manifest["checkpoint"].get("dtype") == "float32"
    talker, voices = tts.talker, tts.voices

    ids = talker.tokenize(chat_text(case["text"]))
    instruct = talker.tokenize(instruct_text(case["instruct"])) if case["instruct"] else None
    same_ids = ids == a["text_ids"].tolist() and (instruct is None or instruct == a["instruct_ids"].tolist())
    checks.append(Check(name, "tokens", same_ids, f"{len(ids)} text ids {'identical' if same_ids else 'DIFFER'}"))

    clone = {}
    if case.get("ref_audio"):
        recording = str(goldens.recording_path(case_dir.parent, case["ref_audio"]))
        clone = dict(ref_audio=recording, xvector_only=not case.get("ref_text"))
        enc = tts.speaker_encoder
        xvec = enc.embed(reference_audio(recording, enc.min_samples))
        rel = (
            float(np.abs(xvec - a["xvector"]).max() / np.abs(a["xvector"]).max())
            if xvec.shape == a["xvector"].shape
            else np.inf
        )
        checks.append(
            Check(name, "speaker", rel <= gates["xvector"], f"x-vector of the recording, max relative diff {rel:.1e}")
        )

    prompt = build_prompt(
        talker.file,
        ids,
        language=case["language"],
        speaker=case["speaker"],
        instruct_ids=instruct,
        speaker_embedding=a.get("xvector"),
        text_streaming=not case["non_streaming"],
    )
    diff = (
        float(np.abs(prompt.prefill - a["prompt_embeds"]).max())
        if prompt.prefill.shape == a["prompt_embeds"].shape
        else np.inf
    )
    checks.append(
        Check(name, "prompt", diff <= gates["prompt"], f"{len(prompt.prefill)} rows, max abs diff {diff:.2e}")
    )

    sampler = TalkerSampler.for_talker(talker.file.codec_vocab_size, voices.codec_eos, SamplerConfig(greedy=True))
    teacher = TeacherForcing(a["codes"], tts.code_predictor.embed_codes)
    trace = run_talker(talker, prompt, sampler, teacher, manifest["talker_calls"] - 1)
    cb0 = np.array([c[0] for c in trace.codes])
    n = min(len(trace.hidden), len(a["talker_hidden"]))
    h_cos = cosine(trace.hidden[:n], a["talker_hidden"][:n]).min()
    l_cos = cosine(trace.logits[:n], a["talker_logits"][:n]).min()
    same = len(cb0) == manifest["frames"] and np.array_equal(cb0, a["codes"][:, 0])
    detail = (
        f"CB0 {int(np.sum(cb0[: manifest['frames']] == a['codes'][: len(cb0), 0]))}/{manifest['frames']} identical, "
        f"min cosine hidden {h_cos:.6f} logits {l_cos:.6f}"
    )
    if not same and len(cb0) and len(cb0) <= manifest["frames"]:
        detail += _first_mismatch_margin(a["talker_logits"], cb0, a["codes"][: len(cb0), 0])
    checks.append(Check(name, "talker", same and min(h_cos, l_cos) >= gates["cosine"], detail))

    n_cp = len(a["cp_logits"])
    rows, cp_cos = [], 1.0
    for f in range(manifest["frames"]):  # one prediction per frame; logits kept for the dumped frames
        codes, _, logits = tts.code_predictor.predict(a["talker_hidden"][f], int(a["codes"][f, 0]), return_logits=True)
        rows.append(codes)
        if f < n_cp:
            cp_cos = min(cp_cos, float(cosine(logits, a["cp_logits"][f]).min()))
    frames_same = int((np.stack(rows) == a["codes"][:, 1:]).all(axis=1).sum())
    detail = f"{frames_same}/{manifest['frames']} frames CB1..15 identical, min logit cosine {cp_cos:.6f}"
    checks.append(Check(name, "predictor", frames_same == manifest["frames"] and cp_cos >= gates["cosine"], detail))

    wave, inter = tts.codec.decode(a["codes"], intermediates=True)
    diffs = {key: float(np.abs(inter[key] - a[f"codec_{key}"]).max()) for key in inter}
    diffs["waveform"] = float(np.abs(wave - a["waveform"]).max())
    worst = max(diffs.values())
    # an F32 checkpoint in F32 files has every weight exact: its waveform gets the tight gate
    wave_gate = goldens.GATES["f32_checkpoint_waveform_max_abs"] if exact else gates["codec"]
    checks.append(
        Check(
            name,
            "codec",
            worst <= gates["codec"] and diffs["waveform"] <= wave_gate,
            ", ".join(f"{k} {v:.1e}" for k, v in diffs.items()),
        )
    )

    voice = clone or dict(xvector=a.get("xvector"))
    result = tts.synthesize(
        case["text"],
        speaker=case["speaker"],
        language=case["language"],
        instruct=case["instruct"],
        text_streaming=not case["non_streaming"],
        greedy=True,
        max_frames=case["max_new_tokens"] - 1,
        **voice,
    )
    codes_same = result.codes.shape == a["codes"].shape and np.array_equal(result.codes, a["codes"])
    stop_same = result.stopped_by == ["eos" if manifest["stopped_by"] == "eos" else "max_frames"]
    wave_diff = float(np.abs(result.audio - a["waveform"]).max()) if len(result.audio) == len(a["waveform"]) else np.inf
    frames_ok = int((result.codes[: len(a["codes"])] == a["codes"][: len(result.codes)]).all(axis=1).sum())
    checks.append(
        Check(
            name,
            "end-to-end",
            codes_same and stop_same and wave_diff <= wave_gate,
            f"{frames_ok}/{manifest['frames']} frames all 16 codes identical, stop "
            f"{'same' if stop_same else 'DIFFERS'}, waveform max abs diff {wave_diff:.1e}",
        )
    )
    return checks


# ---- voice cloning (dumps/clone/) ----------------------------------------------------------------


def rvq_margin(mmproj: str | pathlib.Path, downsampled: np.ndarray, want: np.ndarray, got: np.ndarray) -> str:
    """Where two code sets differ: the first differing (frame, codebook) and how close the two
    codebook rows are to the residual (float64, the reference's earlier codes): a relative gap of
    ~1e-6 is a float near-tie, not a bug. downsampled [hidden, F], codes [F, 16]."""
    bad = np.argwhere(want != got)
    if not len(bad):
        return ""
    t, q = (int(v) for v in bad[0])
    import gguf
    from gguf.quants import dequantize

    from kazetts.gguf import names as N

    tensors = {}
    for ten in gguf.GGUFReader(str(mmproj)).tensors:
        if ten.name in (N.ENC_SEM_PROJ, N.ENC_SEM_CODEBOOK, N.ENC_AC_PROJ, N.ENC_AC_CODEBOOK):
            shape = tuple(int(x) for x in reversed(ten.shape.tolist()))
            tensors[ten.name] = np.asarray(dequantize(ten.data, ten.tensor_type), np.float64).reshape(shape)
    x = np.asarray(downsampled, np.float64)[:, t]
    if q == 0:
        r, book = tensors[N.ENC_SEM_PROJ] @ x, tensors[N.ENC_SEM_CODEBOOK]
    else:
        r, books = tensors[N.ENC_AC_PROJ] @ x, tensors[N.ENC_AC_CODEBOOK]
        for k in range(1, q):
            r = r - books[k - 1][want[t, k]]
        book = books[q - 1]
    d_want, d_got = (float(np.linalg.norm(r - book[c])) for c in (want[t, q], got[t, q]))
    return (
        f"; first difference frame {t} codebook {q}: distances reference pick {d_want:.7g}, ours {d_got:.7g} "
        f"(relative gap {abs(d_want - d_got) / max(d_want, 1e-30):.2g})"
    )


def validate_clone_encoder(encoder, mmproj, case_dir: pathlib.Path, quantized: bool) -> Check:
    """Codec encoder: reference codes identical (the gate), intermediates reported."""
    manifest, a = goldens.load_case(case_dir)
    codes, inter = encoder.encode(a["ref_pcm"], intermediates=True)
    same = codes.shape == a["ref_codes"].shape and np.array_equal(codes, a["ref_codes"])
    diffs = ", ".join(f"{k} {float(np.abs(v - a['enc_' + k]).max()):.1e}" for k, v in inter.items())
    detail = (
        f"{int((codes == a['ref_codes']).all(1).sum()) if codes.shape == a['ref_codes'].shape else 0}/"
        f"{manifest['ref_frames']} frames all 16 codes identical; {diffs}"
    )
    if not same and codes.shape == a["ref_codes"].shape:
        detail += rvq_margin(mmproj, a["enc_downsampled"], a["ref_codes"], codes)
    return Check(case_dir.name, "ref codes", same, detail)


def validate_clone_case(tts, case_dir: pathlib.Path, quantized: bool) -> list[Check]:
    gates = QUANTIZED_GATES if quantized else F32_GATES
    manifest, a = goldens.load_case(case_dir)
    case, name, checks = manifest["case"], case_dir.name, []
    talker = tts.talker
    checks.append(validate_clone_encoder(tts.codec_encoder, tts.mmproj, case_dir, quantized))
    ids = talker.tokenize(chat_text(case["text"]))
    ref_ids = talker.tokenize(ref_chat_text(case["ref_text"]))
    same_ids = ids == a["text_ids"].tolist() and ref_ids == a["ref_text_ids"].tolist()
    checks.append(
        Check(
            name,
            "tokens",
            same_ids,
            f"{len(ids)} text + {len(ref_ids)} reference text ids {'identical' if same_ids else 'DIFFER'}",
        )
    )
    prompt = build_icl_prompt(
        talker.file,
        ids,
        ref_ids,
        tts.reference_frames(a["ref_codes"]),
        a["xvector"],
        language=case["language"],
        text_streaming=not case["non_streaming"],
    )
    want = a["prompt_embeds"]
    diff = float(np.abs(prompt.prefill - want).max()) if prompt.prefill.shape == want.shape else np.inf
    steps = np.stack(
        [tts.code_predictor.embed_codes(a["codes"][k]) + prompt.text_row(k) for k in range(manifest["frames"])]
    )
    step_diff = float(np.abs(steps - a["talker_inputs"]).max())
    checks.append(
        Check(
            name,
            "icl prompt",
            max(diff, step_diff) <= gates["prompt"],
            f"{len(prompt.prefill)} rows, max abs diff {diff:.2e}; step inputs {step_diff:.2e}",
        )
    )

    result = tts.synthesize(
        case["text"],
        language=case["language"],
        xvector=a["xvector"],
        ref_codes=a["ref_codes"],
        ref_text=case["ref_text"],
        text_streaming=not case["non_streaming"],
        greedy=True,
        max_frames=case["max_new_tokens"] - 1,
    )
    codes_same = result.codes.shape == a["codes"].shape and np.array_equal(result.codes, a["codes"])
    stop_same = result.stopped_by == ["eos" if manifest["stopped_by"] == "eos" else "max_frames"]
    want_wave, extra = _reference_part_cut(a["waveform"], manifest, tts.codec.samples_per_frame)
    wave_diff = float(np.abs(result.audio - want_wave).max()) if len(result.audio) == len(want_wave) else np.inf
    frames_ok = int((result.codes[: len(a["codes"])] == a["codes"][: len(result.codes)]).all(axis=1).sum())
    checks.append(
        Check(
            name,
            "end-to-end",
            codes_same and stop_same and wave_diff <= gates["codec"],
            f"{frames_ok}/{manifest['frames']} frames all 16 codes identical, stop "
            f"{'same' if stop_same else 'DIFFERS'}, waveform max abs diff {wave_diff:.1e}{extra}",
        )
    )
    return checks


def _reference_part_cut(waveform: np.ndarray, manifest: dict, samples_per_frame: int) -> tuple[np.ndarray, str]:
    """The golden's generated speech cut at exactly ref_frames * samples_per_frame, as kazetts cuts
    it: the reference's float cut (`reference_cut`) sometimes keeps the reference part's last sample."""
    ref, total = manifest["ref_frames"], manifest["ref_frames"] + manifest["frames"]
    kept = ref * samples_per_frame - reference_cut(ref, total, total * samples_per_frame)
    if kept == 0:
        return waveform, ""
    return waveform[kept:], f" (the reference's cut kept {kept} sample(s) of the reference part: ignored)"
