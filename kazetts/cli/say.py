"""`kazetts say`, `kazetts voices`, `kazetts validate`: the command-line face of kazetts.TTS."""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

import numpy as np

from kazetts.engine.output_file import stream_fd
from kazetts.stages.codec import WEIGHTS as CODEC_WEIGHTS
from kazetts.request import (
    INT_OPTIONS,
    MAX_REF_SILENCE,
    MAX_SEED,
    MAX_SPEED,
    MAX_THREADS,
    MIN_SPEED,
    OLD_NAMES,
    OPTIONS,
    Request,
    check_option,
    check_speed,
    shown,
)

DEFAULT_MODEL = os.environ.get("KAZETTS_MODEL", "models/tiny")


def int_in(low: int, high: int | None = None):
    """An argparse type: an integer in low..high (argparse names the argument in its error)."""
    valid = f"{low}..{high}" if high is not None else f">= {low}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer {valid}, got {shown(text)}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {valid}, got {value}")
        return value

    return parse


def checked_number(check, integer: bool = False):
    """An argparse type: a number checked by the request vocabulary's own check (kazetts.request),
    so that the command line refuses what the API and the server refuse, in the same words."""

    def parse(text: str):
        try:
            value = int(text) if integer else float(text)
        except ValueError:
            value = text  # the check refuses it, saying what it must be
        try:
            return check(value)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return parse


def sampling_option(name: str):
    """An argparse type: one sampling option, checked as the engine checks it."""
    return checked_number(lambda value: check_option(name, value), integer=name in INT_OPTIONS)


def option(name: str) -> str:
    """A Request field's command-line option: --cp-top-k for cp_top_k."""
    return "--" + name.replace("_", "-")


def add_old_option(p: argparse.ArgumentParser, new: str, **kwargs) -> None:
    """The option of a field's old name (kazetts.request.OLD_NAMES), still taken, not listed."""
    old = next(old for old, name in OLD_NAMES.items() if name == new)
    p.add_argument(option(old), dest=new, help=argparse.SUPPRESS, **kwargs)


def add_sampling_arguments(p: argparse.ArgumentParser) -> None:
    """--temperature, --top-k, --top-p, --repetition-penalty and --cp-*: the engine's sampling
    options (kazetts.Request's fields; --subtalker-* still taken); not given, the reference's
    defaults."""
    for name, (_, valid) in OPTIONS.items():
        stage = "code predictor (codebooks 1..15)" if name.startswith("cp_") else "talker (codebook 0)"
        p.add_argument(
            option(name),
            type=sampling_option(name),
            default=None,
            help=f"{stage} sampling: {valid} (default {getattr(Request(), name):g})",
        )
        if name in OLD_NAMES.values():
            add_old_option(p, name, type=sampling_option(name), default=None)


def sampling_options(args: argparse.Namespace) -> dict:
    """The sampling options given on the command line, as kazetts.Request fields."""
    return {name: getattr(args, name) for name in OPTIONS if getattr(args, name) is not None}


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        help=f"directory with one *-talker-*.gguf and one *-mmproj-*.gguf (default {DEFAULT_MODEL}, or $KAZETTS_MODEL)",
    )
    p.add_argument(
        "--threads", type=int_in(1, MAX_THREADS), default=2, help=f"CPU threads per stage, 1..{MAX_THREADS} (default 2)"
    )
    p.add_argument(
        "--codec-threads",
        type=int_in(0, MAX_THREADS),
        default=None,
        help="the codec decoder's own threads, decoding while the talker makes the next frames "
        "(0: serial; default: the cores beyond --threads, at most --threads; 0 without a spare core)",
    )


def add_codec_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--codec",
        default="f16",
        choices=list(CODEC_WEIGHTS),
        help="codec decoder weights (default f16; f16-sums: float16 sums on ARM cores with FP16 arithmetic, "
        "~1.8x fewer vector instructions in the codec, waveform correlation ~0.99995)",
    )


