"""Talker inputs built by the prompt rule (libkazetts' kz_prompt_build, through
kazetts.stages.prompt) from the talker GGUF's rows equal the reference's, for every golden case;
and no other module states the layout."""

from __future__ import annotations

import ast

import numpy as np
import pytest

from conftest import DUMPS, REPO
from kazetts.validation import goldens
from kazetts.stages.prompt import build_prompt
from kazetts.stages.talker_file import TalkerFile
from test_checkpoint import read_tensors

TOLERANCE = goldens.GATES["prompt_max_abs"]


class HFRows:
    """A frame's talker input computed with numpy from the Hugging Face weights: C(CB0) plus the
    code predictor's embeddings of CB1..15."""

    def __init__(self, checkpoint):
        t = read_tensors(checkpoint / "model.safetensors")
        self.codec_table = t["talker.model.codec_embedding.weight"]
        self.cp_tables = [t[f"talker.code_predictor.model.codec_embedding.{g}.weight"] for g in range(15)]

    def frame_input(self, codes):
        return self.codec_table[codes[0]] + sum(table[c] for table, c in zip(self.cp_tables, codes[1:]))


@pytest.fixture(scope="module")
def sources(tiny_checkpoint, tiny_gguf):
    """(HFRows, the F32 talker file) of a golden case's checkpoint."""
    cache = {}

    def get(manifest):
        ck = manifest["checkpoint"]
        key = (ck["preset"], ck["model_type"], ck["seed"])
        if key not in cache:
            talker = tiny_gguf(key[0], key[1], "f32", key[2])[0]
            cache[key] = HFRows(tiny_checkpoint(*key)), TalkerFile(talker)
        return cache[key]

    return get


def prompt_for(manifest, arrays, file):
    case = manifest["case"]
    return build_prompt(
        file,
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
    rows, file = sources(manifest)
    prompt = prompt_for(manifest, arrays, file)
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
    return sources(manifest)[1], arrays["text_ids"].tolist()


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
    file, ids = cv
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        build_prompt(file, ids, **kwargs)


def test_empty_text_and_unsupported_instruct(cv, sources):
    file, ids = cv
    with pytest.raises(ValueError, match="empty text"):
        build_prompt(file, ids[:3] + ids[-5:], speaker="vivian")
    base_file = sources(goldens.load_case(DUMPS / "base_xvector")[0])[1]
    with pytest.raises(ValueError, match="does not take an instruct"):
        build_prompt(base_file, ids, speaker_embedding=np.ones(64, np.float32), instruct_ids=[1, 2, 3])
    assert "sichuan_dialect" not in file.voices.spoken_languages and "french" in file.voices.spoken_languages


@pytest.mark.parametrize(
    "speaker, language, want",
    [("eric", "chinese", "sichuan_dialect"), ("Dylan", "auto", "beijing_dialect"), ("eric", "English", "english")],
)
def test_dialect_speaker_uses_dialect_language(cv, speaker, language, want):
    """The language row (after the role and [think, think_bos]) of a dialect speaker."""
    file, ids = cv
    prompt = build_prompt(file, ids, speaker=speaker, language=language)
    language_row = file.text([file.voices.tts_pad])[0] + file.codec([file.voices.languages[want]])[0]
    assert np.array_equal(prompt.prefill[3 + 2], language_row)
    auto = build_prompt(file, ids, speaker="vivian", language="auto")
    assert len(auto.prefill) == len(prompt.prefill) - 1, "auto: [nothink, think_bos, think_eos], no language row"


# ---- one definition -------------------------------------------------------------------------------

# Ids only the prompt layout uses: the codec tags' think ids, the row that opens the text
# (P(tts_bos)) and the codec row the text starts from (C(bos)). Code that reads one of them
# states (part of) the layout.
LAYOUT_IDS = {"codec_think", "codec_nothink", "codec_think_bos", "codec_think_eos", "tts_bos", "codec_bos"}


def layout_uses(source: str) -> list[str]:
    """Where Python source reads a layout-only id (an attribute, or a name in a string: getattr,
    a dict key)."""
    return [
        f"line {node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(ast.parse(source))
        if (isinstance(node, ast.Attribute) and node.attr in LAYOUT_IDS)
        or (isinstance(node, ast.Constant) and node.value in LAYOUT_IDS)
    ]


def test_no_python_module_states_the_prompt_layout():
    """The layout is libkazetts' (native/src/stages/prompt.cpp): kazetts.stages.prompt hands it a
    request. validation/ may read these ids (the fuzzer feeds the talker a few rows)."""
    package = REPO / "kazetts"
    found = {
        str(path.relative_to(package)): uses
        for path in sorted(package.rglob("*.py"))
        if path.relative_to(package).parts[0] != "validation" and (uses := layout_uses(path.read_text()))
    }
    assert found == {}


def test_layout_uses_finds_a_python_statement_of_the_layout():
    """The check above on the numpy statement of the layout the Python engine used to carry."""
    old = """
def _prefix(rows, voices, text_ids, lang_id, speaker_row):
    if lang_id is None:
        prefix = [voices.codec_nothink, voices.codec_think_bos, voices.codec_think_eos]
    else:
        prefix = [voices.codec_think, voices.codec_think_bos, lang_id, voices.codec_think_eos]
    codec = np.concatenate([rows.codec(prefix), speaker_row[None], rows.codec([voices.codec_pad, voices.codec_bos])])
    bos_eos_pad = rows.text([voices.tts_bos, voices.tts_eos, voices.tts_pad])
    return codec, bos_eos_pad
"""
    assert len(layout_uses(old)) == 8
    assert layout_uses("think = getattr(voices, 'codec_think')") == ["line 1: 'codec_think'"]
    assert layout_uses("row = file.codec([voices.codec_pad])") == []
