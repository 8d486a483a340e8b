#!/usr/bin/env bash
# Captures ~10-million-instruction memory traces of real programs with valgrind's
# lackey tool, starting at the program's hot function (past dynamic linking and
# start-up), filtered through the seed paper's Table 1 caches (L1I/L1D 32 KiB,
# L2 512 KiB), and writes them to traces/ as compressed hscm post-cache traces.
#
#   bash scripts/capture-traces.sh [--instructions 10M] [--out traces] [--keep]
#
# --keep leaves traces that already exist in the output directory alone (resume).
#
# Programs (Debian packages, installed here): cjpeg / djpeg (libjpeg-turbo-progs),
# H.264 encode (ffmpeg + libx264) and decode (ffmpeg), MPEG-2 encode (mjpegtools'
# mpeg2enc) and decode (libmpeg2's mpeg2dec), plus an FFT and a qsort-based sort built
# from scripts/traceprogs/, and for paging also xz compressing text (xz-utils). Each
# window starts at the first fetch of a named function; its address is found from the
# library's symbol table plus the library's load address under valgrind (printed by the
# dynamic loader with LD_DEBUG=files, and checked again in the traced run itself).
set -euo pipefail
cd "$(dirname "$0")/.."
INSTR=10M
OUT=traces
KEEP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --instructions) INSTR=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    *) echo "usage: $0 [--instructions N] [--out DIR] [--keep]" >&2; exit 2 ;;
  esac
done

