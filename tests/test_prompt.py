"""Talker inputs built by kazetts.stages.prompt equal the reference's, for every golden case."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import DUMPS
from kazetts.validation import goldens
from kazetts.stages.prompt import VoiceTable, build_prompt
from test_checkpoint import read_tensors

TOLERANCE = goldens.GATES["prompt_max_abs"]


class HFRows:
    """P(text) and C(codec) rows computed with numpy from the Hugging Face weights."""

    def __init__(self, checkpoint):
        t = read_tensors(checkpoint / "model.safetensors")
        self.text_table = t["talker.model.text_embedding.weight"]
        self.fc1 = t["talker.text_projection.linear_fc1.weight"], t["talker.text_projection.linear_fc1.bias"]
        self.fc2 = t["talker.text_projection.linear_fc2.weight"], t["talker.text_projection.linear_fc2.bias"]
        self.codec_table = t["talker.model.codec_embedding.weight"]
        self.cp_tables = [t[f"talker.code_predictor.model.codec_embedding.{g}.weight"] for g in range(15)]

    def text(self, ids):
        h = self.text_table[list(ids)] @ self.fc1[0].T + self.fc1[1]
        h = h / (1 + np.exp(-h))
        return (h @ self.fc2[0].T + self.fc2[1]).astype(np.float32)

    def codec(self, ids):
        return self.codec_table[list(ids)]

    def frame_input(self, codes):
        return self.codec_table[codes[0]] + sum(table[c] for table, c in zip(self.cp_tables, codes[1:]))


@pytest.fixture(scope="module")
def sources(tiny_checkpoint):
    cache = {}

    def get(manifest):
        ck = manifest["checkpoint"]
        key = (ck["preset"], ck["model_type"], ck["seed"])
        if key not in cache:
            path = tiny_checkpoint(*key)
            cache[key] = HFRows(path), VoiceTable.from_hf_config(json.loads((path / "config.json").read_text()))
        return cache[key]

    return get


def _prompt_for(manifest, arrays, rows, voices):
    case = manifest["case"]
    return build_prompt(
        rows,
        voices,
        arrays["text_ids"].tolist(),
        language=case["language"],
        speaker=case["speaker"],
        instruct_ids=arrays["instruct_ids"].tolist() if "instruct_ids" in arrays else None,
        speaker_embedding=arrays.get("xvector"),
        text_streaming=not case["non_streaming"],
    )


@pytest.mark.parametrize("name", [case.name for case in goldens.CASES])
def test_prompt_and_step_inputs_match_reference(name, sources):
    manifest, arrays = goldens.load_case(DUMPS / name)
    rows, voices = sources(manifest)
    prompt = _prompt_for(manifest, arrays, rows, voices)
    want = arrays["prompt_embeds"]
    assert prompt.prefill.shape == want.shape
    prefill_diff = float(np.abs(prompt.prefill - want).max())
    steps = np.stack([rows.frame_input(arrays["codes"][k]) + prompt.text_row(k) for k in range(manifest["frames"])])
    step_diff = float(np.abs(steps - arrays["talker_inputs"]).max())
    print(
        f"{name}: prefill {want.shape[0]} rows max abs diff {prefill_diff:.2e}; "
        f"{len(steps)} step inputs max abs diff {step_diff:.2e}"
    )
    assert prefill_diff <= TOLERANCE and step_diff <= TOLERANCE


@pytest.fixture(scope="module")
def cv(sources):
    manifest, arrays = goldens.load_case(DUMPS / "cv_english_stream")
    return (*sources(manifest), arrays["text_ids"].tolist())


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"speaker": "nobody"}, "unknown speaker 'nobody'; choose one of"),
        ({"speaker": "vivian", "language": "klingon"}, "unknown language 'klingon'; choose one of ['auto'"),
        ({"speaker": "vivian", "speaker_embedding": np.zeros(64, np.float32)}, "either a speaker name or"),
        ({"speaker_embedding": np.zeros(3, np.float32)}, "speaker embedding has 3 values; this model needs 64"),
    ],
)
def test_bad_requests_are_clear_errors(cv, kwargs, message):
    rows, voices, ids = cv
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        build_prompt(rows, voices, ids, **kwargs)


def test_empty_text_and_unsupported_instruct(cv, sources):
    rows, voices, ids = cv
    with pytest.raises(ValueError, match="empty text"):
        build_prompt(rows, voices, ids[:3] + ids[-5:], speaker="vivian")
    base_manifest, _ = goldens.load_case(DUMPS / "base_xvector")
    base_rows, base_voices = sources(base_manifest)
    with pytest.raises(ValueError, match="does not take an instruct"):
        build_prompt(base_rows, base_voices, ids, instruct_ids=[1, 2, 3])
    assert "sichuan_dialect" not in voices.spoken_languages and "french" in voices.spoken_languages


def test_dialect_speaker_uses_dialect_language(cv):
    rows, voices, _ = cv
    assert voices.language_id("chinese", "eric") == voices.languages["sichuan_dialect"]
    assert voices.language_id("auto", "dylan") == voices.languages["beijing_dialect"]
    assert voices.language_id("english", "eric") == voices.languages["english"]
    assert voices.language_id("auto", "vivian") is None
