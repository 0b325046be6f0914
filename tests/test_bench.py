"""The benchmark harness (scripts/bench.py) stays runnable: `make bench-smoke` runs every engine
on a few frames (building llama-tts on first use) and each row must hold figures that add up."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import types

import numpy as np
import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
import bench  # noqa: E402
import bench_llama_tts  # noqa: E402
import bench_report  # noqa: E402

# what tools/tts/tts.cpp prints (LOG_INF format strings of the 0.3.36 sdist)
LLAMA_TTS_LOG = """frames generated: 30, speed: 14.10 frames/s
generated 40 frames, 153644 bytes of WAV audio (24000 Hz)
timings: prompt eval 0.31s + generation 2.84s + vocoder 0.95s = total 4.10s
         output audio = 3.20s (audio time = 0.78x process time)
"""


def test_llama_tts_timings_are_read():
    row = bench_llama_tts.parse(LLAMA_TTS_LOG, process_s=9.0)
    assert row["frames"] == 40 and row["audio_s"] == 3.2
    assert row["prefill_s"] == 0.31 and row["talker_code_predictor_s"] == 2.84 and row["codec_s"] == 0.95
    assert row["request_s"] == row["first_audio_s"] == 4.10
    assert math.isclose(row["load_s"], 4.9)


def test_llama_tts_stages_are_not_split_past_its_audio_window():
    log = LLAMA_TTS_LOG.replace("generated 40 frames", f"generated {bench_llama_tts.WAV_WINDOW} frames")
    row = bench_llama_tts.parse(log, process_s=9.0)
    assert row["talker_code_predictor_s"] is None and row["codec_s"] is None


def test_llama_tts_without_timings_is_an_error():
    with pytest.raises(ValueError):
        bench_llama_tts.parse("failed to load model\n", process_s=1.0)


def _row(engine, **seconds):
    row = {
        "engine": engine,
        "weights": "q8_0",
        "threads": 2,
        "frames": 10,
        "load_s": 1.0,
        "audio_s": 0.8,
        "prefill_s": 0.2,
        "talker_s": 0.5,
        "code_predictor_s": 0.4,
        "codec_s": 0.3,
        "first_audio_s": 0.3,
        "request_s": 1.5,
        "peak_rss_mb": 1000.0,
        "load_peak_rss_mb": 900.0,
    }
    row.update(seconds)
    return row


def test_native_engine_rows_are_held_against_the_python_engine():
    rows = [
        _row("kazetts"),
        _row("kazetts-native", talker_s=0.4, request_s=1.2),
        _row("llama-tts", talker_s=None),
        _row("kazetts-native", threads=1),
    ]
    ratios = bench_report.ratio_table(rows).splitlines()[2:]
    assert [line.split(" | ")[0] for line in ratios] == [
        "| kazetts q8_0 t2 / llama-tts q8_0 t2",
        "| kazetts-native q8_0 t2 / kazetts q8_0 t2",
    ]
    assert "| 0.80 |" in ratios[1]  # talker: 0.4 / 0.5
    target = bench_report.targets(rows)[-1]
    assert target.startswith("- native engine no slower than the Python engine") and target.endswith(": met")
    slower = bench_report.targets([_row("kazetts"), _row("kazetts-native", codec_s=0.6, peak_rss_mb=1100.0)])[-1]
    assert slower.endswith("MISSED on codec, peak rss") and "codec 2.00" in slower


def test_a_repeated_row_is_its_run_of_median_request_time():
    runs = [
        _row("kazetts", request_s=1.5, codec_s=0.3, peak_rss_mb=990.0, forced_cp_equal=0.9),
        _row("kazetts", request_s=1.1, codec_s=0.1, peak_rss_mb=1010.0),
        _row("kazetts", request_s=1.3, codec_s=0.35, peak_rss_mb=980.0),
    ]
    row = bench.median_run(runs)
    assert (row["request_s"], row["codec_s"]) == (1.3, 0.35)  # one run's figures, not each figure's median
    assert row["peak_rss_mb"] == 1010.0 and row["request_s_runs"] == [1.5, 1.1, 1.3]
    assert row["forced_cp_equal"] == 0.9  # the teacher-forced shares come from the first run only
    assert runs[2]["peak_rss_mb"] == 980.0  # the runs themselves are left as they were
    assert bench_report.spread([row]) == [
        "End to end ms/frame over the runs, lowest-highest: kazetts q8_0 t2 110.0-150.0.",
        "",
    ]
    assert bench.median_run([runs[0]]) is runs[0] and bench_report.spread([runs[0]]) == []
    failed = _row("kazetts", error="exit status 1")
    assert bench.median_run([runs[0], failed, runs[1]]) is failed


def test_repeated_rounds_start_one_run_later():
    assert bench.rounds(3, 3) == [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (1, 0), (2, 2), (2, 0), (2, 1)]
    assert bench.rounds(2, 1) == [(0, 0), (0, 1)]  # one round: plan order (F32 before the rows held to it)


def _args(*argv):
    import argparse

    a = argparse.Namespace(
        threads=[2],
        models=["base"],
        engines=bench.ENGINES,
        weights=["q8_0"],
        variants=[],
        kazetts_prompts=bench_report.PROMPTS,
    )
    for key, value in zip(argv[::2], argv[1::2]):
        setattr(a, key, value)
    return a


def test_variants_run_on_the_kazetts_engines_beside_f32():
    runs = bench.plan(_args("variants", ["q4_k_m/q8_0"], "models", ["base", "custom_voice"]))
    kazetts = [(m, e, w, p) for _, m, e, w, p in runs if e in bench.WORKERS]
    assert ("base", "kazetts", "f32", "non-streaming") in kazetts  # the codes the variants are held to
    assert ("base", "kazetts", "q4_k_m/q8_0", "non-streaming") in kazetts
    assert ("base", "kazetts", "q4_k_m/q8_0", "streaming") not in kazetts  # F32's codes: non-streaming only
    assert ("base", "kazetts", "q8_0", "streaming") in kazetts
    assert ("custom_voice", "kazetts-native", "q4_k_m/q8_0", "non-streaming") in kazetts
    others = {(m, e, w) for _, m, e, w, _ in runs if e not in bench.WORKERS}
    assert others == {("base", "llama-tts", "q8_0"), ("base", "reference", "f32")}
    assert not any(e in bench.WORKERS and w == "f32" for _, _, e, w, _ in bench.plan(_args()))  # no variants: no F32


def test_variant_names_are_checked():
    assert bench.variant("Q4_K_M/q8_0") == "q4_k_m/q8_0" and bench.variant("q4_0") == "q4_0"
    for bad in ("q4_k_m/q4_k_m", "q3_k/q8_0", "q8_0/q5_0"):
        with pytest.raises(Exception, match="talker one of"):
            bench.variant(bad)


def test_codes_are_held_against_f32(tmp_path):
    f32 = np.arange(64, dtype=np.int32).reshape(4, 16)
    unlike = f32.copy()
    unlike[2, 5] = -1
    rows = []
    for weights, codes in (("f32", f32), ("q4_0", unlike), ("q8_0", f32[:3])):
        np.save(tmp_path / f"{weights}.npy", codes)
        rows.append(
            _row(
                "kazetts",
                weights=weights,
                prompt="non-streaming",
                model="base",
                codes_file=str(tmp_path / f"{weights}.npy"),
            )
        )
    rows.append(_row("llama-tts", prompt="non-streaming", model="base"))
    rows[1].update(forced_cb0_equal=0.75, forced_cp_equal=0.9)
    rows[2]["forced_error"] = "exit status 1"
    assert bench.f32_codes(rows, "base", 2, "non-streaming") == str(tmp_path / "f32.npy")
    assert bench.f32_codes(rows, "base", 1, "non-streaming") is None
    bench.codes_agreement(rows)
    assert rows[0]["codes_equal_f32"] == 1.0 and rows[0]["first_frame_unlike_f32"] is None
    assert rows[1]["codes_equal_f32"] == 63 / 64 and rows[1]["first_frame_unlike_f32"] == 2
    assert rows[2]["codes_equal_f32"] == 48 / 64 and rows[2]["first_frame_unlike_f32"] == 3  # a missing frame differs
    assert "codes_equal_f32" not in rows[3]
    cells = [line.rsplit(" | ", 2)[-2:] for line in bench_report.table(rows).splitlines()[2:]]
    assert cells == [
        ["1000", "100.0% |"],
        ["1000", "98.4% (frame 2); forced 75.0% / 90.0% |"],
        ["1000", "75.0% (frame 3); forced: FAILED |"],
        ["1000", "n/a |"],
    ]


def test_forced_agreement_counts_the_picks_against_the_forced_codes(tiny_gguf):
    """Teacher-forced on its own greedy codes a model agrees fully; on codes whose CB1..15 are
    not its own, its code predictor's picks almost never equal them."""
    import bench_kazetts
    from kazetts.engine.tts import TTS
    from kazetts.request import Request

    tts = TTS(*tiny_gguf(), threads=2, codec_weights="f32")
    request = Request(language="auto", text_streaming=False, greedy=True, speaker="vivian")
    text = "One two three."
    codes = tts.synthesize(text, request, max_frames=12).codes
    assert len(codes) == 12
    assert bench_kazetts.forced_agreement(tts, text, request, codes) == {
        "forced_cb0_equal": 1.0,
        "forced_cp_equal": 1.0,
    }
    other = codes.copy()
    other[:, 1:] = (other[:, 1:] + 1) % (codes.max() + 1)
    assert bench_kazetts.forced_agreement(tts, text, request, other)["forced_cp_equal"] < 0.1


