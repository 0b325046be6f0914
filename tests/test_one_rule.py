"""One definition of each rule (issue #37): the rules libkazetts exports in rules.h (CB0 sampling,
the long-text split, the frame budget, the crossfade between pieces, the WSOLA time-stretch, the
text-stream commit rule) are
the engines' only ones; no module of the Python engine (kazetts/engine, kazetts/stages) states
them again. Their numpy statements live in kazetts/validation/oracles, for the tests only.

The checker reads each module's syntax tree for what stating a rule takes (the numpy calls of
top-k, top-p, the draw and the correlation search, the arithmetic of the penalty and the
crossfade, the split's punctuation regexes, the rules' constants by name) and is tried on the
oracles and on the engine's former code, so that it can fail."""

from __future__ import annotations

import ast
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
ENGINE = [REPO / "kazetts" / "engine", REPO / "kazetts" / "stages"]
ORACLES = REPO / "kazetts" / "validation" / "oracles"

# rule -> what stating it takes: numpy functions called, names defined, and substrings of the
# string constants of a regex call
NUMPY_CALLS = {
    "np.partition": "top-k",
    "np.argpartition": "top-k",
    "np.argsort": "top-p",
    "np.searchsorted": "the draw",
    "np.argmax": "the greedy pick",
    "np.unique": "repetition penalty",
    "np.correlate": "WSOLA search",
    "np.convolve": "WSOLA search",
}
NAMES = {
    "talker_suppress_tokens": "suppressed control ids",
    "apply_repetition_penalty": "repetition penalty",
    "apply_top_k": "top-k",
    "apply_top_p": "top-p",
    "apply_temperature": "temperature",
    "CodePredictorSampler": "code predictor sampling",
    "NumpyCodePredictor": "code predictor",
    "split_sentences": "sentence split",
    "BUDGET_BASE": "frame budget",
    "BUDGET_PER_TOKEN": "frame budget",
    "CROSSFADE_SAMPLES": "crossfade",
    "TOLERANCE_SECONDS": "WSOLA search",
    "_CLOSERS": "text-stream commit rule",
    "_settled": "text-stream commit rule",
}
REGEX_CALLS = {"compile", "split", "finditer", "findall", "search", "match", "sub"}
SPLIT_PUNCTUATION = ("。", "…", ".!?", "，；：")


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _mentions(node: ast.AST, word: str) -> bool:
    return any(word in _dotted(n).lower() for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute)))


def rules_stated(source: str) -> list[str]:
    """The rules of rules.h a Python source states, each with what gave it away."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name = _dotted(node.func).replace("numpy.", "np.")
            if name in NUMPY_CALLS:
                found.append(f"{NUMPY_CALLS[name]}: {name}")
            if name == "np.linspace" and any(k.arg == "endpoint" for k in node.keywords):
                found.append("crossfade: a ramp of np.linspace(..., endpoint=False)")
            if name.endswith(".isalpha"):
                found.append(f"text-stream commit rule: {name}")
            if name.startswith("re.") and name[3:] in REGEX_CALLS:
                if any(p in text for text in _strings(node) for p in SPLIT_PUNCTUATION):
                    found.append(f"sentence split: {name} over punctuation")
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in NAMES:
            found.append(f"{NAMES[node.name]}: defines {node.name}")
        elif isinstance(node, ast.Assign):
            for target in (n for t in node.targets for n in ast.walk(t)):
                if isinstance(target, ast.Name) and target.id in NAMES:
                    found.append(f"{NAMES[target.id]}: defines {target.id}")
            if any(p in text for text in _strings(node.value) for p in ("。", "…")):
                found.append("sentence split: a constant of sentence punctuation")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div)):
            if _mentions(node, "penalty"):
                found.append("repetition penalty: arithmetic on a penalty")
            if _mentions(node, "ramp"):
                found.append("crossfade: arithmetic on a ramp")
    return found


def _modules(folders) -> dict[str, str]:
    return {
        str(path.relative_to(REPO)): path.read_text()
        for folder in folders
        for path in sorted(pathlib.Path(folder).rglob("*.py"))
    }


def test_the_python_engine_states_no_rule_of_the_rules_header():
    stated = {name: found for name, source in _modules(ENGINE).items() if (found := rules_stated(source))}
    assert not stated, f"rules of native/include/kazetts/rules.h stated again in Python (call the export): {stated}"


def test_the_checker_finds_each_rule_in_the_oracles():
    """The oracles state the rules on purpose: the checker must see every one of them there."""
    stated = {what.split(":")[0] for source in _modules([ORACLES]).values() for what in rules_stated(source)}
    for rule in (
        "top-k",
        "top-p",
        "the draw",
        "the greedy pick",
        "repetition penalty",
        "suppressed control ids",
        "code predictor sampling",
        "sentence split",
        "WSOLA search",
        "text-stream commit rule",
    ):
        assert rule in stated, f"the checker misses {rule} in kazetts/validation/oracles"


@pytest.mark.parametrize(
    "source, rule",
    [  # the engine's own statements of the rules before they moved to libkazetts
        ("BUDGET_BASE, BUDGET_PER_TOKEN = 24, 8", "frame budget"),
        ("CROSSFADE_SAMPLES = 240", "crossfade"),
        (
            "ramp = np.linspace(0.0, 1.0, n, endpoint=False, dtype=np.float32)\n"
            "audio[:n] = self.tail[:n] * (1 - ramp) + audio[:n] * ramp",
            "crossfade",
        ),
        ("scores[ids] = np.where(picked < 0, picked * p, picked / penalty)", "repetition penalty"),
        ('_SENTENCE_END = re.compile(r"(?<=[.!?…。！？])[\\"\'”’)\\]]*\\s+|(?<=[。！？])|\\n+")', "sentence split"),
        ("corr = numpy.correlate(region, target, mode='valid')", "WSOLA search"),
        ("kth = np.partition(scores, n - k)[n - k]", "top-k"),
        ("ok = before.isalpha() and not after.isalpha()", "text-stream commit rule"),
        ("_CLOSERS = '\"”’)]'", "text-stream commit rule"),
    ],
)
def test_the_checker_finds_a_rule_stated_in_a_bad_example(source, rule):
    assert any(what.startswith(rule) for what in rules_stated(source)), rules_stated(source)