def add_ref_silence_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--ref-silence",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help=f"silence appended to the reference before encoding, 0..{MAX_REF_SILENCE:g} s (default 0; "
        "about 0.5 keeps ICL from repeating the reference's last sound)",
    )


def model_inputs(model_dir) -> list[pathlib.Path]:
    """The GGUF files of a model directory (what an output must never overwrite)."""
    return sorted(pathlib.Path(model_dir).glob("*.gguf")) if pathlib.Path(model_dir).is_dir() else []


def engine(args: argparse.Namespace, codec_weights: str):
    from kazetts.engine.tts import TTS

    return TTS(
        args.model,
        threads=args.threads,
        codec_weights=codec_weights,
        codec_threads=getattr(args, "codec_threads", None),
    )  # validate has no --codec-threads


class _Progress:
    """Progress on stderr for jobs longer than a second: frames, frames/s, real-time factor.
    On a terminal one line is rewritten in place; in a log, a line every few seconds."""

    def __init__(self, enabled: bool, tty: bool):
        self.enabled, self.tty = enabled, tty
        self.start = self.last = time.perf_counter()
        self.shown = False

    def update(self, frames: int) -> None:
        now = time.perf_counter()
        elapsed = now - self.start
        if not self.enabled or elapsed < 1.0 or (not self.tty and now - self.last < 5.0):
            return
        self.last = now
        rtf = elapsed / max(frames * 0.08, 1e-9)
        print(
            f"{chr(13) if self.tty else ''}  {frames} frames ({frames * 0.08:.1f} s of audio), "
            f"{frames / elapsed:.1f} frames/s, real-time factor {rtf:.2f}",
            end="" if self.tty else "\n",
            file=sys.stderr,
            flush=True,
        )
        self.shown = self.tty

    def close(self) -> None:
        if self.shown:
            print(file=sys.stderr)


def _say(args: argparse.Namespace) -> int:
    text = _read_text(args)
    xvector = _load_xvector(args.xvector) if args.xvector else None
    to_stdout = str(args.output) == "-"
    report_to = sys.stderr if to_stdout or stream_fd(args.output) == 1 else sys.stdout
    inputs = [args.text_file, args.xvector, args.voice, args.ref_audio, *model_inputs(args.model)]
    sink = _StdoutSink() if to_stdout else _FileSink(pathlib.Path(args.output), inputs)
    try:
        tts = engine(args, args.codec)
        voice = None
        if args.voice:
            from kazetts.engine.voice import Voice

            voice = Voice.load(args.voice)
        request = Request(
            speaker=args.speaker,
            language=args.language,
            instruct=args.instruct,
            xvector=xvector,
            voice=voice,
            ref_audio=args.ref_audio,
            ref_text=args.ref_text,
            xvector_only=True if args.xvector_only else None,
            ref_silence=args.ref_silence,
            text_streaming=not args.no_text_streaming,
            greedy=args.greedy,
            seed=args.seed,
            max_frames=args.max_frames,
            chunk_frames=args.chunk_frames,
            speed=args.speed,
            **sampling_options(args),
        )
        progress = _Progress(sys.stderr.isatty() or args.verbose, sys.stderr.isatty())
        stream = tts.stream(text, request)
        try:
            for chunk in stream:
                sink.write(chunk.audio, tts.sample_rate)
                progress.update(chunk.frames)
        finally:
            progress.close()
        sink.commit()
    finally:
        sink.discard()
    timings = stream.timings
    frames = timings.get("frames", 0)
    audio_s = sink.samples / tts.sample_rate
    report = (
        f"{frames} frames, {audio_s:.2f} s of audio in {timings.get('wall', 0):.2f} s "
        f"(real-time factor {timings.get('wall', 0) / max(audio_s, 1e-9):.2f}); first audio after "
        f"{timings.get('first_chunk', 0):.3f} s"
    )
    print(report, file=report_to)
    if args.verbose:
        stages = ", ".join(
            f"{name} {1000 * timings.get(name, 0) / max(frames, 1):.1f} ms/frame"
            for name in ("talker", "code_predictor", "codec")
        )
        print(f"  per stage: {stages}", file=report_to)
    return 0


