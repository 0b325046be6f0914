"""Golden dumps of the PyTorch reference: which cases exist and how to read them.

`scripts/dump_goldens.py` (reference environment) writes `dumps/<case>/` with a
`manifest.json` and one `.npy` file per array; everything here is numpy only, so kazetts'
tests and `kazetts validate` read goldens without torch.

Array layout (S = forward calls of the talker = prefill + generated steps, F = frames):
  text_ids [N] int32            full chat-wrapped text ids
  instruct_ids [K] int32        instruct ids (VoiceDesign/instruct cases only)
  xvector [H] f32               speaker vector given to a Base model (Base cases only): drawn
                                from `xvector_seed`, or the reference's x-vector of `ref_audio`
  ref_codes [T, 16] int32       the reference's codec-encoder codes of `ref_audio` (ICL cases)
  prompt_embeds [L, H] f32      talker prefill input embeddings
  talker_inputs [S-1, H] f32    talker input embedding of each generated step
  talker_hidden [S, H] f32      talker last hidden state (after the final norm), last position
  talker_logits [S, 3072] f32   raw codec_head logits, last position (before any processor)
  codes [F, 16] int32           the 16 codebooks of every frame (CB0 first)
  cp_logits [F', 15, V] f32     code predictor raw logits for CB1..15, first F' frames
  codec_quantized [C, F] f32    codec: RVQ decode (after output projections)
  codec_pre_conv [D, F] f32     codec: causal conv k3 to the latent width
  codec_transformer [D, F] f32  codec: sliding-window transformer (after output_proj)
  codec_upsample [D, 4F] f32    codec: after the two ConvTranspose + ConvNeXt stages
  waveform [1920 F] f32         24 kHz PCM in [-1, 1]

Voice-clone cases (Base, `ref_audio` set; ICL when `ref_text` is set; in dumps/clone/) add, and their
`codes` / `waveform` are the generated speech only (the reference part cut, as
generate_voice_clone returns it; no codec_* intermediates):
  ref_pcm [N] f32               the reference as the codec encoder got it (24 kHz, the reference's resampling)
  ref_codes [R, 16] int32       codec encoder output (speech_tokenizer.encode)
  enc_seanet [D, S] f32         codec encoder: SEANet output (25 Hz, S = ceil(N / 960))
  enc_transformer [D, S] f32    codec encoder: transformer output
  enc_downsampled [D, R] f32    codec encoder: stride-2 downsample (12.5 Hz), before the RVQ
  ref_text_ids [M] int32        chat-wrapped reference transcript ids (ICL)
  xvector [H] f32               the reference's speaker embedding of ref_pcm
"""

from __future__ import annotations

import hashlib
import json
import pathlib
from dataclasses import asdict, dataclass

import numpy as np

FORMAT_VERSION = 1
CP_LOGIT_FRAMES = 4  # code predictor logits are kept for this many leading frames
GATES_FILE = pathlib.Path(__file__).with_name("gates.json")
# Every golden gate (tolerances and agreement floors), shared with native/tests/golden_check.
GATES: dict[str, float] = {k: float(v) for k, v in json.loads(GATES_FILE.read_text()).items() if not k.startswith("_")}
RECORDINGS_DIR = "recordings"  # beside the case directories: the cloning references


@dataclass(frozen=True)
class Recording:
    """A committed reference recording (dumps/recordings/<file>) and what it says.

    espeak-ng speaking a sentence (scripts/make_recordings.py): deterministic, no one's voice."""

    file: str
    rate: int  # its sample rate (espeak-ng speaks at 22050 Hz; others are soxr-resampled)
    text: str
    voice: str = "en-us"


RECORDINGS = {
    "en_24k": Recording(
        "ref_en_24k.wav", 24000, "The quick brown fox jumps over the lazy dog near the bank of the river."
    ),
    "en_16k": Recording(
        "ref_en_16k.wav", 16000, "Please call Stella and ask her to bring these things with her from the store."
    ),
    "en_long_22k": Recording(
        "ref_en_long_22k.flac",
        22050,
        "When the sunlight strikes raindrops in the air, they act as a prism and form a rainbow. "
        "The rainbow is a division of white light into many beautiful colors. These take the "
        "shape of a long round arch, with its path high above, and its two ends apparently "
        "beyond the horizon.",
    ),
}


