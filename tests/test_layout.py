"""The floors of both sides (docs/architecture.md): a C++ source includes, and a Python module
imports, only from its own floor or below, so that each folder can be read without the ones
above it. The checkers are tried on a bad example too, so that they can fail."""

from __future__ import annotations

import ast
import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[1]
NATIVE = REPO / "native"

# native/src/<folder>: its floor
NATIVE_FLOORS = {"core": 1, "kernels": 2, "stages": 3, "engine": 4}
# native/include/kazetts/<header>: the floor of the code behind it
PUBLIC_HEADERS = {
    "common.h": 1,
    "talker_backend.h": 2,
    "code_predictor.h": 3,
    "codec.h": 3,
    "codec_encoder.h": 3,
    "speaker_encoder.h": 3,
    "talker.h": 3,
    "tts.h": 4,
    "batch.h": 4,
    "rules.h": 4,
    "voice.h": 4,
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

# kazetts/<module or package>: its floor. The package's __init__ (a lazy facade) is not a floor.
PYTHON_FLOORS = {
    "errors": 0,
    "request": 0,
    "native": 0,
    "synthetic": 0,
    "gguf": 1,
    "stages": 2,
    "engine": 3,
    "tools": 4,
    "server": 5,
    "validation": 5,
    "cli": 6,
    "__main__": 6,
}


# what `from kazetts import X` may take from the package's __init__ (the facade, not a module)
FACADE_NAMES = {"__version__", "BusyError", "KazettsError", "ModelFileError"}


def include_floor(name: str) -> int | None:
    """The floor of a quoted include ("stages/prompt.h", "kazetts/tts.h"); None for a header
    that is not ours (ggml.h, llama.h)."""
    top, _, rest = name.partition("/")
    if top == "kazetts":
        return PUBLIC_HEADERS[rest]
    return NATIVE_FLOORS.get(top)


def native_violations(floor: int, source: str) -> list[str]:
    """The includes of a source of this floor that reach a floor above it."""
    return [name for name in INCLUDE.findall(source) if (include_floor(name) or 0) > floor]


def python_floor(module: str) -> int | None:
    """kazetts.engine.tts -> the floor of engine; None for modules outside kazetts and for the
    package's facade (kazetts itself: __version__, the error types)."""
    parts = module.split(".")
    if parts[0] != "kazetts" or len(parts) < 2:
        return None
    return PYTHON_FLOORS.get(parts[1], 0 if parts[1] in FACADE_NAMES else None)


def imported_modules(source: str, package: str) -> list[str]:
    """Every kazetts module a source imports, at any depth (function-local imports too)."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolved against the module's package
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                names.append(".".join(base + ([node.module] if node.module else [])))
            elif node.module == "kazetts":  # from kazetts import engine: the modules named
                names += [f"kazetts.{alias.name}" for alias in node.names]
            elif node.module:
                names.append(node.module)
    return [n for n in names if n.split(".")[0] == "kazetts"]


def python_violations(module: str, source: str) -> list[str]:
    floor = python_floor(module)
    package = module.rsplit(".", 1)[0]
    return [name for name in imported_modules(source, package) if (python_floor(name) or 0) > floor]


def test_no_source_directly_under_native_src():
    loose = sorted(p.name for p in (NATIVE / "src").iterdir() if p.is_file())
    assert not loose, f"native/src holds files outside its floors' folders: {loose}"
    folders = sorted(p.name for p in (NATIVE / "src").iterdir() if p.is_dir())
    assert folders == sorted(NATIVE_FLOORS), f"native/src/ folders {folders}: each must have a floor in this test"


def test_native_includes_stay_on_their_floor_or_below():
    bad = {}
    for path in sorted((NATIVE / "src").rglob("*")):
        if path.suffix in (".cpp", ".h"):
            floor = NATIVE_FLOORS[path.relative_to(NATIVE / "src").parts[0]]
            if found := native_violations(floor, path.read_text()):
                bad[str(path.relative_to(REPO))] = found
    assert not bad, f"includes going up a floor: {bad}"


def test_public_headers_are_leaves_of_their_floor():
    headers = sorted(p.name for p in (NATIVE / "include" / "kazetts").glob("*.h"))
    assert headers == sorted(PUBLIC_HEADERS), "every public header needs its floor in PUBLIC_HEADERS"
    bad = {}
    for name in headers:
        text = (NATIVE / "include" / "kazetts" / name).read_text()
        includes = INCLUDE.findall(text)
        if any(not i.startswith("kazetts/") for i in includes) or native_violations(PUBLIC_HEADERS[name], text):
            bad[name] = includes
    assert not bad, f"public headers must include only public headers of their floor or below: {bad}"


def test_bindings_see_the_app_api_only():
    """jni/ (and so the Java classes) binds the app API (tts.h, voice.h), never the rules, a stage
    or the sources."""
    for path in (NATIVE / "jni").glob("*.cpp"):
        ours = [i for i in INCLUDE.findall(path.read_text()) if include_floor(i) is not None]
        assert ours == ["kazetts/tts.h", "kazetts/voice.h"], f"{path.name} includes {ours}"


def test_python_imports_stay_on_their_floor_or_below():
    package = REPO / "kazetts"
    modules = sorted(p for p in package.rglob("*.py") if p != package / "__init__.py")
    seen_floors, bad = set(), {}
    for path in modules:
        rel = path.relative_to(REPO).with_suffix("")
        module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        seen_floors.add(module.split(".")[1])
        if found := python_violations(module, path.read_text()):
            bad[module] = found
    assert not bad, f"imports going up a floor: {bad}"
    assert seen_floors == set(PYTHON_FLOORS), (
        f"every part of kazetts needs a floor here: {seen_floors ^ set(PYTHON_FLOORS)}"
    )


def test_the_checkers_catch_a_step_up():
    assert native_violations(NATIVE_FLOORS["stages"], '#include "engine/text_split.h"\n#include "core/x.h"\n') == [
        "engine/text_split.h"
    ]
    assert native_violations(NATIVE_FLOORS["stages"], '#include "kazetts/tts.h"\n#include "ggml.h"\n') == [
        "kazetts/tts.h"
    ]
    assert native_violations(NATIVE_FLOORS["engine"], '#include "stages/prompt.h"\n#include "kazetts/tts.h"\n') == []
    upward = "import numpy\n\ndef f():\n    from kazetts.engine.tts import TTS\n    from ..gguf import header\n"
    assert python_violations("kazetts.stages.prompt", upward) == ["kazetts.engine.tts"]
    assert python_violations("kazetts.cli.say", upward) == []
    assert python_violations("kazetts.stages.codec", "from kazetts import engine, native\n") == ["kazetts.engine"]