def _read_text(args: argparse.Namespace) -> str:
    """The text to say: the argument, stdin for "-", or --text-file."""
    if (args.text is None) == (args.text_file is None):
        raise ValueError(
            "give the text to say either as an argument (- reads stdin) or with --text-file, not both"
            if args.text is not None
            else "no text: give it as an argument, - for stdin, or --text-file FILE"
        )
    if args.text_file is not None:
        try:
            data = pathlib.Path(args.text_file).read_bytes()
        except OSError as e:
            raise OSError(f"--text-file {args.text_file}: {e.strerror or e}") from None
        return _utf8(data, f"--text-file {args.text_file}")
    return _utf8(sys.stdin.buffer.read(), "the text on stdin") if args.text == "-" else args.text


def _utf8(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{what} is not UTF-8 text (byte 0x{data[e.start]:02x} at position {e.start}); save it as UTF-8"
        ) from None


def _load_xvector(path: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except ValueError as e:
        raise ValueError(f"--xvector {path}: not a .npy array ({e})") from None


class _FileSink:
    """The WAV file of `-o`, written through an OutputFile: renamed over the target only when the
    whole request succeeded (an error leaves no partial file and the previous one as it was), a
    device or FIFO written in place, and an input of the command never overwritten."""

    def __init__(self, target: pathlib.Path, inputs):
        from kazetts.engine.output_file import OutputFile

        self.output, self.file, self.samples = OutputFile(target, inputs=inputs), None, 0

    def write(self, audio: np.ndarray, sample_rate: int) -> None:
        if self.file is None:
            import soundfile

            self.file = soundfile.SoundFile(
                self.output.staging, "w", samplerate=sample_rate, channels=1, subtype="PCM_16", format="WAV"
            )
        self.file.write(audio)
        self.samples += len(audio)

    def commit(self) -> None:
        if self.file is None:
            raise ValueError("no audio was produced: nothing written")
        self.file.close()
        self.output.commit()

    def discard(self) -> None:
        if self.file is not None and not self.file.closed:
            self.file.close()
        self.output.discard()


class _StdoutSink:
    """Raw little-endian 16-bit PCM on stdout, written as chunks arrive."""

    samples = 0

    def write(self, audio: np.ndarray, sample_rate: int) -> None:
        self.samples += len(audio)
        sys.stdout.buffer.write((np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes())
        sys.stdout.buffer.flush()

    def commit(self) -> None:
        pass

    def discard(self) -> None:
        pass


def _voices(args: argparse.Namespace) -> int:
    from kazetts.stages.talker_file import TalkerFile
    from kazetts.engine.model_files import find_model_files

    path = pathlib.Path(args.model)
    talker = find_model_files(path)[0] if path.is_dir() else path
    voices = TalkerFile(talker).voices
    print(f"model type: {voices.model_type}")
    print(f"languages:  {', '.join(voices.spoken_languages)}")
    if voices.speakers:
        print("speakers:")
        for name in sorted(voices.speakers):
            dialect = voices.speaker_dialects.get(name)
            print(
                f"  {name}" + (f"  (speaks {dialect.replace('_', ' ')} with language chinese/auto)" if dialect else "")
            )
    else:
        print(
            "speakers:   none ("
            + (
                "clone one: kazetts enroll, then say --voice; or say --ref-audio"
                if voices.model_type == "base"
                else "describe the voice with --instruct"
            )
            + ")"
        )
    print(f"instruct:   {'yes' if voices.supports_instruct else 'no'}")
    return 0


def _validate(args: argparse.Namespace) -> int:
    from kazetts.validation.validate import golden_dirs, skip_reason, validate_case, validate_clone_case

    tts = engine(args, "f32")  # the exact path: the gates are the reference's tolerances
    quantized = not pathlib.Path(tts.talker.file.path).name.endswith("-f32.gguf")
    failed = 0
    print(f"{'case':24s} {'stage':11s} {'gate':5s} figures")
    for case_dir, clone in golden_dirs(pathlib.Path(args.dumps)):
        reason = skip_reason(tts, case_dir)
        if reason:
            print(f"{case_dir.name:24s} {'-':11s} {'skip':5s} {reason}")
            continue
        run = validate_clone_case if clone else validate_case
        for check in run(tts, case_dir, quantized):
            failed += not check.passed
            print(
                f"{check.case:24s} {check.stage:11s} {'ok' if check.passed else 'FAIL':5s} {check.detail}", flush=True
            )
    print(
        f"{'all gates passed' if not failed else f'{failed} gate(s) failed'}"
        f"{' (quantized files: looser gates)' if quantized else ''}"
    )
    return 1 if failed else 0


def register(sub) -> None:
    s = sub.add_parser("say", help="synthesize text to a WAV file (or raw 16-bit PCM on stdout with -o -)")
    s.add_argument("text", nargs="?", default=None, help="the text to say; - reads it from stdin")
    s.add_argument("--text-file", default=None, help="read the text to say from this UTF-8 file")
    s.add_argument("-o", "--output", required=True, help="WAV file, or - for raw s16le 24 kHz mono PCM on stdout")
    add_model_arguments(s)
    s.add_argument("--speaker", default=None)
    s.add_argument("--language", default="auto")
    s.add_argument("--instruct", default=None, help="voice description (VoiceDesign, 1.7B CustomVoice)")
    s.add_argument("--xvector", default=None, help=".npy x-vector of the voice (Base models)")
    add_old_option(s, "xvector", default=None)
    s.add_argument("--seed", type=int_in(0, MAX_SEED), default=None, help=f"sampling seed, 0..{MAX_SEED}")
    s.add_argument("--voice", default=None, help="cloned voice file from `kazetts enroll` (Base models)")
    s.add_argument("--ref-audio", default=None, help="reference recording to clone on the fly (Base models)")
    s.add_argument("--ref-text", default=None, help="the words said in --ref-audio (ICL cloning)")
    add_ref_silence_argument(s)
    s.add_argument(
        "--xvector-only", action="store_true", help="clone from the x-vector alone, even with a reference text"
    )
    add_old_option(s, "xvector_only", action="store_true")
    s.add_argument("--greedy", action="store_true", help="argmax decoding (what the goldens check)")
    s.add_argument(
        "--speed",
        type=checked_number(check_speed),
        default=1.0,
        help=f"speaking rate, {MIN_SPEED:g}..{MAX_SPEED:g} (default 1; a pitch-preserving time-stretch)",
    )
    add_sampling_arguments(s)
    s.add_argument(
        "--max-frames", type=int_in(1), default=None, help="frame cap per text piece, >= 1 (default: from its length)"
    )
    s.add_argument(
        "--stream",
        dest="chunk_frames",
        action="store_const",
        const=1,
        default=4,
        help="decode and write audio frame by frame (default: every 4 frames)",
    )
    s.add_argument("--no-text-streaming", action="store_true", help="all text in the prompt (non-streaming mode)")
    add_codec_argument(s)
    s.add_argument("-v", "--verbose", action="store_true", help="per-stage timings")
    s.set_defaults(func=_say)

    v = sub.add_parser("voices", help="list a model's speakers and languages")
    v.add_argument("model", nargs="?", default=DEFAULT_MODEL, help="model directory or talker GGUF")
    v.set_defaults(func=_voices)

    val = sub.add_parser("validate", help="check every stage against reference golden dumps")
    val.add_argument("model", help="directory with the talker and mmproj GGUF files (F32 for exact gates)")
    val.add_argument("dumps", help="a dumps/ directory or one case directory (scripts/dump_goldens.py)")
    val.add_argument("--threads", type=int_in(1, MAX_THREADS), default=2)
    val.set_defaults(func=_validate)
