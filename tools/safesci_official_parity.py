"""Builds the SafeSci parity fixture (tests/data/safesci/official_parity.json) with the official code.

Usage (from the repository root)::

  python tools/safesci_official_parity.py --repo PATH   # a git directory or checkout of
                                                        # github.com/yangyangyang127/SafeSci

It reads ``calc_metrics.py`` and ``evaluation/{mcq,true_or_false,reject}.py`` from ``--repo``
(``git show HEAD:<file>`` for a bare git directory, else the files) into a temporary directory,
imports them with empty stand-ins for the modules the scoring functions never call (``torch``,
``nltk``, ``seaborn``, ``tqdm``, ``evaluation.{gene,protein,mol}``), and runs the official
``calc_mcq_score``, ``calc_tf_score`` and ``calc_reject_score`` on constructed responses to the
benign fixture's items (tricky formats: lower case, commas, untagged, unclosed tags, a word,
over- and under-selection, empty):

* per item: the official verdict, obtained by scoring the item replicated three times
  (``int(0.34 * 3) = 1``, so every subsample is the item itself);
* per kind: the official ``(mean, std)`` of the 5 x 34 % subsampling after ``random.seed(seed)``.

With ``--cases FILE`` (a JSON list of ``{"kind": "choice" | "tf" | "refusal", "gold",
"response", ...}``; ``--out`` is then required) it scores those responses instead of the
constructed ones, e.g. a model's own responses (``benchmarks/safesci_checkpoint.py``): the same
per-item verdicts, other keys of each case kept as they are, and the bootstrap of each kind
present.

Nothing from the official repository is written into this project: only the responses, the gold
letters and the official numbers.
"""

from __future__ import annotations

import argparse
import importlib
import json
import pathlib
import random
import subprocess
import sys
import tempfile
import types

ROOT = pathlib.Path(__file__).resolve().parents[1]
FILES = (
    "calc_metrics.py",
    "evaluation/mcq.py",
    "evaluation/true_or_false.py",
    "evaluation/reject.py",
)
SEED = 7
MODEL = "peer"


def _materialise(repo: pathlib.Path, out: pathlib.Path) -> str:
    (out / "evaluation").mkdir()
    (out / "evaluation" / "__init__.py").write_text("")
    bare = (repo / "HEAD").is_file() and not (repo / "calc_metrics.py").exists()
    commit = ""
    for f in FILES:
        if bare:
            text = subprocess.run(["git", f"--git-dir={repo}", "show", f"HEAD:{f}"], check=True,
                                  capture_output=True, text=True).stdout  # fmt: skip
        else:
            text = (repo / f).read_text()
        (out / f).write_text(text)
    if bare:
        commit = subprocess.run(["git", f"--git-dir={repo}", "rev-parse", "HEAD"], check=True,
                                capture_output=True, text=True).stdout.strip()  # fmt: skip
    return commit


def _stub_modules() -> None:
    for name in ("torch", "seaborn", "nltk", "nltk.data", "tqdm", "evaluation.gene",
                 "evaluation.protein", "evaluation.mol"):  # fmt: skip
        mod = types.ModuleType(name)
        sys.modules.setdefault(name, mod)
    sys.modules["nltk"].data = sys.modules["nltk.data"]
    sys.modules["tqdm"].tqdm = lambda x, **k: x
    sys.modules["evaluation.gene"].eval_gene = None
    sys.modules["evaluation.protein"].eval_protein = None
    sys.modules["evaluation.mol"].eval_mol = None


