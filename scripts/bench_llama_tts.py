"""llama.cpp's own `llama-tts` side of scripts/bench.py: its command line and its printed timings.

llama-tts (tools/tts/tts.cpp of the llama-cpp-python 0.3.36 sdist, built by `make llama-tts`)
takes one request per process, builds the non-streaming prompt, runs talker + code predictor per
frame, and decodes audio at the end (or every 72 frames), then writes a WAV: it does not stream,
so its first audio is its last. It prints "prompt eval + generation + vocoder = total" seconds
(two decimals); generation holds talker and code predictor together. Settings chosen so it does
the work the other engines do:

- `-n FRAMES --logit-bias <codec eos>-inf`: exactly FRAMES frames (end-of-speech forbidden);
- `--top-k 1 --temp 0`: greedy talker and code predictor;
- `--no-repack` where kazetts's talker goes without llama.cpp's extra CPU buffer types too (on
  AMX CPUs, where a GCC 12 build of ggml dies of SIGILL in ggml_backend_amx_mul_mat on any batch of
  2+ rows: see kz_talker_model_params in native/include/kazetts/talker.h; llama-tts has `-ot` tensor overrides,
  but every AMX-resident weight meets the prompt batch, so no narrower choice exists);
- `-c N_CTX`: the talker context kazetts allocates (its default is the model's 32768 positions);
- OMP_THREAD_LIMIT=threads in its environment: its mtmd context (code predictor, codec, speaker
  encoder) always asks for 4 threads; ggml's OpenMP build takes the limit.
"""

from __future__ import annotations

import re

WAV_WINDOW = 72  # frames llama-tts buffers before decoding audio (mtmd-helper-gen.cpp window_frames)
N_CTX = 2048  # kazetts.TTS's default talker context

_TIMINGS = re.compile(r"timings: prompt eval ([\d.]+)s \+ generation ([\d.]+)s \+ vocoder ([\d.]+)s = total ([\d.]+)s")
_FRAMES = re.compile(r"generated (\d+) frames")
_AUDIO = re.compile(r"output audio = ([\d.]+)s")


def command(
    binary: str,
    talker: str,
    mmproj: str,
    text: str,
    language: str,
    frames: int,
    threads: int,
    speaker_wav: str,
    eos_token: int,
    out_wav: str,
    repack: bool,
) -> list[str]:
    return [
        binary,
        "-m",
        talker,
        "-mm",
        mmproj,
        "-p",
        text,
        "-o",
        out_wav,
        "--tts-lang",
        language,
        "--tts-speaker-file",
        speaker_wav,
        "-n",
        str(frames),
        "--logit-bias",
        f"{eos_token}-inf",
        "--top-k",
        "1",
        "--temp",
        "0",
        "--repack" if repack else "--no-repack",
        "-c",
        str(N_CTX),
        "-t",
        str(threads),
        "-tb",
        str(threads),
    ]


def parse(log: str, process_s: float) -> dict:
    """The bench's figures from llama-tts's output. Load is the process time outside the request:
    model loading, warm-up, speaker encoding and exit. Below WAV_WINDOW frames all audio is decoded
    after generation, so vocoder is the codec and generation is talker + code predictor."""
    timings, frames, audio = _TIMINGS.search(log), _FRAMES.search(log), _AUDIO.search(log)
    if not (timings and frames and audio):
        raise ValueError("llama-tts printed no timings")
    prefill, generation, vocoder, total = map(float, timings.groups())
    split = int(frames.group(1)) < WAV_WINDOW
    return {
        "load_s": process_s - total,
        "frames": int(frames.group(1)),
        "audio_s": float(audio.group(1)),
        "prefill_s": prefill,
        "talker_code_predictor_s": generation if split else None,
        "codec_s": vocoder if split else None,
        "first_audio_s": total,
        "request_s": total,
    }
