#!/usr/bin/env python3
"""Check synthetic checkpoint tensor names and shapes against the official PyTorch reference.

Runs in the reference environment (`make ref`: torch + qwen-tts). For every preset and model
type it builds the reference `Qwen3TTSForConditionalGeneration` and the 12 Hz codec
(`Qwen3TTSTokenizerV2Model`) on the meta device (no memory, cheap even for 1.7b) and compares
their state-dict names and shapes with `kazetts.synthetic.weights.model_specs` / `codec_specs`.
Prints one line per (preset, model type) with tensor counts, state-dict value counts (parameters
and persistent buffers such as codebooks) and parameter counts, then every mismatch; exits 1 on
any mismatch.

    python scripts/check_reference_shapes.py                 # all presets
    python scripts/check_reference_shapes.py tiny 1.7b
    python scripts/check_reference_shapes.py --load DIR ...  # strict-load written checkpoints
"""

from __future__ import annotations

import argparse
import logging
import pathlib
import sys
import warnings

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from kazetts.synthetic import presets, weights  # noqa: E402

PROJECTION = "talker.code_predictor.small_to_mtp_projection.weight"


def _quiet() -> None:
    warnings.filterwarnings("ignore")
    logging.getLogger("transformers").setLevel(logging.ERROR)
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
    except ImportError:
        pass


def _shapes(module) -> dict[str, tuple[int, ...]]:
    return {name: tuple(t.shape) for name, t in module.state_dict().items()}


def _params(module) -> int:
    return sum(p.numel() for p in module.parameters())


def _numel(shapes: dict[str, tuple[int, ...]]) -> int:
    total = 0
    for shape in shapes.values():
        n = 1
        for d in shape:
            n *= int(d)
        total += n
    return total


def compare(what: str, reference: dict, specs: dict) -> list[str]:
    """Mismatch lines between reference shapes and synthetic specs ({name: (shape, Init)})."""
    ours = {name: tuple(int(d) for d in spec[0]) for name, spec in specs.items()}
    out = [
        f"{what}: missing from synthetic specs: {name} {list(reference[name])}"
        for name in sorted(set(reference) - set(ours))
    ]
    out += [f"{what}: not in the reference: {name} {list(ours[name])}" for name in sorted(set(ours) - set(reference))]
    out += [
        f"{what}: shape of {name}: reference {list(reference[name])}, synthetic {list(ours[name])}"
        for name in sorted(set(ours) & set(reference))
        if ours[name] != reference[name]
    ]
    return out


def check_presets(names: list[str]) -> int:
    import torch

    from kazetts.validation.reference import load_reference

    ref = load_reference()
    failures = 0
    for preset in names:
        codec_cfg = presets.codec_config(preset)
        try:
            with torch.device("meta"):
                codec = ref.Qwen3TTSTokenizerV2Model(ref.Qwen3TTSTokenizerV2Config(**codec_cfg))
            codec_ref, codec_params = _shapes(codec), _params(codec)
            del codec
        except Exception as err:  # report and carry on with the other presets
            print(f"{preset:<10} codec: reference construction failed: {type(err).__name__}: {err}")
            failures += 1
            continue
        codec_problems = compare(f"{preset} codec", codec_ref, weights.codec_specs(codec_cfg))
        for model_type in presets.MODEL_TYPES:
            config = presets.model_config(preset, model_type)
            try:
                with torch.device("meta"):
                    model = ref.Qwen3TTSForConditionalGeneration(ref.Qwen3TTSConfig(**config))
                model_ref, model_params = _shapes(model), _params(model)
                del model
            except Exception as err:
                print(f"{preset:<10} {model_type:<13} reference construction failed: {type(err).__name__}: {err}")
                failures += 1
                continue
            specs = weights.model_specs(config)
            problems = compare(f"{preset} {model_type}", model_ref, specs) + codec_problems
            talker = config["talker_config"]
            expected = talker["hidden_size"] != talker["code_predictor_config"]["hidden_size"]
            in_ref, in_specs = PROJECTION in model_ref, PROJECTION in specs
            if in_ref != expected or in_specs != expected:
                problems.append(
                    f"{preset} {model_type}: small_to_mtp_projection expected "
                    f"{'present' if expected else 'absent'} (talker hidden {talker['hidden_size']}, "
                    f"code predictor hidden {talker['code_predictor_config']['hidden_size']}); "
                    f"reference {'has' if in_ref else 'lacks'} it, synthetic {'has' if in_specs else 'lacks'} it"
                )
            status = "OK" if not problems else f"{len(problems)} MISMATCHES"
            print(
                f"{preset:<10} {model_type:<13} model {len(model_ref):3d} tensors {_numel(model_ref):>13,d} values"
                f" ({model_params:,d} params) | codec {len(codec_ref):3d} tensors {_numel(codec_ref):>11,d} values"
                f" ({codec_params:,d} params)"
                f" | small_to_mtp_projection: {'yes' if in_ref else 'no'} | {status}"
            )
            for line in problems:
                print(f"    {line}")
            failures += bool(problems)
    return 1 if failures else 0


def load_dirs(dirs: list[pathlib.Path]) -> int:
    """Strict-load each checkpoint with the reference; prints tensor and parameter counts."""
    from kazetts.validation.reference import load_strict

    failures = 0
    for d in dirs:
        try:
            model, codec = load_strict(d)
        except Exception as err:
            message = " ".join(str(err).split())
            print(f"FAILED {d}: {type(err).__name__}: {message}")
            failures += 1
            continue
        counts = []
        for what, module in (("model", model), ("codec", codec)):
            state = module.state_dict()
            values = sum(t.numel() for t in state.values())
            params = sum(p.numel() for p in module.parameters())
            counts.append(f"{what} {len(state)} tensors {values} values ({params} params)")
        print(f"loaded {d}: " + " | ".join(counts))
        del model, codec
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "presets", nargs="*", metavar="PRESET", help=f"presets to check (default: all of {', '.join(presets.PRESETS)})"
    )
    parser.add_argument(
        "--load",
        nargs="+",
        type=pathlib.Path,
        metavar="DIR",
        help="instead, strict-load these checkpoint directories with kazetts.validation.reference.load_strict",
    )
    args = parser.parse_args(argv)
    unknown = [p for p in args.presets if p not in presets.PRESETS]
    if unknown:
        parser.error(f"unknown preset(s) {', '.join(unknown)}; choose from {', '.join(presets.PRESETS)}")
    if args.load and args.presets:
        parser.error("give either presets or --load DIR ..., not both")
    _quiet()
    if args.load:
        return load_dirs(args.load)
    return check_presets(args.presets or list(presets.PRESETS))


if __name__ == "__main__":
    sys.exit(main())