need=()
for p in valgrind:valgrind cjpeg:libjpeg-turbo-progs ffmpeg:ffmpeg mpeg2enc:mjpegtools mpeg2dec:mpeg2dec gcc:build-essential nm:binutils zstd:zstd xz:xz-utils; do
  command -v "${p%%:*}" >/dev/null || need+=("${p#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi
export PATH="$HOME/.cargo/bin:$PATH"
cargo build -q --release --locked -p hscm-cli
HSCM=$PWD/target/release/hscm
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# Inputs, all generated deterministically.
ffmpeg -nostdin -loglevel error -f lavfi -i "mandelbrot=size=1024x768:end_pts=1" -frames:v 1 "$WORK/in.ppm"
cjpeg -quality 90 -outfile "$WORK/in.jpg" "$WORK/in.ppm"
ffmpeg -nostdin -loglevel error -f lavfi -i "testsrc2=size=352x288:rate=25" -frames:v 10 -pix_fmt yuv420p "$WORK/cif.y4m"
ffmpeg -nostdin -loglevel error -i "$WORK/cif.y4m" -c:v libx264 -threads 1 -preset medium "$WORK/cif.264"
mpeg2enc -v 0 -f 3 -b 1500 -o "$WORK/cif.m2v" < "$WORK/cif.y4m"
# 4 MB of text: words of a seeded vocabulary, half drawn Pareto-skewed, half uniform.
python3 - "$WORK/in.txt" <<'PY'
import random, sys
r = random.Random(7)
words = ["".join(r.choice("etaoinshrdlucmfw") for _ in range(r.randint(2, 9))) for _ in range(5000)]
out, n = [], 0
while n < 4_000_000:
    w = words[min(int(r.paretovariate(1.1)) - 1, 4999)] if r.random() < 0.5 else r.choice(words)
    out.append(w)
    n += len(w) + 1
open(sys.argv[1], "w").write(" ".join(out))
PY
gcc -O2 -g -no-pie -o "$WORK/fft" scripts/traceprogs/fft.c -lm
gcc -O2 -g -no-pie -o "$WORK/sort" scripts/traceprogs/sort.c

lib_path() { local deps; deps=$(ldd "$1"); awk -v l="$2" '$1 ~ "^"l {print $3; exit}' <<<"$deps"; }

# Load address of library $1 in the run of "${@:2}" under valgrind.
lib_base_under_valgrind() {
  local lib=$1; shift
  LD_DEBUG=files valgrind --tool=none --log-file=/dev/null "$@" 2>"$WORK/ld-probe.log" >/dev/null <"${STDIN_FROM:-/dev/null}" || true
  base_from_ld_debug "$lib" < "$WORK/ld-probe.log"
}
base_from_ld_debug() {
  awk -v l="$1" 'index($0, "file=" l) && /generating link map/ {grab=1; next}
                 grab && /base:/ {for (i=1;i<=NF;i++) if ($i=="base:") {print $(i+1); exit}}'
}
sym_offset() {  # file symbol -> hex offset
  # Whole symbol tables first: awk stopping early would SIGPIPE nm under pipefail.
  local syms; syms=$( { nm -D --defined-only "$1"; nm --defined-only "$1"; } 2>/dev/null || true)
  awk -v s="$2" '($3==s || index($3, s"@")==1) && ($2=="T" || $2=="t") {print $1; exit}' <<<"$syms"
}

manifest="$OUT/MANIFEST.md"
[ "$KEEP" = 1 ] && [ -f "$manifest" ] || {
  echo "# Shipped memory traces"
  echo
  echo "Made by \`bash scripts/capture-traces.sh --instructions $INSTR\` on $(date -u +%Y-%m-%d)"
  echo "($(valgrind --version), $(uname -m)). Each: the first $INSTR instructions from the"
  echo "first call of the start function, through L1I/L1D 32 KiB + L2 512 KiB (64 B lines,"
  echo "write-back, LRU): L2 misses (reads) and dirty evictions (writes) with the"
  echo "instructions retired between them."
  echo
  echo "| trace | program | start function | references | instructions |"
  echo "|---|---|---|---|---|"
} > "$manifest"

# capture NAME LIBNAME SYMBOL CMD...  (LIBNAME "-" means the executable itself, non-PIE)
capture() {
  local name=$1 lib=$2 sym=$3; shift 3
  # RAW=1: keep every reference (no cache filter) for the paging simulator, in paging/.
  local dest="$OUT" filter="--post-cache"
  if [ "${RAW:-0}" = 1 ]; then dest="$OUT/paging"; filter=""; mkdir -p "$dest"; fi
  if [ "$KEEP" = 1 ] && [ -s "$dest/$name.hscm.zst" ]; then
    echo "== $name: kept"
    return
  fi
  local exe; exe=$(command -v "$1")
  local file base
  if [ "$lib" = "-" ]; then
    file=$exe; base=0
  else
    file=$(lib_path "$exe" "$lib")
    base=$(lib_base_under_valgrind "$lib" "$@")
    [ -n "$base" ] || { echo "capture: no load address for $lib in $*" >&2; exit 1; }
  fi
  local off; off=$(sym_offset "$file" "$sym")
  [ -n "$off" ] || { echo "capture: $sym not found in $file" >&2; exit 1; }
  local start; start=$(printf '0x%x' $(( base + 0x$off )))
  echo "== $name: $* (start at $sym = $start)"
  local t0=$SECONDS
  # The converter stops reading after the window; valgrind would then run the program
  # to its end with nobody listening, so it is stopped explicitly.
  rm -f "$WORK/pipe"; mkfifo "$WORK/pipe"
  LD_DEBUG=files valgrind --tool=lackey --trace-mem=yes --log-fd=9 "$@" 9>"$WORK/pipe" 1>/dev/null 2>"$WORK/$name.ld" <"${STDIN_FROM:-/dev/null}" &
  local vg=$!
  # shellcheck disable=SC2086 # $filter is one flag or none
  "$HSCM" trace convert "$WORK/pipe" --from lackey --start-pc "$start" --instructions "$INSTR" $filter \
    -o "$dest/$name.hscm.zst" --json > "$WORK/$name.json"
  # KILL: a program that handles TERM, as xz does, would run on to its end under valgrind.
  kill -KILL "$vg" 2>/dev/null || true
  wait "$vg" 2>/dev/null || true
  if [ "$lib" != "-" ]; then
    local seen; seen=$(base_from_ld_debug "$lib" < "$WORK/$name.ld")
    [ "$seen" = "$base" ] || { echo "capture: $lib loaded at $seen in the traced run, $base before" >&2; exit 1; }
  fi
  local refs instr
  refs=$(python3 -c "import json;print(json.load(open('$WORK/$name.json'))['written'])")
  instr=$(python3 -c "import json;print(json.load(open('$WORK/$name.json'))['instructions'])")
  echo "   $refs memory requests over $instr instructions ($((SECONDS - t0)) s)"
  local cmd="$(basename "$1") ${*:2}${STDIN_FROM:+ < $STDIN_FROM}"
  local label=$name; [ "${RAW:-0}" = 1 ] && label="paging/$name (all references)"
  echo "| $label | \`$cmd\` | \`$sym\` | $refs | $instr |" | sed "s|$WORK/||g" >> "$manifest"
}

capture cjpeg libjpeg.so jpeg_write_scanlines cjpeg -quality 90 -outfile "$WORK/out.jpg" "$WORK/in.ppm"
capture djpeg libjpeg.so jpeg_read_scanlines djpeg -outfile "$WORK/out.ppm" "$WORK/in.jpg"
capture h264enc libx264.so x264_encoder_encode ffmpeg -nostdin -nostats -loglevel error -threads 1 -i "$WORK/cif.y4m" -c:v libx264 -threads 1 -f null -
capture h264dec libavcodec.so avcodec_send_packet ffmpeg -nostdin -nostats -loglevel error -threads 1 -i "$WORK/cif.264" -f null -
STDIN_FROM="$WORK/cif.y4m" capture mpeg2enc libmpeg2encpp _ZN10SeqEncoder12EncodeStreamEv mpeg2enc -v 0 -f 3 -b 1500 -o "$WORK/out.m2v"
capture mpeg2dec libmpeg2.so mpeg2_parse mpeg2dec -o null "$WORK/cif.m2v"
capture fft - main "$WORK/fft" 262144
capture sort - main "$WORK/sort" 1048576
# Whole reference streams (no cache filter) for `hscm sim paging`.
RAW=1 capture djpeg libjpeg.so jpeg_read_scanlines djpeg -outfile "$WORK/out.ppm" "$WORK/in.jpg"
RAW=1 capture sort - main "$WORK/sort" 1048576
# A larger footprint (about 5.6 MiB in the window): xz's match finder over 4 MB of text.
RAW=1 capture xz liblzma.so lzma_code xz -6 -T1 -c "$WORK/in.txt"
echo "traces written to $OUT (manifest: $manifest)"
