#!/usr/bin/env python3
"""Dump every stage of the official PyTorch reference (qwen-tts 0.1.1) to dumps/<case>/.

Runs in the reference environment (`make ref`): float32, eager attention, greedy, one thread
(so the numbers are reproducible bit for bit on one machine). Cases are defined in
kazetts/validation/goldens.py; their synthetic checkpoints are rebuilt here from (preset, type, seed) and
their sha256 recorded, so a golden always names the exact weights it came from.

    .venv-ref/bin/python scripts/dump_goldens.py                 # all cases -> dumps/
    .venv-ref/bin/python scripts/dump_goldens.py --cases long_window --out /tmp/d
"""

from __future__ import annotations

import argparse
import importlib.metadata
import pathlib
import platform
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from kazetts.validation import goldens  # noqa: E402
from kazetts.synthetic import presets  # noqa: E402
from kazetts.synthetic.checkpoint import make_checkpoint  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]


def _versions() -> dict:
    names = ["torch", "transformers", "qwen-tts", "numpy", "tokenizers"]
    return {name: importlib.metadata.version(name) for name in names}


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class Recorder:
    """Forward hooks that record what the reference computes at each stage boundary."""

    def __init__(self, model, codec):
        self.calls: dict[str, list] = {"embeds": [], "hidden": [], "logits": [], "cp": []}
        talker = model.talker
        self.handles = [
            talker.model.register_forward_pre_hook(self._talker_input, with_kwargs=True),
            talker.model.register_forward_hook(self._talker_hidden),
            talker.codec_head.register_forward_hook(self._talker_logits),
        ]
        self.handles += [head.register_forward_hook(self._cp_logits) for head in talker.code_predictor.lm_head]
        decoder = codec.decoder
        self.codec: dict[str, np.ndarray] = {}
        self.handles += [
            decoder.pre_conv.register_forward_hook(self._store("codec_pre_conv")),
            decoder.pre_transformer.register_forward_hook(self._store("codec_transformer", transpose=True)),
            decoder.upsample[-1][-1].register_forward_hook(self._store("codec_upsample")),
        ]
        original_decode = decoder.quantizer.decode

        def quantizer_decode(codes):
            out = original_decode(codes)
            self.codec["codec_quantized"] = out[0].detach().numpy().copy()
            return out

        decoder.quantizer.decode = quantizer_decode

    def _talker_input(self, module, args, kwargs):
        self.calls["embeds"].append(kwargs["inputs_embeds"][0].detach().numpy().copy())

    def _talker_hidden(self, module, args, output):
        self.calls["hidden"].append(output.last_hidden_state[0, -1].detach().numpy().copy())

    def _talker_logits(self, module, args, output):
        self.calls["logits"].append(output[0, -1].detach().numpy().copy())

    def _cp_logits(self, module, args, output):
        self.calls["cp"].append(output[0, -1].detach().numpy().copy())

    def _store(self, name, transpose=False):
        def hook(module, args, output):
            value = output.last_hidden_state if hasattr(output, "last_hidden_state") else output
            value = value[0].detach().numpy()
            self.codec[name] = (value.T if transpose else value).copy()

        return hook


def reference_tokenize(processor, text: str):
    """Token ids [1, N] exactly as Qwen3TTSModel._tokenize_texts makes them."""
    ids = processor(text=text, return_tensors="pt", padding=True)["input_ids"]
    return ids if ids.dim() == 2 else ids.unsqueeze(0)


def voice_clone(
    model, codec, processor, checkpoint: pathlib.Path, case: goldens.Case, dumps: pathlib.Path, arrays: dict
) -> np.ndarray:
    """Clones the case's recording through the reference's own API: Qwen3TTSModel's
    create_voice_clone_prompt (audio loading, resampling, x-vector, codec-encoder codes) and
    generate_voice_clone. Records the x-vector (and the reference codes for ICL); returns the codes."""
    import torch
    from transformers import AutoFeatureExtractor
    from qwen_tts.inference.qwen3_tts_model import Qwen3TTSModel
    from qwen_tts.inference.qwen3_tts_tokenizer import Qwen3TTSTokenizer

    tokenizer = Qwen3TTSTokenizer()  # what Qwen3TTSTokenizer.from_pretrained builds, around our strict load
    tokenizer.model, tokenizer.config, tokenizer.device = codec, codec.config, torch.device("cpu")
    tokenizer.feature_extractor = AutoFeatureExtractor.from_pretrained(checkpoint / "speech_tokenizer")
    model.load_speech_tokenizer(tokenizer)
    tts = Qwen3TTSModel(model, processor)
    items = tts.create_voice_clone_prompt(
        ref_audio=str(goldens.recording_path(dumps, case.ref_audio)),
        ref_text=case.ref_text,
        x_vector_only_mode=case.ref_text is None,
    )
    arrays["xvector"] = items[0].ref_spk_embedding.numpy().astype(np.float32)
    if items[0].ref_code is not None:
        arrays["ref_codes"] = items[0].ref_code.numpy().astype(np.int32)
    generated = {}
    generate = model.generate

    def keep_codes(*args, **kwargs):
        out = generate(*args, **kwargs)
        generated["codes"] = out[0][0]
        return out

    model.generate = keep_codes
    tts.generate_voice_clone(
        case.text,
        language=case.language,
        voice_clone_prompt=items,
        non_streaming_mode=case.non_streaming,
        max_new_tokens=case.max_new_tokens,
        do_sample=False,
        subtalker_dosample=False,
    )
    return generated["codes"].numpy().astype(np.int32)


