"""The fuzzer itself (kazetts.validation.fuzz): its mutations, its crash detection, a short run."""

from __future__ import annotations

import random
import shutil
import sys

import pytest

from kazetts.gguf.header import GGUFError, GGUFHeader
from kazetts.validation import fuzz
from kazetts.validation.gguf_edit import GGUFLayout


@pytest.fixture(scope="module")
def seeds(tiny_gguf):
    talker, mmproj = tiny_gguf("tiny", "custom_voice", "f32", 0)
    return {"talker": talker, "mmproj": mmproj}


def test_layout_round_trip_and_boundaries(seeds):
    data = seeds["mmproj"].read_bytes()
    layout = GGUFLayout.parse(data)
    assert layout.to_bytes() == data
    cuts = layout.boundaries()
    assert cuts[0] == 0 and layout.data_start in cuts and all(kv.end in cuts for kv in layout.kvs)
    assert all(t.data_pos in cuts for t in layout.tensors)


def test_mutations_are_reproducible_and_varied(seeds, tmp_path):
    data = seeds["mmproj"].read_bytes()
    a, b = fuzz.Mutator(data, random.Random(5)), fuzz.Mutator(data, random.Random(5))
    assert [a.mutate()[0] for _ in range(5)] == [b.mutate()[0] for _ in range(5)]
    m = fuzz.Mutator(data, random.Random(1))
    kinds, rejected = set(), 0
    for i in range(60):
        what, mutant = m.mutate()
        kinds.add(what.split(" ")[0].split(":")[0])
        path = tmp_path / "m.gguf"
        path.write_bytes(mutant)
        try:
            GGUFHeader(path)
        except GGUFError:
            rejected += 1
    assert len(kinds) > 10 and 0 < rejected < 60


def test_a_crashing_worker_is_a_failure_with_its_report(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(
        "import os, sys\nsys.stdin.readline()\n"
        "print('codec.cpp:12:3: runtime error: load of null pointer', file=sys.stderr, flush=True)\nos.abort()\n"
    )
    w = fuzz.Worker(tmp_path, [sys.executable, str(script)])
    results, stderr, hung = w.run(tmp_path / "x.gguf", ["codec"])
    w.close()
    assert results is None and not hung and "runtime error" in stderr
    assert fuzz.crash_signature("codec", stderr, -6) == "codec: codec.cpp:12:3: runtime error: load of null pointer"
    assert fuzz.crash_signature("talker", "", -11) == "talker: worker died with status -11"
    assert fuzz.crash_signature("talker", "", None).startswith("talker: hang")


def test_a_short_campaign_on_the_tiny_model(seeds, tmp_path):
    (tmp_path / "seeds").mkdir()
    for kind, path in seeds.items():
        shutil.copy(path, tmp_path / "seeds" / f"tiny-{kind}-f32.gguf")
    report = fuzz.campaign(20, 3, tmp_path, log=lambda message: None)
    assert report["inputs"] >= 2 and report["failures"] == []
    seen = {target for target, counts in report["outcomes"].items() if counts}
    assert {"header", "code_predictor", "codec", "talker"} <= seen
    # both unmodified seeds are accepted by every reader
    assert all(counts.get("accepted", 0) >= 1 for counts in report["outcomes"].values())
