"""The file-cache simulator's figure from Python: miss ratio over cache size for LRU,
the admission-controlled AC-LRU, S3-FIFO and Belady on a synthetic trace with one-time
objects and a scan, and the access-time gain of caching in front of SCM and of a disk
(Park & Bahn 2020, eq. 1-3; device latencies are the paper's, not measured here).

    python examples/cache_curves.py [--out figures]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import hscm  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="figures")
    p.add_argument("--requests", default="1M")
    a = p.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    trace = out / "requests.oracleGeneral.zst"
    hscm.trace.generate_requests(trace, requests=a.requests, objects="100k", alpha=0.8, one_time=0.3, scan=0.1)
    sizes = ["0.5%", "1%", "2%", "5%", "10%", "20%", "40%"]
    df = hscm.sim.cache(trace, policy=["lru", "ac-lru", "s3fifo", "belady"], size=sizes)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    for policy, g in df.groupby("policy"):
        ax1.plot(g["cache_size"] / 2**20, g["miss_ratio"], marker="o", label=policy)
        ax2.plot(g["cache_size"] / 2**20, 100 * g["access_time.gain"], marker="o", label=f"{policy} on SCM")
    ax1.set(xscale="log", xlabel="cache (MiB)", ylabel="miss ratio", title="miss ratio")
    ax2.set(xscale="log", xlabel="cache (MiB)", ylabel="access time saved (%)", title="gain of caching in front of SCM")
    ax1.legend(fontsize=7)
    ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "cache_curves.svg")
    df.to_csv(out / "cache_curves.csv", index=False)
    print(f"{len(df)} runs; plot: {out / 'cache_curves.svg'}")


if __name__ == "__main__":
    main()