def run_case(case: goldens.Case, checkpoint: pathlib.Path, out_dir: pathlib.Path) -> dict:
    import torch
    from transformers import AutoTokenizer

    from kazetts.validation.reference import load_strict

    model, codec = load_strict(checkpoint)
    from qwen_tts.core.models.processing_qwen3_tts import Qwen3TTSProcessor

    # As Qwen3TTSModel.from_pretrained does (fix_mistral_regex=True): transformers 4.57.3 then
    # swaps in the Mistral pre-tokenizer regex for local checkpoints whose config.json does not
    # say transformers <= 4.57.2. The manifest records whether that changed any id.
    processor = Qwen3TTSProcessor(tokenizer=AutoTokenizer.from_pretrained(checkpoint, fix_mistral_regex=True))
    plain = AutoTokenizer.from_pretrained(checkpoint)

    text = f"<|im_start|>assistant\n{case.text}<|im_end|>\n<|im_start|>assistant\n"
    text_ids = reference_tokenize(processor, text)
    arrays: dict[str, np.ndarray] = {"text_ids": text_ids[0].numpy().astype(np.int32)}
    kwargs = {}
    if case.instruct is not None:
        instruct_ids = reference_tokenize(processor, f"<|im_start|>user\n{case.instruct}<|im_end|>\n")
        kwargs["instruct_ids"] = [instruct_ids]
        arrays["instruct_ids"] = instruct_ids[0].numpy().astype(np.int32)
    if case.xvector_seed is not None:
        hidden = model.config.talker_config.hidden_size
        xvector = np.random.default_rng(case.xvector_seed).standard_normal(hidden).astype(np.float32)
        arrays["xvector"] = xvector
        kwargs["voice_clone_prompt"] = {
            "ref_spk_embedding": [torch.from_numpy(xvector)],
            "x_vector_only_mode": [True],
            "icl_mode": [False],
            "ref_code": None,
        }
    recorder = Recorder(model, codec)
    torch.manual_seed(0)
    if case.ref_audio is not None:
        codes = voice_clone(model, codec, processor, checkpoint, case, REPO / "dumps", arrays)
    else:
        codes_list, _ = model.generate(
            input_ids=[text_ids],
            languages=[case.language],
            speakers=[case.speaker],
            non_streaming_mode=case.non_streaming,
            max_new_tokens=case.max_new_tokens,
            do_sample=False,
            subtalker_dosample=False,
            **kwargs,
        )
        codes = codes_list[0].numpy().astype(np.int32)
    calls = recorder.calls
    n_frames, n_calls = codes.shape[0], len(calls["logits"])
    arrays.update(
        {
            "prompt_embeds": calls["embeds"][0],
            "talker_inputs": np.stack([e[-1] for e in calls["embeds"][1:]]),
            "talker_hidden": np.stack(calls["hidden"]),
            "talker_logits": np.stack(calls["logits"]),
            "codes": codes,
        }
    )
    n_cp = min(n_frames, goldens.CP_LOGIT_FRAMES)
    groups = codes.shape[1] - 1
    arrays["cp_logits"] = np.stack(calls["cp"][: n_cp * groups]).reshape(n_cp, groups, -1)
    with torch.no_grad():
        wav = codec.decoder(torch.from_numpy(codes.T[None].astype(np.int64)))
    arrays["waveform"] = wav[0, 0].numpy().copy()
    arrays.update(recorder.codec)

    eos = model.config.talker_config.codec_eos_token_id
    manifest = {
        "case": goldens.case_dict(case),
        "frames": n_frames,
        "talker_calls": n_calls,
        "stopped_by": "eos" if n_calls < case.max_new_tokens else "max_new_tokens",
        "codec_eos_token_id": eos,
        "qwen2_regex_ids_differ": plain(text)["input_ids"] != arrays["text_ids"].tolist(),
        "checkpoint": {
            "preset": case.preset,
            "model_type": case.model_type,
            "seed": case.checkpoint_seed,
            "dtype": presets.default_dtype(case.preset),
            "sha256": goldens.checkpoint_digests(checkpoint),
        },
        "settings": {
            "dtype": "float32",
            "attn_implementation": "eager",
            "greedy": True,
            "threads": torch.get_num_threads(),
            "non_streaming_mode": case.non_streaming,
            "max_new_tokens": case.max_new_tokens,
            "repetition_penalty": 1.05,
            "min_new_tokens": 2,
            "codec_decode": "decoder.forward (one chunk)",
        },
        "versions": _versions(),
        "machine": {"cpu": cpu_model(), "arch": platform.machine()},
    }
    if case.ref_audio is not None:
        path = goldens.recording_path(REPO / "dumps", case.ref_audio)
        manifest["ref_audio"] = {
            "file": path.name,
            "sha256": goldens.sha256_file(path),
            "text": goldens.RECORDINGS[case.ref_audio].text,
        }
        manifest["settings"]["api"] = "Qwen3TTSModel.generate_voice_clone"
    goldens.save_case(out_dir / case.name, manifest, arrays)
    return manifest


