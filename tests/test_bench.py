"""The benchmark harness (scripts/bench.py) stays runnable: `make bench-smoke` runs every engine
on a few frames (building llama-tts on first use) and each row must hold figures that add up."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
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
    row = {"engine": engine, "weights": "q8_0", "threads": 2, "frames": 10, "load_s": 1.0, "audio_s": 0.8,
           "prefill_s": 0.2, "talker_s": 0.5, "code_predictor_s": 0.4, "codec_s": 0.3, "first_audio_s": 0.3,
           "request_s": 1.5, "peak_rss_mb": 1000.0, "load_peak_rss_mb": 900.0}
    row.update(seconds)
    return row


def test_native_engine_rows_are_held_against_the_python_engine():
    rows = [_row("kazetts"), _row("kazetts-native", talker_s=0.4, request_s=1.2), _row("llama-tts", talker_s=None),
            _row("kazetts-native", threads=1)]
    ratios = bench_report.ratio_table(rows).splitlines()[2:]
    assert [line.split(" | ")[0] for line in ratios] == ["| kazetts q8_0 t2 / llama-tts q8_0 t2",
                                                          "| kazetts-native q8_0 t2 / kazetts q8_0 t2"]
    assert "| 0.80 |" in ratios[1]  # talker: 0.4 / 0.5
    target = bench_report.targets(rows)[-1]
    assert target.startswith("- native engine no slower than the Python engine") and target.endswith(": met")
    slower = bench_report.targets([_row("kazetts"), _row("kazetts-native", codec_s=0.6, peak_rss_mb=1100.0)])[-1]
    assert slower.endswith("MISSED on codec, peak rss") and "codec 2.00" in slower


def test_smoke_run(ref_python, tmp_path):
    out = tmp_path / "bench"
    r = subprocess.run(["make", "--no-print-directory", "bench-smoke", f"BENCH_SMOKE_OUT={out}"],
                       capture_output=True, text=True, cwd=REPO, timeout=3600)
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
        stages = row["prefill_s"] + sum(row.get(k) or 0.0 for k in
                                        ("talker_s", "code_predictor_s", "talker_code_predictor_s", "codec_s"))
        # the stages are parts of the request: together no longer than it (llama-tts rounds to 10 ms)
        assert 0 < stages <= row["request_s"] + 0.02, (stages, row)
    assert (out / "bench.png").stat().st_size > 10_000
    assert "kazetts" in r.stdout and "targets" in r.stdout