def recording_path(dumps: pathlib.Path, name: str) -> pathlib.Path:
    """Where a recording sits under a dumps/ directory."""
    return pathlib.Path(dumps) / RECORDINGS_DIR / RECORDINGS[name].file


@dataclass(frozen=True)
class Case:
    """One reference run: which synthetic checkpoint, which text, which voice, which mode."""

    name: str
    text: str
    language: str
    preset: str = "tiny"
    model_type: str = "custom_voice"
    speaker: str | None = None
    instruct: str | None = None
    xvector_seed: int | None = None  # Base: the speaker vector is drawn from this seed
    non_streaming: bool = False  # the reference default is streaming text
    max_new_tokens: int = 24
    checkpoint_seed: int = 0
    # Base voice cloning (generate_voice_clone): CASES name a RECORDINGS entry (dumps/recordings/),
    # CLONE_CASES a WAV under dumps/clone/ref_audio/
    ref_audio: str | None = None
    ref_text: str | None = None  # its transcript: ICL mode (None: x-vector only)


CASES = [
    Case(
        "cv_english_nonstream",
        "Hello world, this is the talker speaking.",
        "english",
        speaker="vivian",
        non_streaming=True,
    ),
    Case("cv_english_stream", "Hello world, this is the talker speaking.", "english", speaker="ryan"),
    Case("cv_auto_language", "The weather is lovely today, isn't it?", "auto", speaker="aiden"),
    Case("cv_dialect_speaker", "今天天气很好，我们一起去公园散步吧。", "chinese", speaker="eric"),
    Case(
        "vd_instruct",
        "Welcome to the show, everyone.",
        "english",
        model_type="voice_design",
        instruct="A warm, low female voice, speaking slowly and calmly.",
    ),
    Case("base_xvector", "Guten Morgen, wie geht es Ihnen heute?", "german", model_type="base", xvector_seed=7),
    Case(
        "fr_accents_digits",
        "Le 14 juillet 1789, à Paris, près de 3 000 personnes ont pris la Bastille : ça a duré 4 heures !",
        "french",
        speaker="vivian",
        max_new_tokens=40,
    ),
    Case(
        "long_window",
        "Once upon a time, in a quiet village by the sea, there lived an old fisherman "
        "who told stories to anyone who would listen. Every evening the children gathered around "
        "his boat, and every evening he began a new tale about storms, stars and distant islands.",
        "english",
        speaker="ono_anna",
        max_new_tokens=130,
    ),
    Case(
        "proj_cv", "Testing the projection path of the code predictor.", "english", preset="tiny-proj", speaker="vivian"
    ),
    # One-token texts: in streaming mode the trailing text rows are then just tts_eos.
    Case("cv_one_token", "Hello", "english", speaker="ryan", max_new_tokens=12),
    Case("cv_one_token_nonstream", "你好", "chinese", speaker="serena", non_streaming=True, max_new_tokens=12),
    # F32 weights and a codec config without head_dim (gated at F32 exactness, see gates.json).
    Case("f32_codec_no_head_dim", "Bonjour !", "french", preset="tiny-f32", speaker="vivian", max_new_tokens=16),
    Case(
        "clone_xvec_stream", "Guten Morgen, wie geht es Ihnen heute?", "german", model_type="base", ref_audio="en_24k"
    ),
    Case(
        "clone_xvec_nonstream",
        "Good morning, how are you today?",
        "english",
        model_type="base",
        ref_audio="en_24k",
        non_streaming=True,
    ),
    Case("clone_xvec_16k", "A reference recorded at sixteen kilohertz.", "auto", model_type="base", ref_audio="en_16k"),
    Case(
        "clone_xvec_long",
        "Long references give the codec encoder a longer window.",
        "english",
        model_type="base",
        ref_audio="en_long_22k",
    ),
    Case(
        "proj_clone_xvec",
        "Testing the projection path with a cloned voice.",
        "english",
        preset="tiny-proj",
        model_type="base",
        ref_audio="en_24k",
    ),
]
F32_EXACT_CASES = ("f32_codec_no_head_dim",)  # F32 checkpoints: F32 files must match them exactly
# espeak-ng 1.51 recordings (22.05 kHz, so the reference resamples them); the long one is
# longer than 250 SEANet steps (10 s at 25 Hz)
REF_SHORT = ("espeak_en_short.wav", "The quick brown fox jumps over the lazy dog.")
REF_LONG = (
    "espeak_en_long.wav",
    "Every evening the old fisherman walked down to the harbour, counted the boats "
    "that had come home, and told the children a new story about storms, stars and the distant islands "
    "beyond the sea.",
)
CLONE_CASES = [
    # streaming with more text rows than reference frames: the rest is fed one per generated step
    Case(
        "clone_icl_stream",
        "Once upon a time, in a quiet village by the sea, there lived an old fisherman who told "
        "stories to anyone who would listen, and every evening the children gathered around his boat.",
        "english",
        model_type="base",
        ref_audio=REF_SHORT[0],
        ref_text=REF_SHORT[1],
    ),
    Case(
        "clone_icl_nonstream",
        "Good morning, how are you today?",
        "english",
        model_type="base",
        ref_audio=REF_SHORT[0],
        ref_text=REF_SHORT[1],
        non_streaming=True,
    ),
    Case(
        "clone_icl_long_ref",
        "See you tomorrow.",
        "auto",
        model_type="base",
        ref_audio=REF_LONG[0],
        ref_text=REF_LONG[1],
    ),
    Case(
        "clone_icl_proj",
        "Testing the projection path while cloning.",
        "english",
        preset="tiny-proj",
        model_type="base",
        ref_audio=REF_SHORT[0],
        ref_text=REF_SHORT[1],
        non_streaming=True,
    ),
]
CASES_BY_NAME = {case.name: case for case in CASES}
CLONE_CASES_BY_NAME = {case.name: case for case in CLONE_CASES}
# Voice-clone goldens live apart (dumps/clone/<case>/, WAVs in dumps/clone/ref_audio/) so that the
# stage tests of the plain cases, which glob dumps/*/, never see them.
CLONE_DIR = "clone"
REF_AUDIO_DIR = "ref_audio"


