"""kazetts side of scripts/bench.py: one request in its own process (runtime environment).

    .venv/bin/python scripts/bench_kazetts.py TALKER MMPROJ (--xvector X.npy | --speaker NAME) --text T
                     --frames N --threads N [--text-streaming] [--codec-threads N] [--codes-out CODES.npy]
                     [--forced-codes F32.npy]

Prints one JSON line: load (with a short warm-up request, as llama-tts warms up while loading),
then for the timed request prefill, talker, code predictor and codec seconds, first audio and
the request's wall time. End-of-speech is forbidden so that every engine says `--frames` frames.
`--codes-out` saves the request's greedy codes [frames, 16] (scripts/bench.py holds them against
F32's). With `--forced-codes` it times nothing: it runs the request teacher-forced on those codes
of another run (scripts/bench.py: the F32 files') and prints the shares of its greedy CB0 and
CB1..15 picks equal to them (a process of its own, so the timed one's peak RSS is the request's).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys
import time
from typing import TYPE_CHECKING

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench_common import peak_rss_mb  # noqa: E402
from kazetts.request import Request  # noqa: E402

if TYPE_CHECKING:
    from kazetts.engine.tts import TTS

WARMUP_TEXT, WARMUP_FRAMES = "Bonjour.", 2


def forbid_eos(tts: TTS) -> None:
    """Sets the end-of-speech logit to -inf after every talker step (llama-tts: --logit-bias)."""
    step, eos = tts.talker.step, tts.voices.codec_eos

    def step_without_eos(embeddings):
        hidden, logits = step(embeddings)
        logits[eos] = -np.inf
        return hidden, logits

    tts.talker.step = step_without_eos


class ForcedFrames:
    """Teacher forcing on another run's codes: every frame the talker starts from that run's
    codes so far (its CB0 in the repetition penalty's history too) and the code predictor from
    its CB0, and their own greedy picks are counted against its codes. A difference then changes
    nothing in later frames, unlike the free-running share, which falls to ~0 after the first
    flip; within a frame the code predictor still follows its own CB1.. picks (its API takes no
    forced codes), so one wrong pick there can take the frame's later codebooks with it."""

    def __init__(self, code_predictor, codes: np.ndarray, sampler):
        self.code_predictor, self.codes, self.sampler = code_predictor, codes, sampler
        self.cb0_equal = self.cp_equal = 0

    def predict(self, hidden: np.ndarray, cb0: int, frame: int) -> tuple[np.ndarray, np.ndarray]:
        want = self.codes[frame].astype(np.int32)
        self.cb0_equal += int(cb0 == want[0])
        self.sampler.history[-1] = int(want[0])
        rest, _ = self.code_predictor.predict(hidden, int(want[0]))
        self.cp_equal += int((rest == want[1:]).sum())
        return want, np.asarray(self.code_predictor.embed_codes(want), dtype=np.float32)


def forced_agreement(tts: TTS, text: str, request: Request, codes: np.ndarray) -> dict:
    """The request's greedy picks teacher-forced on `codes` [frames, 16] (ForcedFrames): the
    shares of CB0 and of CB1..15 equal to them (frames not reached, after an end-of-speech,
    count as different). `text` must be one piece (the benchmark's is)."""
    from kazetts.engine.talker_loop import run_talker
    from kazetts.stages.sampling import TalkerSampler, talker_config

    pieces = tts._prompts(text, dataclasses.replace(request, max_frames=len(codes)), request.xvector)
    if len(pieces) != 1:
        raise ValueError(f"the teacher-forced run takes a one-piece text, not {len(pieces)} pieces")
    prompt = pieces[0][0]
    sampler = TalkerSampler.for_talker(tts.talker.file.codec_vocab_size, tts.voices.codec_eos, talker_config(request))
    forced = ForcedFrames(tts.code_predictor, codes, sampler)
    run_talker(tts.talker, prompt, sampler, forced, len(codes))
    return {"forced_cb0_equal": forced.cb0_equal / len(codes), "forced_cp_equal": forced.cp_equal / (15 * len(codes))}


def worker_arguments(doc: str) -> tuple[argparse.Namespace, Request]:
    """A kazetts worker's command line (scripts/bench.py's run_engine) and the request every
    kazetts engine gets: greedy, the x-vector (Base) or named (CustomVoice) speaker, the
    non-streaming text prompt unless --text-streaming."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("talker")
    ap.add_argument("mmproj")
    voice = ap.add_mutually_exclusive_group(required=True)
    voice.add_argument("--xvector", help=".npy speaker embedding (Base models)")
    voice.add_argument("--speaker", help="speaker name (CustomVoice models)")
    ap.add_argument("--text", required=True)
    ap.add_argument("--language", default="french")
    ap.add_argument("--frames", type=int, required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument(
        "--codec-threads",
        type=int,
        default=0,
        help="the codec's own threads, overlapped with the talker (0, the default here: serial)",
    )
    ap.add_argument("--codec", default="f16", help="codec decoder weights")
    ap.add_argument("--chunk-frames", type=int, default=4, help="frames per audio chunk after the first")
    ap.add_argument(
        "--text-streaming",
        action="store_true",
        help="the streaming-text prompt (the reference's default) instead of the non-streaming one",
    )
    ap.add_argument("--codes-out", type=pathlib.Path, help=".npy file for the request's codes [frames, 16]")
    ap.add_argument(
        "--forced-codes",
        type=pathlib.Path,
        help="kazetts engine: .npy codes [frames, 16] of another run to teacher-force the request on",
    )
    a = ap.parse_args()
    voice = dict(speaker=a.speaker) if a.speaker else dict(xvector=np.load(a.xvector))
    return a, Request(
        language=a.language, text_streaming=a.text_streaming, greedy=True, chunk_frames=a.chunk_frames, **voice
    )


def save_codes(path: pathlib.Path | None, codes) -> None:
    """The request's codes [frames, 16] as int32 .npy, when --codes-out asked for them."""
    if path is not None:
        np.save(path, np.asarray(codes, dtype=np.int32).reshape(-1, 16))


def main() -> None:
    from kazetts.engine.tts import TTS  # here: scripts/bench_native.py shares this module without it

    a, request = worker_arguments(__doc__)
    start = time.perf_counter()
    tts = TTS(a.talker, a.mmproj, threads=a.threads, codec_weights=a.codec, codec_threads=a.codec_threads)
    forbid_eos(tts)
    if a.forced_codes:
        print(json.dumps(forced_agreement(tts, a.text, request, np.load(a.forced_codes)[: a.frames])))
        return
    for _ in tts.stream(WARMUP_TEXT, request, max_frames=WARMUP_FRAMES):
        pass
    load, load_rss = time.perf_counter() - start, peak_rss_mb()
    codes: list = []
    samples, first_audio, start = 0, None, time.perf_counter()
    stream = tts.stream(a.text, request, max_frames=a.frames)
    for chunk in stream:
        first_audio = first_audio or time.perf_counter() - start
        samples += len(chunk.audio)
        codes.append(chunk.codes)
    wall = time.perf_counter() - start
    timings = stream.timings
    save_codes(a.codes_out, np.concatenate(codes))
    print(
        json.dumps(
            {
                "load_s": load,
                "load_peak_rss_mb": load_rss,
                "frames": timings["frames"],
                "audio_s": samples / tts.sample_rate,
                "prefill_s": timings["prefill"],
                "talker_s": timings["talker"] - timings["prefill"],
                "code_predictor_s": timings["code_predictor"],
                "codec_s": timings["codec"],
                "first_audio_s": first_audio,
                "request_s": wall,
            }
        )
    )


if __name__ == "__main__":
    main()
