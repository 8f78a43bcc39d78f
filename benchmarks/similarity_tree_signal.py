"""A second signal for copy detection: normalised syntax trees, against copydetect's tokens.

    .venv/bin/python benchmarks/similarity_tree_signal.py

Both read the code once :mod:`autograder.copies.normalise` has set aside names, comments,
docstrings, argument checks, layout, equivalent spellings and the order of definitions. The
tree signal compares the syntax trees themselves, as structural tools do (Dolos's tree-sitter
streams, DECKARD's subtrees): each subtree of at least :data:`MIN_NODES` nodes is written as
its node types (constants and the names the code uses kept, its own names as ``V``), and a
pair scores the share of the other code's subtrees found in the learner's (a multiset), on the
subtrees of the whole definition; as for copydetect's tokens, it flags a share of at least
0.95 on enough subtrees in common.

Measured on the calibration's set (``benchmarks/similarity_calibration.py``): each exercise's
reference and solution pasted and disguised in each way alone and combined, against its
original; every honest answer (the hint, literal, tutorial-style and own-way learners, the
sample class's own work, every mutant) against the course's units of its exercise. The tree
signal's minimum of shared subtrees is the lowest at which no honest answer is flagged; the
pastes it then flags are printed beside those the course's rule flags (copydetect's tokens
and the course's own words, :mod:`autograder.copies`).
"""

from __future__ import annotations

import ast
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import similarity_calibration as calibration  # noqa: E402

from autograder.copies import detect as similarity  # noqa: E402
from autograder.copies import pairs as copy_pairs  # noqa: E402
from autograder.copies.normalise import PLACEHOLDER, normalise  # noqa: E402
from autograder.course import ROOT, Course  # noqa: E402

# Subtrees smaller than this say nothing (a name, a call of one argument).
MIN_NODES = 6


def _written(node: ast.AST) -> str:
    """``node``'s subtree as text: node types, constants and used names, own names as V."""
    label = type(node).__name__
    if isinstance(node, ast.Name):
        label += ":" + ("V" if PLACEHOLDER.fullmatch(node.id) else node.id)
    elif isinstance(node, ast.Attribute):
        label += ":" + ("V" if PLACEHOLDER.fullmatch(node.attr) else node.attr)
    elif isinstance(node, ast.Constant):
        label += ":" + repr(node.value)
    children = [_written(child) for child in ast.iter_child_nodes(node)
                if not isinstance(child, ast.expr_context)]
    return f"{label}({','.join(children)})" if children else label


def subtrees(code: str) -> Counter[str]:
    """The subtrees of the normalised ``code`` (its whole unit) of :data:`MIN_NODES` nodes or
    more, counted."""
    units = normalise(code)
    if not units:
        return Counter()
    try:
        tree = ast.parse(units[0].text)
    except SyntaxError:
        return Counter()
    return Counter(_written(node) for node in ast.walk(tree)
                   if sum(1 for _ in ast.walk(node)) >= MIN_NODES)


def contained(mine: Counter[str], other: Counter[str]) -> tuple[float, int]:
    """The share of ``other``'s subtrees found in ``mine`` (0 when ``other`` has none), and
    how many they share."""
    total, shared = sum(other.values()), sum((mine & other).values())
    return (shared / total if total else 0.0), shared


def course_units() -> dict[str, list[Counter[str]]]:
    """exercise -> the subtrees of its reference and of its solution cell."""
    found: dict[str, list[Counter[str]]] = {}
    for exercise, _, code in calibration.originals():
        found.setdefault(exercise, []).append(subtrees(code))
    return found


def honest_scores(units: dict[str, list[Counter[str]]]
                  ) -> list[tuple[tuple[float, int], str]]:
    """Each honest answer's highest tree score (share, subtrees shared) against its
    exercise's course units."""
    work = calibration.honest_work()
    scores = []
    for _, classes, _ in work:
        for cells in classes:
            for learner, answers in cells.items():
                for cell, code in answers.items():
                    exercise = calibration.exercise_of(cell)
                    if exercise in copy_pairs.DICTATED or exercise not in units:
                        continue
                    mine = subtrees(code)
                    scores.append((max(contained(mine, u) for u in units[exercise]),
                                   f"{learner}: {cell}"))
    return sorted(scores, reverse=True)


def main() -> int:
    started = time.perf_counter()
    units = course_units()
    honest = honest_scores(units)
    # As for copydetect's tokens: a share of at least THRESHOLD, on enough shared subtrees
    # that no honest answer is flagged.
    reached = [(shared, where) for (share, shared), where in honest
               if share >= copy_pairs.THRESHOLD]
    minimum = max(reached, default=(0, ""))[0] + 1
    print(f"{len(honest)} honest answers (the dictated exercises apart); the most subtrees "
          "shared at the threshold:")
    for shared, where in sorted(reached, reverse=True)[:5]:
        print(f"  {shared:4d}  {where}")
    print(f"tree signal: share >= {copy_pairs.THRESHOLD}, >= {minimum} subtrees shared "
          "(0 honest flagged)")
    sources = similarity.course_sources(Course.of(ROOT))
    boilerplate = calibration.all_stubs()
    print("\npastes flagged (the solutions of dictated exercises apart): tree signal, the "
          "course's rule (copydetect on normalised tokens, and the course's words)")
    for way in calibration.WAYS:
        pasted = {f"{exercise} {origin}": (exercise, calibration.disguised(code, way), code)
                  for exercise, origin, code in calibration.originals()
                  if not (origin == "solution" and exercise in copy_pairs.DICTATED)}
        scores = [contained(subtrees(paste), subtrees(original))
                  for _, paste, original in pasted.values()]
        tree = sum(share >= copy_pairs.THRESHOLD and shared >= minimum
                   for share, shared in scores)
        cells = {name: {calibration.cell_of(exercise): paste}
                 for name, (exercise, paste, _) in pasted.items()}
        tokens = len({p.learner.owner for p in similarity.reference_pairs(
            cells, sources, boilerplate) if p.flagged(copy_pairs.THRESHOLD)})
        print(f"  {way:32} tree {calibration.rate(tree, len(pasted))}   course's rule "
              f"{calibration.rate(tokens, len(pasted))}")
    print(f"\n{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
