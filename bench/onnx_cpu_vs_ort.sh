#!/bin/sh
# keyer's cpu backend against ONNX Runtime's CPU execution provider on one ONNX model, measured
# side by side: rounds of (keyer, ONNX Runtime) alternate so that both see the same machine,
# and the ratio is taken round by round (the figure to quote is the median ratio).
#
#   bench/onnx_cpu_vs_ort.sh [--model FILE.onnx] [--threads N] [--rounds N] [--iterations N]
#                            [--keyer PATH] [--ort-dir DIR]
#
#   --model       the ONNX model (default models/u2netp.onnx)
#   --threads     threads for both (default 2): keyer --threads N; ONNX Runtime
#                 intraOpNumThreads N, interOpNumThreads 1
#   --rounds      alternating rounds (default 5)
#   --iterations  timed inferences per round and runtime (default 20, after 3 warm-up ones)
#   --keyer       the keyer executable (default build/keyer)
#   --ort-dir     a folder whose node_modules holds onnxruntime-node (default: $KEYER_ORT_DIR,
#                 else build/ort), e.g. after
#                   mkdir -p build/ort && cd build/ort && npm install onnxruntime-node@1.30.0
#                 (install scripts may be disabled with --ignore-scripts: the package carries
#                 libonnxruntime.so for linux x64)
#
# Prints each round's median wall times and their ratio, the fastest inference of each (what a
# quiet moment gives on a shared machine) and the CPU time per inference of each (all threads),
# then the medians over the rounds. On a busy machine two threads' fork-join stalls whenever one
# thread waits for a core, so quote the medians only from a quiet machine. Both
# runtimes time inference only (inputs already in place): `keyer bench nn` and
# bench/ort_cpu_bench.js.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
model=$root/models/u2netp.onnx
threads=2
rounds=5
iterations=20
keyer=$root/build/keyer
ort_dir=${KEYER_ORT_DIR:-$root/build/ort}

die() { echo "onnx_cpu_vs_ort: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case $1 in
    --model) model=${2:?}; shift 2 ;;
    --threads) threads=${2:?}; shift 2 ;;
    --rounds) rounds=${2:?}; shift 2 ;;
    --iterations) iterations=${2:?}; shift 2 ;;
    --keyer) keyer=${2:?}; shift 2 ;;
    --ort-dir) ort_dir=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
    esac
done
[ -f "$model" ] || die "no model file $model (scripts/fetch-models.sh fetches u2netp)"
[ -x "$keyer" ] || die "no keyer executable at $keyer (build it, or give --keyer)"
command -v node >/dev/null 2>&1 || die "node is not installed (apt-get install nodejs)"
[ -d "$ort_dir/node_modules/onnxruntime-node" ] ||
    die "onnxruntime-node not found under $ort_dir/node_modules (see --help)"
for v in "$threads" "$rounds" "$iterations"; do
    case $v in ''|*[!0-9]*) die "'$v' is not a number" ;; esac
done

# The value of "key": in a one-line JSON object.
field() { sed -n "s/.*\"$1\": *\([0-9.eE+-]*\).*/\1/p"; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2];
                                                 else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "model    $model"
echo "machine  $(nproc) cores: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n 1)"
echo "threads  $threads; $iterations timed inferences per round and runtime"
row() { printf '%-6s %10s %10s %9s %10s %10s %9s %10s %10s %9s\n' "$@"; }
row round keyer_ms ort_ms ort/keyer keyer_min ort_min ort/keyer keyer_cpu ort_cpu ort/keyer
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
r=1
while [ "$r" -le "$rounds" ]; do
    kj=$("$keyer" bench nn --model "$model" --backend cpu --threads "$threads" \
         --iterations "$iterations" --warmup 3 --json)
    oj=$(NODE_PATH="$ort_dir/node_modules" node "$here/ort_cpu_bench.js" "$model" \
         --threads "$threads" --iterations "$iterations" --warmup 3)
    k=$(echo "$kj" | field median_ms)
    kc=$(echo "$kj" | field cpu_ms)
    o=$(echo "$oj" | field median_ms)
    oc=$(echo "$oj" | field cpu_ms)
    km=$(echo "$kj" | field min_ms)
    om=$(echo "$oj" | field min_ms)
    [ -n "$k" ] && [ -n "$o" ] && [ -n "$kc" ] && [ -n "$oc" ] && [ -n "$km" ] && [ -n "$om" ] ||
        die "a run printed no timing (round $r)"
    ratio=$(awk -v a="$o" -v b="$k" 'BEGIN { printf "%.3f", a / b }')
    mratio=$(awk -v a="$om" -v b="$km" 'BEGIN { printf "%.3f", a / b }')
    cratio=$(awk -v a="$oc" -v b="$kc" 'BEGIN { printf "%.3f", a / b }')
    row "$r" "$k" "$o" "$ratio" "$km" "$om" "$mratio" "$kc" "$oc" "$cratio"
    for f in k:"$k" o:"$o" r:"$ratio" km:"$km" om:"$om" mr:"$mratio" kc:"$kc" oc:"$oc" \
        cr:"$cratio"; do
        echo "${f#*:}" >>"$tmp/${f%%:*}"
    done
    r=$((r + 1))
done
row median "$(median <"$tmp/k")" "$(median <"$tmp/o")" "$(median <"$tmp/r")" \
    "$(median <"$tmp/km")" "$(median <"$tmp/om")" "$(median <"$tmp/mr")" \
    "$(median <"$tmp/kc")" "$(median <"$tmp/oc")" "$(median <"$tmp/cr")"
