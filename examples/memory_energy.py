"""The memory simulator's figure from Python: energy, performance and EDP of every
policy normalised to DRAM-only on the shipped traces, beside Sun et al. 2020's
averages (Figs. 8-10). Energy is modelled, not measured (docs/memsim.md).

    python examples/memory_energy.py [--out figures]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

import hscm  # noqa: E402

TRACES = Path(__file__).resolve().parent.parent / "traces"
PAPER = {"energy": {"warm": 1 - 0.462, "rapp": 1 - 0.401}, "edp": {"warm": 1 - 0.395, "rapp": 1 - 0.319}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="figures")
    a = p.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    frames = []
    for trace in sorted(TRACES.glob("*.hscm.zst")):
        df = hscm.sim.memory(trace)
        df["program"] = trace.name.split(".")[0]
        frames.append(df)
    df = pd.concat(frames, ignore_index=True)
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    for ax, metric in zip(axes, ["energy", "perf", "edp"]):
        table = df.pivot(index="program", columns="policy", values=f"norm.{metric}")
        table = table[["pcm-only", "static", "warm", "rapp"]]
        table.plot.bar(ax=ax, width=0.8)
        for policy, v in PAPER.get(metric, {}).items():
            ax.axhline(v, linestyle="--", linewidth=1, color="C2" if policy == "warm" else "C3",
                       label=f"paper {policy} average")
        ax.set_title(f"{metric} / DRAM-only")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "memory_energy.svg")
    df.to_csv(out / "memory_energy.csv", index=False)
    warm = df[df["policy"] == "warm"]["norm.energy"].mean()
    print(f"WARM energy vs DRAM-only, mean over {len(frames)} traces: {100 * (warm - 1):+.1f}% "
          f"(paper: -46.2%); plot: {out / 'memory_energy.svg'}")


if __name__ == "__main__":
    main()
