"""WARM's energy saving over DRAM share x migration threshold: a sensitivity sweep.

Runs examples/warm_sweep.toml (3 shipped traces x 4 DRAM sizes x 4 WARM thresholds,
each point running DRAM-only and WARM) and plots WARM's energy saving against
DRAM-only for every trace, one line per threshold, beside the paper's average
(Sun et al. 2020, Fig. 8: -46.2%). Energy is modelled, not measured (docs/memsim.md).

    python examples/warm_sweep.py [--executor local|dask|ray] [--out warm-sweep]

Writes OUT/results.parquet (the sweep's table), OUT/warm_sweep.svg and .png (the
plot) and OUT/summary.json (the figures plotted).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import hscm.sweep  # noqa: E402

HERE = Path(__file__).resolve().parent
PAPER_SAVING = 0.462  # Sun et al. 2020, Fig. 8: WARM's average energy saving


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--executor", default="local", choices=hscm.sweep.EXECUTORS)
    p.add_argument("--out", default="warm-sweep")
    p.add_argument("--workers", type=int)
    a = p.parse_args()
    out = Path(a.out)
    df = hscm.sweep.run(HERE / "warm_sweep.toml", a.executor, out, workers=a.workers)
    failed = df.drop_duplicates("point_id")["error"].notna().sum()
    warm = df[df["policy"] == "warm"].copy()
    warm["trace"] = warm["param.trace"].map(lambda t: Path(t).name.split(".")[0])
    warm["dram_bytes"] = warm["param.dram_size"].map(
        lambda s: int(s[:-1]) << {"K": 10, "M": 20, "G": 30}[s[-1]]
    )
    warm["energy_saving"] = 1.0 - warm["norm.energy"]
    traces = sorted(warm["trace"].unique())
    fig, axes = plt.subplots(1, len(traces), figsize=(4.2 * len(traces), 3.6), sharey=True)
    for ax, name in zip(axes, traces):
        t = warm[warm["trace"] == name]
        for thr, g in t.groupby("param.warm_threshold"):
            g = g.sort_values("dram_bytes")
            ax.plot(g["dram_bytes"] / 2**20, 100 * g["energy_saving"], marker="o", label=f"threshold {thr}")
        ax.axhline(100 * PAPER_SAVING, color="grey", linestyle="--", label="paper average (Fig. 8)")
        ax.set_xscale("log", base=2)
        ax.set_title(name)
        ax.set_xlabel("DRAM size (MiB)")
    axes[0].set_ylabel("WARM energy saving vs DRAM-only (%)")
    axes[-1].legend(fontsize=7)
    fig.suptitle("WARM: energy saving over DRAM size x migration threshold (modelled energy)")
    fig.tight_layout()
    for ext in ("svg", "png"):
        fig.savefig(out / f"warm_sweep.{ext}")
    rows = [
        {"trace": r.trace, "dram_size": r["param.dram_size"], "warm_threshold": int(r["param.warm_threshold"]),
         "energy_saving": float(r.energy_saving), "migrations": int(r.migrations)}
        for _, r in warm.sort_values(["trace", "dram_bytes", "param.warm_threshold"]).iterrows()
    ]
    summary = {"points": int(df["point_id"].nunique()), "failed": int(failed),
               "paper_saving": PAPER_SAVING, "rows": rows}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    best = max(rows, key=lambda r: r["energy_saving"])
    print(f"{summary['points']} points ({failed} failed); largest saving {100 * best['energy_saving']:.1f}% "
          f"({best['trace']}, DRAM {best['dram_size']}, threshold {best['warm_threshold']}); "
          f"plot: {out / 'warm_sweep.svg'}")


if __name__ == "__main__":
    main()
