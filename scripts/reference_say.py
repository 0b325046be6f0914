#!/usr/bin/env python3
"""Synthesize a sentence with the official PyTorch reference on a synthetic checkpoint.

The main job of kazetts' README until the native pipeline lands: it shows the whole path
(checkpoint -> talker -> code predictor -> codec -> WAV) working on weights we build here.
Synthetic weights produce noise-like audio, not speech.

    .venv-ref/bin/python scripts/reference_say.py "Bonjour !" -o out/reference.wav --checkpoint models/tiny
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("text")
    parser.add_argument("-o", "--output", type=pathlib.Path, required=True)
    parser.add_argument("--checkpoint", type=pathlib.Path, required=True)
    parser.add_argument("--speaker", default="vivian")
    parser.add_argument("--language", default="french")
    parser.add_argument("--max-frames", type=int, default=60)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)

    import soundfile
    import torch
    from transformers import AutoTokenizer

    from kazetts.reference import load_strict
    from kazetts.synthetic.checkpoint import missing_files

    missing = missing_files(args.checkpoint)
    if missing:
        parser.exit(2, f"reference_say: {args.checkpoint} is not a complete checkpoint (missing {missing})\n")
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    model, codec = load_strict(args.checkpoint)
    tokenizer = AutoTokenizer.from_pretrained(args.checkpoint, fix_mistral_regex=True)
    loaded = time.perf_counter()
    ids = tokenizer(f"<|im_start|>assistant\n{args.text}<|im_end|>\n<|im_start|>assistant\n", return_tensors="pt")
    codes, _ = model.generate(input_ids=[ids["input_ids"]], languages=[args.language], speakers=[args.speaker],
                              max_new_tokens=args.max_frames + 1, do_sample=False, subtalker_dosample=False)
    generated = time.perf_counter()
    with torch.no_grad():
        wave = codec.decoder(codes[0].T[None])[0, 0].numpy()
    done = time.perf_counter()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    soundfile.write(args.output, wave, 24000)
    frames = codes[0].shape[0]
    print(f"reference: {frames} frames ({frames * 0.08:.2f} s of audio) -> {args.output}")
    print(f"  load {loaded - start:.2f} s | talker+code predictor {1000 * (generated - loaded) / frames:.1f} ms/frame"
          f" | codec {1000 * (done - generated) / frames:.1f} ms/frame | real-time factor "
          f"{(done - loaded) / (frames * 0.08):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
