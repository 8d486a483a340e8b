#!/usr/bin/env bash
# The light Python install (docs/python.md): the wheel scripts/python-env.sh built
# (target/wheels), installed by pip with its declared dependencies alone into a fresh
# environment, target/py-light. Checks that hscm's own part stays under 20 MB and what
# pip installed for it (the environment's own pip and setuptools not counted) under
# 200 MB (numpy and pandas alone take 157 MB: docs/python.md),
# that it pulls in none of the extras, exposes only the API, runs the README's Python example, and refuses a
# sweep with the extra to install.
#
#   bash scripts/python-env.sh --debug >/dev/null && bash scripts/python-light.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ENV=target/py-light
PY=$PWD/$ENV/bin/python
WHEEL=$(ls target/wheels/hscm-*.whl 2>/dev/null | head -1)
[ -n "$WHEEL" ] || { echo "python-light: no wheel in target/wheels: run scripts/python-env.sh first" >&2; exit 1; }
start=$(date +%s)
bash scripts/make-venv.sh "$ENV"
# The versions scripts/python-env.sh installs, so that both test the same ones.
CONSTRAINTS=$(mktemp)
trap 'rm -f "$CONSTRAINTS"' EXIT
printf '%s\n' numpy==2.4.6 pandas==3.1.1 tqdm==4.70.1 > "$CONSTRAINTS"
"$PY" -m pip install -q --disable-pip-version-check -c "$CONSTRAINTS" "$WHEEL" >&2
installed=$(( $(date +%s) - start ))
site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
size_mb=$(du -sm --exclude='pip*' --exclude='setuptools*' --exclude=pkg_resources \
  --exclude=_distutils_hack "$site" | cut -f1)
own_mb=$(du -sm "$site/hscm" | cut -f1)
fail() { echo "python-light: FAILED: $*" >&2; exit 1; }
[ "$own_mb" -lt 20 ] || fail "hscm's own files take ${own_mb} MB (limit 20): is the extension stripped?"
[ "$size_mb" -lt 200 ] || fail "the light install takes ${size_mb} MB (limit 200)"
for extra in pyarrow dask ray matplotlib pytest; do
  if "$PY" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$extra') is None)"; then
    fail "the light install pulled in $extra, which belongs to an extra"
  fi
done
"$PY" - <<'PY' || fail "the public namespace"
import hscm
public = [n for n in dir(hscm) if not n.startswith("_")]
assert public == sorted(n for n in hscm.__all__ if not n.startswith("_")), public
for name in ("os", "importlib", "Any", "TYPE_CHECKING", "annotations"):
    assert not hasattr(hscm, name), f"hscm.{name} is not API"
PY
# The README's example, as written there.
out=$("$PY" -c 'import hscm; print(hscm.sim.memory("traces/fft.hscm.zst", policies=["dram-only", "warm"])[["policy", "norm.energy"]])') \
  || fail "the README's example"
grep -q warm <<<"$out" || fail "the README's example printed: $out"
said=$("$PY" -m hscm.sweep examples/warm_sweep.toml --out "$(mktemp -d)" 2>&1) && fail "a sweep ran without pyarrow"
grep -q "pip install 'hscm\[sweep\]'" <<<"$said" || fail "a sweep without pyarrow said: $said"
echo "python-light: ok (${size_mb} MB, hscm's own ${own_mb} MB, installed in ${installed} s; import hscm, the README's example, a sweep asking for hscm[sweep])"