def case_dict(case: Case) -> dict:
    """The case as its manifest records it (voice-clone fields only when set, so the manifests
    dumped before they existed stay valid)."""
    d = asdict(case)
    for key in ("ref_audio", "ref_text"):
        if d[key] is None:
            del d[key]
    return d


def sha256_file(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def checkpoint_digests(checkpoint_dir: pathlib.Path) -> dict:
    """sha256 of the files that define a checkpoint's numbers (configs and weights)."""
    root = pathlib.Path(checkpoint_dir)
    names = ["config.json", "model.safetensors", "speech_tokenizer/config.json", "speech_tokenizer/model.safetensors"]
    return {name: sha256_file(root / name) for name in names}


def save_case(out_dir: pathlib.Path, manifest: dict, arrays: dict[str, np.ndarray]) -> None:
    """Writes the arrays (one .npy each) and a manifest listing their shapes and digests."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob("*.npy"):
        if stale.stem not in arrays:
            stale.unlink()
    listing = {}
    for name, array in sorted(arrays.items()):
        path = out_dir / f"{name}.npy"
        np.save(path, np.ascontiguousarray(array))
        listing[name] = {"shape": list(array.shape), "dtype": str(array.dtype), "sha256": sha256_file(path)}
    manifest = dict(manifest, format_version=FORMAT_VERSION, arrays=listing)
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def load_case(case_dir: pathlib.Path) -> tuple[dict, dict[str, np.ndarray]]:
    """Reads a golden case: (manifest, {array name: array})."""
    case_dir = pathlib.Path(case_dir)
    manifest = json.loads((case_dir / "manifest.json").read_text(encoding="utf-8"))
    arrays = {name: np.load(case_dir / f"{name}.npy") for name in manifest["arrays"]}
    return manifest, arrays