def test_forced_frames_feed_the_forced_codes_back():
    """What the talker gets back is the forced frame (codes, their embedding, CB0 in the
    penalty's history), whatever the model picked."""
    import bench_kazetts

    class Predictor:
        def predict(self, hidden, cb0):
            return np.full(15, 7, np.int32), None

        def embed_codes(self, codes):
            return codes.astype(np.float32) * 2

    forced = np.arange(32, dtype=np.int32).reshape(2, 16)
    forced[1, 1:4] = 7
    sampler = types.SimpleNamespace(history=[5, 9])  # the model picked 9 at frame 1
    frames = bench_kazetts.ForcedFrames(Predictor(), forced, sampler)
    codes, embedding = frames.predict(np.zeros(4, np.float32), 9, 1)
    assert np.array_equal(codes, forced[1]) and np.array_equal(embedding, forced[1] * 2.0)
    assert sampler.history == [5, 16] and frames.cb0_equal == 0 and frames.cp_equal == 3


def test_custom_voice_rows_are_not_held_against_base_peers():
    rows = [_row("kazetts", model="custom_voice"), _row("llama-tts", model="base"), _row("kazetts", model="base")]
    ratios = [line.split(" | ")[0] for line in bench_report.ratio_table(rows).splitlines()[2:]]
    assert ratios == ["| kazetts q8_0 t2 / llama-tts q8_0 t2"]
    assert bench_report.label(rows[0]) == "kazetts CustomVoice q8_0 t2"


