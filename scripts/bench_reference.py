"""PyTorch reference side of scripts/bench.py (reference environment), one job per process.

    .venv-ref/bin/python scripts/bench_reference.py CHECKPOINT --xvector X.npy --text T --frames N --threads N
    .venv-ref/bin/python scripts/bench_reference.py CHECKPOINT --speaker-wav S.wav --save-xvector X.npy

The request is `Qwen3TTSForConditionalGeneration.generate` (float32, SDPA attention, greedy,
x-vector-only voice clone, non-streaming text as llama-tts builds its prompt) then the 12 Hz
codec's `decode`. It does not stream, so first audio comes with the last. End-of-speech is
forbidden (its codec-head logit set to -inf) so it says `--frames` frames like every engine.
Prints one JSON line; `--save-xvector` instead runs the speaker encoder on a WAV, so that every
engine gets the same speaker (llama-tts encodes the WAV itself).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from bench_common import peak_rss_mb  # noqa: E402

WARMUP_TEXT, WARMUP_FRAMES = "Bonjour.", 2


class StageClock:
    """Seconds the talker's generate spends in its prefill and in the code predictor."""

    def __init__(self, model):
        self._start = 0.0
        self.reset()
        talker = model.talker
        talker.code_predictor.generate = self._timed(talker.code_predictor.generate, "code_predictor")
        talker.generate = self._timed(talker.generate, "talker")
        talker.model.register_forward_pre_hook(self._decoder_start)
        talker.model.register_forward_hook(self._decoder_end)

    def reset(self) -> None:
        self.prefill = self.code_predictor = self.talker = 0.0
        self._calls = 0

    def _timed(self, fn, name: str):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            out = fn(*args, **kwargs)
            setattr(self, name, getattr(self, name) + time.perf_counter() - start)
            return out

        return timed

    def _decoder_start(self, module, args):
        self._start = time.perf_counter()

    def _decoder_end(self, module, args, output):
        if self._calls == 0:
            self.prefill = time.perf_counter() - self._start
        self._calls += 1


def forbid_eos(model) -> None:
    """Sets the end-of-speech logit to -inf at every talker step (llama-tts: --logit-bias)."""
    eos = model.config.talker_config.codec_eos_token_id

    def hook(module, args, output):
        output[..., eos] = float("-inf")

    model.talker.codec_head.register_forward_hook(hook)


def load(checkpoint: str):
    from kazetts.validation.reference import load_strict

    return load_strict(checkpoint, attn_implementation="sdpa")


def save_xvector(checkpoint: str, wav: str, out: str) -> None:
    import numpy as np
    import soundfile

    model, _ = load(checkpoint)
    audio, rate = soundfile.read(wav, dtype="float32")
    np.save(out, model.extract_speaker_embedding(audio, rate).float().numpy())


def request(model, codec, processor, text: str, language: str, xvector, frames: int):
    """Codes [frames, 16] and waveform of one utterance, as the package's voice clone makes them."""
    from dump_goldens import reference_tokenize

    ids = reference_tokenize(processor, f"<|im_start|>assistant\n{text}<|im_end|>\n<|im_start|>assistant\n")
    prompt = {"ref_spk_embedding": [xvector], "x_vector_only_mode": [True], "icl_mode": [False], "ref_code": None}
    codes, _ = model.generate(
        input_ids=[ids],
        languages=[language],
        voice_clone_prompt=prompt,
        non_streaming_mode=True,
        max_new_tokens=frames + 1,
        do_sample=False,
        subtalker_dosample=False,
    )
    clock = time.perf_counter()
    (audio,) = codec.decode(codes[0][None], return_dict=False)
    return codes[0], audio[0], time.perf_counter() - clock


def bench(a) -> None:
    import numpy as np
    import torch
    from transformers import AutoTokenizer

    torch.set_num_threads(a.threads)
    start = time.perf_counter()
    model, codec = load(a.checkpoint)
    # imported once load_strict has registered the bare qwen_tts packages (see kazetts.validation.reference)
    from qwen_tts.core.models.processing_qwen3_tts import Qwen3TTSProcessor

    processor = Qwen3TTSProcessor(tokenizer=AutoTokenizer.from_pretrained(a.checkpoint, fix_mistral_regex=True))
    forbid_eos(model)
    clock = StageClock(model)
    xvector = torch.from_numpy(np.load(a.xvector))
    with torch.inference_mode():
        request(model, codec, processor, WARMUP_TEXT, a.language, xvector, WARMUP_FRAMES)
        loaded, load_rss = time.perf_counter() - start, peak_rss_mb()
        clock.reset()
        start = time.perf_counter()
        codes, audio, codec_s = request(model, codec, processor, a.text, a.language, xvector, a.frames)
        request_s = time.perf_counter() - start
    print(
        json.dumps(
            {
                "load_s": loaded,
                "load_peak_rss_mb": load_rss,
                "frames": int(codes.shape[0]),
                "audio_s": audio.shape[-1] / codec.config.output_sample_rate,
                "prefill_s": clock.prefill,
                "talker_s": clock.talker - clock.prefill - clock.code_predictor,
                "code_predictor_s": clock.code_predictor,
                "codec_s": codec_s,
                "first_audio_s": request_s,
                "request_s": request_s,
            }
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("--xvector", help=".npy speaker embedding")
    ap.add_argument("--text")
    ap.add_argument("--language", default="french")
    ap.add_argument("--frames", type=int)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--speaker-wav")
    ap.add_argument("--save-xvector")
    a = ap.parse_args()
    if a.save_xvector:
        save_xvector(a.checkpoint, a.speaker_wav, a.save_xvector)
    else:
        bench(a)


if __name__ == "__main__":
    main()
