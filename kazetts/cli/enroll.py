"""`kazetts enroll ref.wav [--ref-text "..."] -o me.voice --model DIR`: a reusable cloned voice."""

from __future__ import annotations

import argparse
import pathlib

from kazetts.cli.say import model_inputs, add_model_arguments, add_ref_silence_argument, engine
from kazetts.engine.output_file import OutputFile

FORCE_HINT = "give --force to replace it"


def _enroll(args: argparse.Namespace) -> int:
    output = dict(replace=args.force, inputs=[args.ref_audio, *model_inputs(args.model)], replace_hint=FORCE_HINT)
    OutputFile.check(args.output, what="voice file", **output)  # refused before any work
    tts = engine(args, "f16")
    timings: dict = {}
    voice = tts.enroll(args.ref_audio, ref_text=args.ref_text, timings=timings, ref_silence=args.ref_silence)
    path = voice.save(args.output, **output)
    icl = "with reference codes (ICL)" if voice.has_icl else "x-vector only"
    silence = f" + {voice.ref_silence:g} s of silence" if voice.ref_silence else ""
    print(
        f"{path}: {voice.ref_seconds:.2f} s reference{silence}, {icl}, for a {voice.model.model_type} model of "
        f"hidden size {voice.model.hidden_size}"
    )
    if args.verbose:
        print("  " + ", ".join(f"{name} {1000 * seconds:.1f} ms" for name, seconds in timings.items()))
    return 0


def register(sub) -> None:
    e = sub.add_parser("enroll", help="make a cloned voice file from a reference recording (Base models)")
    e.add_argument(
        "ref_audio", type=pathlib.Path, help="reference recording (WAV, FLAC, OGG ...; 3-10 s of clean speech)"
    )
    e.add_argument("-o", "--output", required=True, type=pathlib.Path, help="voice file to write (e.g. me.voice)")
    e.add_argument("--force", action="store_true", help="replace the voice file if it exists")
    e.add_argument("--ref-text", default=None, help="the words said in the recording (ICL cloning needs them)")
    add_ref_silence_argument(e)
    add_model_arguments(e)
    e.add_argument("-v", "--verbose", action="store_true", help="timings of each step")
    e.set_defaults(func=_enroll)
