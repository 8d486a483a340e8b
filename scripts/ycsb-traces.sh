#!/usr/bin/env bash
# Records real YCSB 0.17.0 operation traces with the reference implementation (its core
# jar from Maven Central, run with the BasicDB binding, which prints every operation),
# for `hscm kv bench --trace` and the report's replay rows.
#
#   bash scripts/ycsb-traces.sh OUT_DIR [RECORDS] [OPERATIONS]
#
# Writes OUT_DIR/ycsb-{a,b,3}-load.txt (the load phase: RECORDS inserts) and
# OUT_DIR/ycsb-{a,b,3}-run.txt (OPERATIONS zipfian requests, by default 160000: the
# report warms up on the first 40000 and measures the next 120000; a = 50% reads / 50%
# updates, b = 95/5, 3 = 33/67, as the paper's workloads A, B and 3). Each line is
# `VERB usertable KEY`: the field values BasicDB prints are cut, since the store writes
# values of --value-len bytes (YCSB's default record is 10 fields of 100 bytes).
# Installs a Java runtime and Maven from Debian's packages when they are missing.
set -euo pipefail
out=${1:?usage: ycsb-traces.sh OUT_DIR [RECORDS] [OPERATIONS]}
records=${2:-20000}
operations=${3:-160000}
mkdir -p "$out"
out=$(cd "$out" && pwd)

if ! command -v java >/dev/null || ! command -v mvn >/dev/null; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq default-jre-headless maven >/dev/null
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/pom.xml" <<'POM'
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>hscm</groupId><artifactId>ycsb-traces</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>site.ycsb</groupId><artifactId>core</artifactId><version>0.17.0</version></dependency>
  </dependencies>
</project>
POM
# The classpath Maven resolves holds the core jar and what it depends on.
(cd "$work" && mvn -q -B dependency:build-classpath -Dmdep.outputFile=cp.txt >/dev/null)
cp="$(cat "$work/cp.txt")"

ycsb() {
  java -cp "$cp" site.ycsb.Client -db site.ycsb.BasicDB \
    -p workload=site.ycsb.workloads.CoreWorkload -p requestdistribution=zipfian \
    -p recordcount="$records" -p operationcount="$operations" "$@" 2>/dev/null |
    grep -E '^(READ|UPDATE|INSERT|DELETE) ' | sed -E 's/ \[.*$//'
}

for w in a:0.5:0.5 b:0.95:0.05 3:0.33:0.67; do
  IFS=: read -r name read update <<<"$w"
  ycsb -load > "$out/ycsb-$name-load.txt.partial"
  ycsb -t -p readproportion="$read" -p updateproportion="$update" > "$out/ycsb-$name-run.txt.partial"
  mv "$out/ycsb-$name-load.txt.partial" "$out/ycsb-$name-load.txt"
  mv "$out/ycsb-$name-run.txt.partial" "$out/ycsb-$name-run.txt"
  echo "ycsb-traces: $out/ycsb-$name-{load,run}.txt ($records records, $operations operations)"
done
