#!/usr/bin/env bash
# The DRAM model beside Ramulator 2.0 and DRAMsim3 (docs/memsim.md, "Validation").
#
#   bash scripts/validate-memsim.sh [REQUESTS] [GEN_TRACE_PY]
#
# 1. writes the three anchor traces with hscm's own generator (DRAMsim3's text format);
# 2. when the reference generator is at hand (default ../shared/validation/gen_trace.py),
#    runs it with the published arguments and requires byte-identical files;
# 3. runs `hscm bench memsim-validate`: hscm beside the peers' published figures.
set -euo pipefail
cd "$(dirname "$0")/.."
requests="${1:-5M}"
gen="${2:-../shared/validation/gen_trace.py}"
cargo build --release -q -p hscm-cli
hscm=./target/release/hscm
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

count="$($hscm trace anchor mix5m --requests "$requests" -o "$out/hscm-mix5m.ds3" | awk '{print $2}')"
$hscm trace anchor stream --requests "$requests" -o "$out/hscm-stream.ds3" >/dev/null
$hscm trace anchor mix5m_gap16 --requests "$requests" -o "$out/hscm-mix5m_gap16.ds3" >/dev/null
echo "== anchor traces written by hscm: $count requests each"

if [[ -f "$gen" ]] && command -v python3 >/dev/null; then
    python3 "$gen" -n "$count" --outdir "$out" --name mix5m >/dev/null
    python3 "$gen" -n "$count" --pattern stream --rand-wr 0.3 --seed 7 --outdir "$out" --name stream >/dev/null
    python3 "$gen" -n "$count" --gap 16 --outdir "$out" --name mix5m_gap16 >/dev/null
    for t in mix5m stream mix5m_gap16; do
        cmp "$out/hscm-$t.ds3" "$out/$t.ds3"
        echo "   $t: identical to $gen's $t.ds3"
    done
else
    echo "   ($gen not found: the generator is checked by cargo test -p hscm-trace anchor only)"
fi

echo "== beside Ramulator 2.0 and DRAMsim3 (published figures)"
$hscm bench memsim-validate --requests "$requests"
