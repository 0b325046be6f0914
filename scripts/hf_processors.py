#!/usr/bin/env python3
"""Apply Hugging Face's own logits processors, exactly as `generate` builds them, to given rows.

Reference environment only. For each settings entry the official reference model
(`Qwen3TTSForConditionalGeneration.generate`) is run for a few steps on a checkpoint, with
`GenerationMixin._get_logits_processor` wrapped so that the `LogitsProcessorList` that
`generate` itself builds for the talker and for the code predictor is captured (no processor is
constructed by hand). Those lists are then applied to the requested logit rows.

    .venv-ref/bin/python scripts/hf_processors.py CHECKPOINT IN.npz OUT.npz

IN.npz:  talker_rows [R, V] f32, histories [R, L] int64 (padded), lengths [R] int64,
         cp_rows [Q, Vc] f32, text_ids [N] int, request (JSON string: language, speaker,
         settings = list of {do_sample, top_k, top_p, temperature, repetition_penalty})
OUT.npz: talker_<i> [R, V], cp_<i> [Q, Vc] for settings entry i.
stdout:  JSON with, per settings entry, the processor classes (+ key attributes) of both lists
         and the `input_ids` lengths the talker's processors saw during generate.
"""

from __future__ import annotations

import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402


def describe(processors) -> list[dict]:
    out = []
    for p in processors:
        attrs = {}
        for name in (
            "penalty",
            "min_length",
            "min_new_tokens",
            "prompt_length_to_skip",
            "temperature",
            "top_k",
            "top_p",
            "min_tokens_to_keep",
            "eos_token_id",
            "suppress_tokens",
        ):
            if hasattr(p, name):
                value = getattr(p, name)
                if hasattr(value, "tolist"):
                    value = value.tolist()
                if name == "suppress_tokens":
                    value = {"count": len(value), "min": min(value), "max": max(value)}
                attrs[name] = value
        out.append({"class": type(p).__name__, **attrs})
    return out


def main(argv: list[str]) -> int:
    checkpoint, in_path, out_path = argv
    import torch
    from transformers.generation import utils as gen_utils
    from transformers.generation.logits_process import LogitsProcessorList

    from kazetts.validation.reference import load_strict

    torch.set_num_threads(1)
    data = np.load(in_path)
    request = json.loads(str(data["request"]))
    model, _codec = load_strict(checkpoint)
    talker_cls = type(model.talker).__name__
    cp_cls = type(model.talker.code_predictor).__name__

    captured: list[tuple[str, LogitsProcessorList]] = []
    seen_lengths: dict[int, list[int]] = {}
    original_get = gen_utils.GenerationMixin._get_logits_processor
    original_call = LogitsProcessorList.__call__

    def get_logits_processor(self, *args, **kwargs):
        processors = original_get(self, *args, **kwargs)
        captured.append((type(self).__name__, processors))
        return processors

    def call(self, input_ids, scores, **kwargs):
        seen_lengths.setdefault(id(self), []).append(int(input_ids.shape[-1]))
        return original_call(self, input_ids, scores, **kwargs)

    gen_utils.GenerationMixin._get_logits_processor = get_logits_processor
    LogitsProcessorList.__call__ = call

    text_ids = torch.from_numpy(data["text_ids"].astype(np.int64))[None]
    report, outputs = [], {}
    for index, s in enumerate(request["settings"]):
        captured.clear()
        seen_lengths.clear()
        torch.manual_seed(0)
        with torch.no_grad():
            model.generate(
                input_ids=[text_ids],
                languages=[request["language"]],
                speakers=[request["speaker"]],
                non_streaming_mode=True,
                max_new_tokens=4,
                do_sample=s["do_sample"],
                top_k=s["top_k"],
                top_p=s["top_p"],
                temperature=s["temperature"],
                repetition_penalty=s["repetition_penalty"],
                subtalker_dosample=s["do_sample"],
                subtalker_top_k=s["top_k"],
                subtalker_top_p=s["top_p"],
                subtalker_temperature=s["temperature"],
            )
        talker_lists = [p for name, p in captured if name == talker_cls]
        cp_lists = [p for name, p in captured if name == cp_cls]
        assert len(talker_lists) == 1 and cp_lists, [name for name, _ in captured]
        talker_list, cp_list = talker_lists[0], cp_lists[0]
        # the replay calls below must not be recorded as generate's
        talker_seen = list(seen_lengths.get(id(talker_list), []))

        rows = []
        for row, hist, length in zip(data["talker_rows"], data["histories"], data["lengths"]):
            ids = torch.from_numpy(hist[:length].astype(np.int64))[None]
            scores = torch.from_numpy(row.astype(np.float32))[None]
            rows.append(talker_list(ids, scores.clone())[0].numpy())
        outputs[f"talker_{index}"] = np.stack(rows)
        cp_rows = []
        for step, row in enumerate(data["cp_rows"]):
            ids = torch.zeros((1, step % 15), dtype=torch.int64)
            scores = torch.from_numpy(row.astype(np.float32))[None]
            cp_rows.append(cp_list(ids, scores.clone())[0].numpy())
        outputs[f"cp_{index}"] = np.stack(cp_rows)
        report.append(
            {
                "settings": s,
                "talker": describe(talker_list),
                "code_predictor": describe(cp_list),
                "code_predictor_lists": len(cp_lists),
                "talker_input_ids_lengths_during_generate": talker_seen,
            }
        )
    np.savez(out_path, **outputs)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