def clone_wrapper(model, codec, processor, checkpoint: pathlib.Path):
    """The reference's Qwen3TTSModel around our strictly loaded model, with its speech tokenizer
    (Qwen3TTSTokenizer: feature extractor + codec) attached as from_pretrained does."""
    from transformers import AutoFeatureExtractor

    importlib.import_module("qwen_tts.inference.qwen3_tts_tokenizer")
    wrapper_mod = importlib.import_module("qwen_tts.inference.qwen3_tts_model")
    tok_mod = sys.modules["qwen_tts.inference.qwen3_tts_tokenizer"]
    tokenizer = tok_mod.Qwen3TTSTokenizer()
    tokenizer.model, tokenizer.config = codec, codec.config
    tokenizer.feature_extractor = AutoFeatureExtractor.from_pretrained(checkpoint / "speech_tokenizer")
    tokenizer.device = next(codec.parameters()).device
    model.load_speech_tokenizer(tokenizer)
    return wrapper_mod.Qwen3TTSModel(model, processor), wrapper_mod.VoiceClonePromptItem


def run_clone_case(
    case: goldens.Case, checkpoint: pathlib.Path, out_dir: pathlib.Path, audio_dir: pathlib.Path
) -> dict:
    """A voice-clone case through the reference's own API: create_voice_clone_prompt's steps
    (audio loading, resampling, speech_tokenizer.encode, extract_speaker_embedding), then
    generate_voice_clone with that prompt (decode of [ref; generated] and the cut)."""
    import librosa
    import torch
    from transformers import AutoTokenizer

    from kazetts.validation.reference import load_strict

    model, codec = load_strict(checkpoint)  # registers the 12 Hz modules first
    from qwen_tts.core.models.processing_qwen3_tts import Qwen3TTSProcessor

    processor = Qwen3TTSProcessor(tokenizer=AutoTokenizer.from_pretrained(checkpoint, fix_mistral_regex=True))
    wrapper, PromptItem = clone_wrapper(model, codec, processor, checkpoint)
    wav_path = str(audio_dir / case.ref_audio)

    # create_voice_clone_prompt, step by step, to keep what each stage saw
    ((wav, sr),) = wrapper._normalize_audio_inputs([wav_path])
    enc_stages: dict[str, np.ndarray] = {}
    encoder = codec.encoder
    fed: dict[str, np.ndarray] = {}

    def keep(name, transpose=False):
        def hook(module, args, output):
            value = output.last_hidden_state if hasattr(output, "last_hidden_state") else output
            value = value[0].detach().float().numpy()
            enc_stages[name] = (value.T if transpose else value).copy()

        return hook

    handles = [
        encoder.encoder.register_forward_hook(keep("enc_seanet")),
        encoder.encoder_transformer.register_forward_hook(keep("enc_transformer", transpose=True)),
        encoder.downsample.register_forward_hook(keep("enc_downsampled")),
        encoder.encoder.register_forward_pre_hook(lambda m, a: fed.update(pcm=a[0][0, 0].numpy().copy())),
    ]
    ref_code = model.speech_tokenizer.encode([wav], sr=sr).audio_codes[0]
    for h in handles:
        h.remove()
    pcm24 = (
        wav
        if sr == model.speaker_encoder_sample_rate
        else librosa.resample(y=wav.astype(np.float32), orig_sr=int(sr), target_sr=model.speaker_encoder_sample_rate)
    )
    xvector = model.extract_speaker_embedding(audio=pcm24, sr=model.speaker_encoder_sample_rate)
    icl = case.ref_text is not None
    item = PromptItem(
        ref_code=ref_code if icl else None,
        ref_spk_embedding=xvector,
        x_vector_only_mode=not icl,
        icl_mode=icl,
        ref_text=case.ref_text,
    )

    generated: dict[str, np.ndarray] = {}
    original_generate = model.generate

    def generate(*args, **kwargs):
        out = original_generate(*args, **kwargs)
        generated["codes"] = out[0][0].numpy().astype(np.int32)
        return out

    model.generate = generate
    recorder = Recorder(model, codec)
    torch.manual_seed(0)
    wavs, _ = wrapper.generate_voice_clone(
        case.text,
        language=case.language,
        voice_clone_prompt=[item],
        non_streaming_mode=case.non_streaming,
        max_new_tokens=case.max_new_tokens,
        do_sample=False,
        subtalker_dosample=False,
    )
    codes, calls = generated["codes"], recorder.calls
    text_ids = reference_tokenize(processor, wrapper._build_assistant_text(case.text))
    arrays: dict[str, np.ndarray] = {
        "text_ids": text_ids[0].numpy().astype(np.int32),
        "ref_pcm": fed["pcm"].astype(np.float32),
        "ref_codes": ref_code.numpy().astype(np.int32),
        "xvector": xvector.float().numpy().copy(),
        "prompt_embeds": calls["embeds"][0],
        "talker_inputs": np.stack([e[-1] for e in calls["embeds"][1:]]),
        "talker_hidden": np.stack(calls["hidden"]),
        "talker_logits": np.stack(calls["logits"]),
        "codes": codes,
        "waveform": np.asarray(wavs[0], np.float32),
        **enc_stages,
    }
    if icl:
        arrays["ref_text_ids"] = (
            reference_tokenize(processor, wrapper._build_ref_text(case.ref_text))[0].numpy().astype(np.int32)
        )
    n_calls = len(calls["logits"])
    manifest = {
        "case": goldens.case_dict(case),
        "frames": int(codes.shape[0]),
        "ref_frames": int(ref_code.shape[0]),
        "ref_sample_rate": int(sr),
        "talker_calls": n_calls,
        "stopped_by": "eos" if n_calls < case.max_new_tokens else "max_new_tokens",
        "codec_eos_token_id": model.config.talker_config.codec_eos_token_id,
        "checkpoint": {
            "preset": case.preset,
            "model_type": case.model_type,
            "seed": case.checkpoint_seed,
            "dtype": "bfloat16",
            "sha256": goldens.checkpoint_digests(checkpoint),
        },
        "ref_audio_sha256": goldens.sha256_file(audio_dir / case.ref_audio),
        "settings": {
            "dtype": "float32",
            "attn_implementation": {"talker": "eager", "codec_encoder": codec.encoder.config._attn_implementation},
            "greedy": True,
            "threads": torch.get_num_threads(),
            "non_streaming_mode": case.non_streaming,
            "max_new_tokens": case.max_new_tokens,
            "api": "create_voice_clone_prompt steps + generate_voice_clone",
        },
        "versions": _versions(),
        "machine": {"cpu": cpu_model(), "arch": platform.machine()},
    }
    goldens.save_case(out_dir, manifest, arrays)
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=pathlib.Path, default=REPO / "dumps")
    parser.add_argument(
        "--cases",
        default=",".join([*goldens.CASES_BY_NAME, *goldens.CLONE_CASES_BY_NAME]),
        help="comma-separated case names",
    )
    parser.add_argument(
        "--checkpoints",
        type=pathlib.Path,
        default=None,
        help="where to build the synthetic checkpoints (default: a temporary directory)",
    )
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    names = [n for n in args.cases.split(",") if n]
    every = {**goldens.CASES_BY_NAME, **goldens.CLONE_CASES_BY_NAME}
    unknown = [n for n in names if n not in every]
    if unknown:
        parser.error(f"unknown case(s) {unknown}; choose from {list(every)}")

    import torch

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        root = args.checkpoints or pathlib.Path(tmp)
        for name in names:
            case = every[name]
            checkpoint = root / f"{case.preset}-{case.model_type}-{case.checkpoint_seed}"
            if not (checkpoint / "model.safetensors").exists():
                make_checkpoint(case.preset, checkpoint, case.model_type, case.checkpoint_seed)
            start = time.perf_counter()
            if name in goldens.CASES_BY_NAME:  # x-vector clones (ref_audio a RECORDINGS entry) included
                manifest = run_case(case, checkpoint, args.out)
            else:
                audio = REPO / "dumps" / goldens.CLONE_DIR / goldens.REF_AUDIO_DIR
                manifest = run_clone_case(case, checkpoint, args.out / goldens.CLONE_DIR / case.name, audio)
            print(
                f"{name:24s} {manifest['frames']:4d} frames, stopped by {manifest['stopped_by']:15s} "
                f"{time.perf_counter() - start:6.1f}s",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