def test_variant_files_are_quantized_from_f32_once(tiny_checkpoint, tiny_gguf, tmp_path, monkeypatch):
    import bench_common
    from kazetts.gguf.header import GGUFHeader

    monkeypatch.setattr(bench_common, "CACHE", tmp_path)  # the session's tiny files, not the bench's cache
    monkeypatch.setattr(
        bench_common, "checkpoint", lambda preset, model_type, seed: tiny_checkpoint(preset, model_type, seed)
    )
    monkeypatch.setattr(
        bench_common, "converted", lambda preset, t, model_type, seed: tiny_gguf(preset, model_type, t, seed)
    )
    talker, mmproj = bench.model_files("tiny", "q4_0/q8_0", "custom_voice", 0)
    assert talker.parent.parent == tmp_path and talker.name.endswith("-talker-q4_0.gguf")
    assert mmproj == tiny_gguf("tiny", "custom_voice", "q8_0")[1]
    assert GGUFHeader(talker).tensors["blk.0.attn_q.weight"][1].name == "Q4_0"
    assert GGUFHeader(talker).kv["general.architecture"] == "qwen3tts"
    made = talker.stat().st_mtime_ns
    assert bench.model_files("tiny", "q4_0/q8_0", "custom_voice", 0)[0].stat().st_mtime_ns == made


