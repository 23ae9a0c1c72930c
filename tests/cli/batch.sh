#!/usr/bin/env bash
# keyer batch MANIFEST -o OUTDIR --shard K/N: three shards over a manifest cover every input
# once; each output is byte for byte the output of `keyer IN -o OUT`; a re-run skips what is
# done; a temporary file left by a killed run is not taken for an output; the shard follows
# a Slurm array's numbering; a bad input fails alone and is named with its reason.
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
command -v python3 >/dev/null || { echo "SKIP: python3 (reads the JSON summaries) is missing"; exit 77; }

opts=(--mask --model selfie --device cpu --preset ultrafast -q)
mkdir -p "$tmp/clips/sub"
i=0
for name in a.mp4 b.mp4 sub/c.mp4 d.mkv e.mp4; do
    i=$((i + 1))
    "$bin" make-sample "$tmp/clips/$name" --image "$data/grace_hopper.jpg" --size 160x96 \
        --frames $((4 + i)) --fps 10 --preset ultrafast 2>/dev/null || fail "make-sample $name"
done
cd "$tmp" || fail "cd"
cat > manifest.txt <<'EOF'
# five clips; blank lines and comments are not entries
clips/a.mp4

   clips/b.mp4
clips/sub/c.mp4
# clips/missing.mp4
clips/d.mkv
clips/e.mp4
EOF
inputs=(clips/a.mp4 clips/b.mp4 clips/sub/c.mp4 clips/d.mkv clips/e.mp4)
outputs=(a.mp4 b.mp4 c.mp4 d.mkv e.mp4)

# the single-machine runs
mkdir -p single
for j in 0 1 2 3 4; do
    "$bin" "${inputs[$j]}" -o "single/${outputs[$j]}" "${opts[@]}" || fail "single run ${inputs[$j]}"
done

# the same as the single run: MP4 byte for byte; Matroska frame for frame (its muxer writes
# random UIDs, so two single runs of a .mkv differ too)
same() {
    case "$1" in
    *.mkv) "$bin" compare "$1" "$2" --min-psnr 99 >/dev/null ;;
    *) cmp -s "$1" "$2" ;;
    esac
}

