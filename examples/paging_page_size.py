"""The paging simulator's figure from Python: effective access time (eq. 4-6) over
page size for storage 1x to 1000x slower than memory, on a shipped trace of sort, and
the best page size per latency: the report's paging table and plot (Park & Bahn 2020,
§4), from Python.

    python examples/paging_page_size.py [--out figures] [--trace traces/paging/sort.hscm.zst]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import hscm  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="figures")
    p.add_argument("--trace", default=str(ROOT / "traces" / "paging" / "sort.hscm.zst"))
    a = p.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    raw = hscm.sim.paging(a.trace, memory="50%", raw=True)
    df = hscm.sim.paging(a.trace, memory="50%")
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for x, g in df.groupby("latency_x"):
        ax.plot(g["page_size"], g["t_total_ns"], marker="o", label=f"storage {x:g}x memory")
    ax.set(xscale="log", yscale="log", xlabel="page size (bytes)", ylabel="T_TOTAL (ns)",
           title=f"paging: {Path(a.trace).name}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "paging_page_size.svg")
    df.to_csv(out / "paging_page_size.csv", index=False)
    best = ", ".join(f"{x:g}x: {p} B" for x, p in raw["best"])
    print(f"best page size per storage latency: {best}; plot: {out / 'paging_page_size.svg'}")


if __name__ == "__main__":
    main()