def _results(rows, **meta):
    """A run's JSON as scripts/bench.py writes it."""
    m = {
        "date": "2026-12-03 12:37 UTC",
        "cpu": "AMD EPYC",
        "cores": 2,
        "commit": "c84e802",
        "preset": "0.6b",
        "models": ["base"],
        "seed": 0,
        "frames": 10,
        "words": 20,
        "codec": "f16",
        "chunk_frames": 4,
        "reps": 1,
        "load_average": [0.94, 1.79],
    }
    m.update(meta)
    return {"title": "kazetts vs llama-tts vs PyTorch, 0.6b, 10 frames", "meta": m, "rows": rows}


def test_a_run_is_recorded_as_its_results_json(tmp_path):
    results = _results([_row("kazetts"), _row("llama-tts", talker_s=None)])
    path = bench.record(results, tmp_path / "runs")
    assert path == tmp_path / "runs" / "2026-12-03-1237-c84e802.json"
    assert json.loads(path.read_text()) == results
    dirty = _results([], date="2026-12-04 08:05 UTC", commit="c84e802 + uncommitted changes")["meta"]
    assert bench.run_name(dirty) == "2026-12-04-0805-c84e802-dirty.json"


def test_a_full_run_is_recorded_as_data_not_appended_to_the_page():
    recipe = (REPO / "mk" / "bench.mk").read_text().split("\nbench:", 1)[1].split("\n\n", 1)[0]
    assert "--record docs/bench/runs" in recipe and "--chart docs/benchmarks.png" in recipe
    assert "benchmarks.md" not in recipe and "--report" not in recipe
    usage = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "bench.py"), "--help"], capture_output=True, text=True, cwd=REPO
    )
    assert usage.returncode == 0 and "--record DIR" in usage.stdout and "--report" not in usage.stdout