# a JSON summary's field: summary FILE EXPR (a Python expression over s)
summary() { python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

# three shards: entries 0,3 / 1,4 / 2
for k in 0 1 2; do
    "$bin" batch manifest.txt -o out "${opts[@]}" --shard $k/3 || fail "shard $k/3 failed"
    [ -f out/keyer-batch-$k-of-3.json ] || fail "no summary for shard $k/3"
done
[ "$(summary out/keyer-batch-0-of-3.json 's["inputs"]')" = "['clips/a.mp4', 'clips/d.mkv']" ] ||
    fail "shard 0/3 has $(summary out/keyer-batch-0-of-3.json 's["inputs"]')"
[ "$(summary out/keyer-batch-1-of-3.json 's["inputs"]')" = "['clips/b.mp4', 'clips/e.mp4']" ] ||
    fail "shard 1/3 has $(summary out/keyer-batch-1-of-3.json 's["inputs"]')"
[ "$(summary out/keyer-batch-2-of-3.json 's["inputs"]')" = "['clips/sub/c.mp4']" ] ||
    fail "shard 2/3 has $(summary out/keyer-batch-2-of-3.json 's["inputs"]')"
all=$(for k in 0 1 2; do summary out/keyer-batch-$k-of-3.json '"\n".join(o["input"] for o in s["outputs"])'; done | sort)
[ "$all" = "$(printf '%s\n' "${inputs[@]}" | sort)" ] || fail "the shards' outputs are not every input once: $all"
frames=0
for k in 0 1 2; do frames=$((frames + $(summary out/keyer-batch-$k-of-3.json 's["frames"]'))); done
[ "$frames" = 35 ] || fail "the shards wrote $frames frames, not 35"
for j in 0 1 2 3 4; do
    same "out/${outputs[$j]}" "single/${outputs[$j]}" || fail "out/${outputs[$j]} differs from the single run"
done
[ -z "$(ls -A out | grep '^\.')" ] || fail "temporary files left: $(ls -A out)"

# a re-run skips every completed output and leaves it untouched
before=$(stat -c %Y:%s out/a.mp4)
"$bin" batch manifest.txt -o out "${opts[@]}" --shard 0/3 || fail "the re-run failed"
[ "$(summary out/keyer-batch-0-of-3.json 'len(s["skipped"]), len(s["outputs"])')" = "(2, 0)" ] ||
    fail "the re-run did not skip both outputs"
[ "$(stat -c %Y:%s out/a.mp4)" = "$before" ] || fail "the re-run rewrote out/a.mp4"

# a half-written temporary file (what a killed run leaves) is not an output: the input runs again
head -c 3000 out/d.mkv > out/.d.partial.mkv
rm out/d.mkv
"$bin" batch manifest.txt -o out "${opts[@]}" --shard 0/3 || fail "the run after a partial file failed"
[ "$(summary out/keyer-batch-0-of-3.json '[o["input"] for o in s["outputs"]], len(s["skipped"])')" = "(['clips/d.mkv'], 1)" ] ||
    fail "the partial file was taken for an output: $(cat out/keyer-batch-0-of-3.json)"
same out/d.mkv single/d.mkv || fail "out/d.mkv differs from the single run after resuming"
[ ! -e out/.d.partial.mkv ] || fail "the temporary file is left"

# a run killed mid-way leaves no output under the final name; the next run completes it
"$bin" make-sample long.mp4 --image "$data/messi5.jpg" --size 320x180 --frames 300 --fps 30 \
    --preset ultrafast 2>/dev/null || fail "make-sample long"
echo long.mp4 > long.txt
"$bin" long.mp4 -o single/long.mp4 "${opts[@]}" || fail "single run long.mp4"
"$bin" batch long.txt -o killed "${opts[@]}" &
pid=$!
for _ in $(seq 1 1200); do   # up to 60 s: sanitizer builds start slowly
    [ -s killed/.long.partial.mp4 ] && break
    sleep 0.05
done
[ -s killed/.long.partial.mp4 ] || { kill -9 $pid; fail "no temporary file appeared"; }
kill -9 $pid
wait $pid 2>/dev/null
if [ -e killed/long.mp4 ]; then
    echo "note: the run finished before it was killed; the kill test proves nothing this time"
    rm killed/long.mp4
    head -c 5000 single/long.mp4 > killed/.long.partial.mp4
fi
[ -e killed/.long.partial.mp4 ] || fail "the killed run left no temporary file"
"$bin" batch long.txt -o killed "${opts[@]}" || fail "the run after the kill failed"
cmp -s killed/long.mp4 single/long.mp4 || fail "killed/long.mp4 differs from the single run"
[ ! -e killed/.long.partial.mp4 ] || fail "the temporary file of the killed run is left"

# the shard of a Slurm array task: --array=3-7:2 numbers the tasks 3, 5, 7; task 5 is shard 1/3
SLURM_ARRAY_TASK_ID=5 SLURM_ARRAY_TASK_MIN=3 SLURM_ARRAY_TASK_MAX=7 SLURM_ARRAY_TASK_STEP=2 \
    SLURM_ARRAY_TASK_COUNT=3 "$bin" batch manifest.txt -o slurm "${opts[@]}" ||
    fail "the run as Slurm task 5 of 3-7:2 failed"
[ "$(summary slurm/keyer-batch-1-of-3.json 's["inputs"]')" = "['clips/b.mp4', 'clips/e.mp4']" ] ||
    fail "Slurm task 5 of 3-7:2 is not shard 1/3"
# an array with holes (--array=1,2,9) has no shard numbering: refused
SLURM_ARRAY_TASK_ID=9 SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_MAX=9 SLURM_ARRAY_TASK_STEP=1 \
    SLURM_ARRAY_TASK_COUNT=3 "$bin" batch manifest.txt -o holes "${opts[@]}" 2>/dev/null
[ $? = 2 ] || fail "an unevenly spaced array was not refused"
# --shard wins over the environment
SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=2 SLURM_ARRAY_TASK_COUNT=3 \
    "$bin" batch manifest.txt -o slurm "${opts[@]}" --shard 2/3 || fail "--shard 2/3 in a Slurm task"
[ -f slurm/keyer-batch-2-of-3.json ] || fail "--shard did not win over the environment"

# usage errors: a bad shard, two inputs with one output name
for s in 3/3 1 x/2 -1/2 0/0; do
    "$bin" batch manifest.txt -o bad "${opts[@]}" --shard "$s" 2>/dev/null
    [ $? = 2 ] || fail "--shard $s was not refused"
done
mkdir -p other && cp clips/a.mp4 other/a.mp4
printf 'clips/a.mp4\nother/a.mp4\n' > twice.txt
"$bin" batch twice.txt -o twice "${opts[@]}" 2>err && fail "two inputs writing twice/a.mp4 were accepted"
grep -q "lines 1 (clips/a.mp4) and 2 (other/a.mp4) would both write twice/a.mp4" err ||
    { cat err; fail "the collision message"; }
[ ! -e twice ] || fail "the refused manifest created its output directory"

# an input that is not a video fails alone, named with its reason; the others are done
echo "not a video" > clips/broken.mp4
printf 'clips/broken.mp4\nclips/b.mp4\n' > broken.txt
"$bin" batch broken.txt -o broken "${opts[@]}" 2>/dev/null
[ $? = 1 ] || fail "a failed input did not make the exit status 1"
cmp -s broken/b.mp4 single/b.mp4 || fail "the good input beside the broken one"
[ "$(summary broken/keyer-batch-0-of-1.json 's["failed"][0]["input"], bool(s["failed"][0]["reason"])')" = "('clips/broken.mp4', True)" ] ||
    fail "the summary does not name the failed input with a reason: $(cat broken/keyer-batch-0-of-1.json)"
[ -z "$(ls -A broken | grep -v -e '^b.mp4$' -e '^keyer-batch-0-of-1.json$')" ] ||
    fail "the failed input left files: $(ls -A broken)"
echo "PASS"
