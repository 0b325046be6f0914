"""kazetts native engine side of scripts/bench.py: one request through libkazetts' tts.h (the whole
pipeline in C++, what an Android app calls through JNI) in its own process.

    .venv/bin/python scripts/bench_native.py TALKER MMPROJ (--xvector X.npy | --speaker NAME) --text T
                     --frames N --threads N [--codes-out CODES.npy]

The same work as scripts/bench_kazetts.py (the Python engine): load with a short warm-up request,
then the timed request, greedy, non-streaming text prompt, the x-vector speaker, audio for the
first frame then every --chunk-frames. Prefill and the per-stage times are the engine's own
per-request timings (kz_tts_result); first audio and the request's wall time are measured here,
around the call, as the Python worker measures them. End-of-speech is forbidden until --frames
(the request's min_frames), so every engine says exactly --frames frames.
"""

from __future__ import annotations

import json
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench_common import peak_rss_mb  # noqa: E402
from bench_kazetts import WARMUP_FRAMES, WARMUP_TEXT, save_codes, worker_arguments  # noqa: E402
from kazetts.engine.native_tts import NativeTTS  # noqa: E402


def main() -> None:
    a, request = worker_arguments(__doc__)
    start = time.perf_counter()
    tts = NativeTTS(a.talker, a.mmproj, threads=a.threads, codec_weights=a.codec, codec_threads=a.codec_threads)
    tts.synthesize(WARMUP_TEXT, request, max_frames=WARMUP_FRAMES)
    load, load_rss = time.perf_counter() - start, peak_rss_mb()
    first_audio = []

    def on_chunk(audio, codes, frames_total):
        if not first_audio:
            first_audio.append(time.perf_counter() - start)
        return True

    start = time.perf_counter()
    r = tts.synthesize(a.text, request, on_chunk=on_chunk, max_frames=a.frames, min_frames=a.frames)
    wall = time.perf_counter() - start
    save_codes(a.codes_out, r.codes)
    t = {name: ms / 1000 for name, ms in r.timings.items()}
    print(
        json.dumps(
            {
                "load_s": load,
                "load_peak_rss_mb": load_rss,
                "frames": int(r.codes.shape[0]),
                "audio_s": len(r.audio) / tts.sample_rate,
                "prefill_s": t["prefill_ms"],
                "talker_s": t["talker_ms"] - t["prefill_ms"],
                "code_predictor_s": t["code_predictor_ms"],
                "codec_s": t["codec_ms"],
                "first_audio_s": first_audio[0],
                "request_s": wall,
                "stop_reason": r.stop_reason,
            }
        )
    )


if __name__ == "__main__":
    main()