def test_a_run_renders_from_its_json(tmp_path):
    rows = [
        _row("kazetts", prompt="non-streaming"),
        _row("kazetts", prompt="streaming", first_audio_s=0.1),
        _row("llama-tts", talker_s=None, code_predictor_s=None, talker_code_predictor_s=1.2, request_s=4.0),
        _row("reference", weights="f32", request_s=6.0),
    ]
    results = _results(rows)
    older = bench.record(_results(rows, date="2026-12-02 09:00 UTC", commit="1a2b3c4"), tmp_path / "runs")
    path = bench.record(results, tmp_path / "runs")
    text = bench_report.report(results)
    assert text.startswith(
        "## 2026-12-03 12:37 UTC: AMD EPYC, 2 cores, commit c84e802\n\npreset `0.6b` (synthetic "
        "Base, seed 0), 10 frames (0.80 s of audio) of a 20-word French paragraph, greedy, "
    )
    assert "reference float32 SDPA; load average 0.94 before, 1.79 after.\n" in text
    for part in (bench_report.table(rows), bench_report.ratio_table(rows), "\n".join(bench_report.targets(rows))):
        assert part in text
    assert "- speed-up over llama-tts: 2.67 x (>= 3 x): MISSED" in text  # 400 / 150 ms/frame
    for arg, run in ((path, path), (older, older), (tmp_path / "runs", path)):  # a directory: its latest run
        r = subprocess.run(
            [sys.executable, str(REPO / "scripts" / "bench_report.py"), str(arg)],
            capture_output=True,
            text=True,
            cwd=REPO,
        )
        assert r.returncode == 0 and run.name in r.stdout.splitlines()[0], r.stderr
        assert r.stdout.endswith(bench_report.report(json.loads(run.read_text())) + "\n")
    repeated = bench_report.report(_results(rows, preset="1.7b", reps=5, models=["base", "custom_voice"]))
    assert "(synthetic Base and CustomVoice, seed 0)" in repeated and "of 5 interleaved runs" in repeated
    assert repeated.rstrip().endswith("targets: judged on the 0.6b preset")
    meta = {k: results["meta"][k] for k in ("date", "cpu", "cores", "commit")}  # a run that kept no settings
    bare = {"title": "an older results.json", "meta": meta, "rows": rows}
    assert "\n\nan older results.json\n\n| engine |" in bench_report.report(bare)


def test_smoke_run(ref_python, tmp_path):
    out = tmp_path / "bench"
    r = subprocess.run(
        ["make", "--no-print-directory", "bench-smoke", f"BENCH_SMOKE_OUT={out}"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=3600,
    )
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    results = json.loads((out / "results.json").read_text())
    rows = results["rows"]
    assert {row["engine"] for row in rows} == {"kazetts", "kazetts-native", "llama-tts", "reference"}
    frames = rows[0]["frames"]
    for row in rows:
        assert not row.get("error"), row
        assert row["frames"] == frames and math.isclose(row["audio_s"], frames * 0.08, rel_tol=0.01), row
        figures = bench_report.figures(row)
        assert all(v is None or v > 0 for v in figures.values()), row
        stages = row["prefill_s"] + sum(
            row.get(k) or 0.0 for k in ("talker_s", "code_predictor_s", "talker_code_predictor_s", "codec_s")
        )
        # the stages are parts of the request: together no longer than it (llama-tts rounds to 10 ms)
        assert 0 < stages <= row["request_s"] + 0.02, (stages, row)
    assert (out / "bench.png").stat().st_size > 10_000
    runs = sorted((out / "runs").iterdir())  # --record: the run as data, the same content as results.json
    assert [p.name for p in runs] == [bench.run_name(results["meta"])]
    assert json.loads(runs[0].read_text()) == results
    assert "kazetts" in r.stdout and "targets" in r.stdout


def test_the_latest_run_is_a_bench_run(tmp_path):
    """A directory's latest run skips other scripts' data kept beside the runs (it crashed on them)."""
    (tmp_path / "2026-12-01-abc.json").write_text(json.dumps({"title": "t", "meta": {}, "rows": []}))
    (tmp_path / "2026-12-04-aarch64-count.json").write_text(json.dumps([{"engine": "kazetts"}]))
    (tmp_path / "2026-12-04-concurrency.json").write_text(json.dumps({"meta": {}, "clients": []}))
    assert bench_report.run_file(str(tmp_path)).name == "2026-12-01-abc.json"
    for f in tmp_path.glob("2026-12-01*"):
        f.unlink()
    (tmp_path / "2026-12-05-cut.json").write_text("{bad")  # a cut file is not a run
    with pytest.raises(SystemExit, match="no run of scripts/bench.py"):
        bench_report.run_file(str(tmp_path))
    with pytest.raises(SystemExit, match="cut.json: not a readable JSON file"):
        bench_report.load(tmp_path / "2026-12-05-cut.json")
    with pytest.raises(SystemExit, match="missing.json: not a readable JSON file"):
        bench_report.load(tmp_path / "missing.json")
