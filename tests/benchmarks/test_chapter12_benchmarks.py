"""Chapter 12's benchmark scripts: the comparison's two models have the same size, the table
sets them side by side, and the induction run finds its bump where the losses say."""

from __future__ import annotations

import pytest


def test_the_compared_models_have_the_same_parameter_count(benchmark_script) -> None:
    compare = benchmark_script("modern_vs_gpt")
    gpt, modern = compare.build("gpt", 2000), compare.build("modern", 2000)
    sizes = [compare.count(m) for m in (gpt, modern)]
    assert sizes[1] == pytest.approx(sizes[0], rel=1e-3)
    assert sizes[0] == 662_992 and sizes[1] == 663_376  # benchmarks/README.md's figures
    # One unit of SwiGLU width more or less moves further from the GPT block's count.
    width = modern.layers[0].feed_forward.w1.out_features
    for other in (width - 1, width + 1):
        assert abs(compare.count(compare.ModernLanguageModel(2000, d_ff=other, **compare.MODERN))
                   - sizes[0]) >= abs(sizes[1] - sizes[0])


def test_the_table_gives_every_run_and_each_kind_s_mean(benchmark_script) -> None:
    compare = benchmark_script("modern_vs_gpt")
    runs = [{"kind": kind, "seed": seed, "parameters": 10, "val_loss": loss,
             "tokens_per_second": 1000.0, "load_average": [1.0, 2.0]}
            for kind, seed, loss in (("gpt", 0, 3.0), ("modern", 0, 2.0), ("gpt", 1, 4.0))]
    lines = compare.table(runs).splitlines()
    assert len(lines) == 1 + 3 + 2
    assert lines[-2].split()[:4] == ["gpt", "mean", "10", "3.500"]
    assert lines[-1].split()[:4] == ["modern", "mean", "10", "2.000"]


def test_the_bump_is_where_the_repeated_half_leaves_the_plateau(benchmark_script) -> None:
    induction = benchmark_script("induction_head")
    repeated = [4.15, 4.1, 3.5, 1.9, 0.9, 0.8]
    reports = [{"step": 10 * (k + 1), "first_half_loss": 4.16, "repeated_half_loss": loss}
               for k, loss in enumerate(repeated)]
    assert induction.bump(reports) == {"plateau_until": 20, "half_way": 40,
                                       "below_one_nat": 50}
    flat = [dict(r, repeated_half_loss=4.16) for r in reports]
    assert induction.bump(flat) == {"plateau_until": 60, "half_way": None,
                                    "below_one_nat": None}