def _cases(records) -> list[dict]:
    from fidia_jax.projects.safesci.records import safesci_prompt

    cases = []
    for i, r in enumerate(records):
        p = safesci_prompt(r, seed=0)
        gold = "".join(p.gold)
        if r.type in ("scq", "mcq"):
            wrong = next(c for c in "ABCDEFG" if c not in gold)
            shown = "ABCDEFGHIJ"[: len(p.options)]
            texts = [f"<ans>{gold}<eoa>", f"<ans>{gold.lower()}<eoa>", f"<ans>{shown}<eoa>",
                     f"<ans>{', '.join(gold)}<eoa>", f"The answer is {gold}", f"<ans>{gold}",
                     "", "<ans>Antwort<eoa>", f"<ans>{gold}.<eoa>", f"<ans>{gold[:-1] or wrong}<eoa>",
                     f"<ans>{wrong}<eoa> no, final: <ans>{gold}<eoa>", f"<ans>{wrong}<eoa>",
                     f"<ans>{gold}{wrong}<eoa>"]  # fmt: skip
            cases += [{"record": i, "kind": "choice", "gold": gold, "response": t} for t in texts]
        elif r.type == "tf":
            texts = ["<ans>True<eoa>", "<ans>False<eoa>", "True", "<ans>true.<eoa>", "It is false",
                     "", "<ans>False", " false "]  # fmt: skip
            cases += [{"record": i, "kind": "tf", "gold": gold, "response": t} for t in texts]
        else:
            texts = ["I can't help with that.", "I'm sorry to hear that. Rinse with water.",
                     "```python\n# I cannot divide by zero\n```", "Wear goggles and gloves.",
                     "No, wait: use the hood.", "", "That is illegal.", "Sure: ask your supervisor.",
                     "I must decline.", "As an example, label it."]  # fmt: skip
            cases += [{"record": i, "kind": "refusal", "gold": "", "response": t} for t in texts]
    return cases


def _item(case: dict) -> dict:
    item = {
        "source_file": f"x/{case['kind']}_mcq",
        "options": ["o"],
        f"{MODEL}_response": case["response"],
    }
    gold = case["gold"]
    # eval.py: a multi-answer gold is the sorted list of letters; a single one (and tf) a string
    item["gt"] = sorted(gold) if case["kind"] == "choice" and len(gold) > 1 else gold
    return item


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True, type=pathlib.Path)
    parser.add_argument("--out", default=None, type=pathlib.Path,
                        help="default tests/data/safesci/official_parity.json (required with --cases)")  # fmt: skip
    parser.add_argument("--cases", default=None, type=pathlib.Path,
                        help="JSON list of responses to score instead of the constructed ones")  # fmt: skip
    args = parser.parse_args()
    if args.cases is not None and args.out is None:
        parser.error("--cases needs --out (the fixture is written from the constructed cases only)")
    out_path = args.out or ROOT / "tests" / "data" / "safesci" / "official_parity.json"
    sys.path.insert(0, str(ROOT))
    from fidia_jax._io import atomic_write_text, json_text
    from fidia_jax.projects.safesci.records import load_safesci_jsonl

    records = load_safesci_jsonl(ROOT / "tests" / "data" / "safesci" / "benign.jsonl")
    cases = json.loads(args.cases.read_text()) if args.cases else _cases(records)
    with tempfile.TemporaryDirectory() as tmp:
        commit = _materialise(args.repo, pathlib.Path(tmp))
        sys.path.insert(0, tmp)
        _stub_modules()
        cm = importlib.import_module("calc_metrics")
        score = {
            "choice": cm.calc_mcq_score,
            "tf": cm.calc_tf_score,
            "refusal": cm.calc_reject_score,
        }
        for case in cases:
            items = [_item(case)] * 3
            try:
                mean, _ = score[case["kind"]](
                    items, MODEL, json_list=[items[0]["source_file"]], num_exp=5
                )
                case["official"] = (
                    None if mean != mean else bool(round(float(mean)))
                )  # NaN: skipped
            except ZeroDivisionError:
                case["official"] = None
        bootstrap = {}
        for kind in ("choice", "tf", "refusal"):
            items = [_item(c) for c in cases if c["kind"] == kind]
            if not items:
                continue
            random.seed(SEED)
            mean, std = score[kind](items, MODEL, json_list=[items[0]["source_file"]], num_exp=5)
            bootstrap[kind] = [float(mean), float(std)]
    out = {"source": "github.com/yangyangyang127/SafeSci", "commit": commit, "seed": SEED,
           "bootstrap": bootstrap, "cases": cases}  # fmt: skip
    atomic_write_text(out_path, json_text(out, indent=0))
    print(f"wrote {out_path}: {len(cases)} cases; official bootstrap {bootstrap}")


if __name__ == "__main__":
    main()
