#!/usr/bin/env bash
# Many streams of 1080p blur to a null output on the GPU (issue 28): where the time goes.
#
#   bench/many-streams.sh KEYER_BINARY STREAMS [keyer options...]
#
# Makes (once; KEYER_BENCH_DIR keeps it) a 1080p30 clip of 300 frames with `keyer make-sample`
# (--noise 6, x264 veryfast, a keyframe every 12 frames; KEYER_BENCH_SIZE and
# KEYER_BENCH_FRAMES change size and length), runs `keyer` on STREAMS links to it with `--blur --stats` and the
# options given (e.g. `--device cuda:0`), and prints in a few lines:
#   - frames/s, end-to-end latency p50/p99, the bottleneck stage, the decoders' set-ups over
#     all streams (one per decoder session; the session's --stats), and the pictures the
#     decoders were given against the frames read (split decode decodes the next chunk's first
#     pictures again at each chunk's end);
#   - per stage: workers, mean/p99 ms per call, utilisation, mean/capacity of its queue;
#   - with several GPUs, one line per GPU: its frames, its own seconds (first frame read to
#     last written) and frames/s, its mean batch, bottleneck and stages (ms per call,
#     utilisation, mean queue);
#   - the process's CPU time per frame written (user + system, getrusage of the child) and the
#     cores it kept busy on average;
#   - with --split-gpus and -v (after the script's -q), the split's timeline from keyer's log:
#     when the first and last frames came out, when each lane read its last frame, how long
#     the lanes waited for room and the writer for chunks;
#   - its threads by CPU time, grouped by name (keyer names its pipeline threads "kr-read",
#     "kr-write", ...; others keep the process name), sampled from /proc every 50 ms: the
#     threads, their CPU seconds and the share of the wall time of the busiest one.
# Run it under `taskset -c 0-15` to stand for a 16-core machine (keyer sizes its thread pools
# from the CPU affinity). Needs python3.
set -u
set -o pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
K=${1:?usage: bench/many-streams.sh KEYER_BINARY STREAMS [keyer options...]}
N=${2:?usage: bench/many-streams.sh KEYER_BINARY STREAMS [keyer options...]}
shift 2
dir=${KEYER_BENCH_DIR:-$(mktemp -d)}
mkdir -p "$dir"
[ -x "$K" ] || { echo "no keyer binary at $K"; exit 2; }
size=${KEYER_BENCH_SIZE:-1920x1080}
frames=${KEYER_BENCH_FRAMES:-300}
clip=$dir/b$size-$frames.mp4
# made under a temporary name: a run cut short leaves no half-written sample behind
[ -f "$clip" ] || { "$K" make-sample "$clip.part.mp4" --image "$repo/tests/data/grace_hopper.jpg" \
    --size "$size" --frames "$frames" --fps 30 --noise 6 --preset veryfast 2>/dev/null &&
    mv "$clip.part.mp4" "$clip"; } || { echo "make-sample failed"; exit 1; }
ins=()
for i in $(seq 1 "$N"); do
    ln -sf "$clip" "$dir/s$size-$i.mp4"
    ins+=("$dir/s$size-$i.mp4")
done
python3 - "$dir/stats.json" "$N" "$K" "${ins[@]}" --blur --stats "$dir/stats.json" -q -y "$@" <<'PY'
import collections, json, os, resource, subprocess, sys, time
stats, n, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
try:
    os.unlink(stats)
except OSError:
    pass
t0 = time.time()
p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
threads = {}  # tid -> (name, cpu seconds)
tick = os.sysconf('SC_CLK_TCK')
while p.poll() is None:
    try:
        for tid in os.listdir('/proc/%d/task' % p.pid):
            try:
                with open('/proc/%d/task/%s/stat' % (p.pid, tid)) as f:
                    s = f.read()
                name = s[s.index('(') + 1:s.rindex(')')]
                rest = s[s.rindex(')') + 2:].split()
                threads[tid] = (name, (int(rest[11]) + int(rest[12])) / tick)
            except (OSError, ValueError, IndexError):
                pass
    except OSError:
        pass
    time.sleep(0.05)
err = p.stderr.read()
wall = time.time() - t0
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
try:
    d = json.load(open(stats))
except Exception as e:
    print('%s streams: exit %s, no statistics (%s) %s' % (n, p.returncode, e, err.strip()[-300:]))
    sys.exit(0)
w = d['frames']['written']
setups = sum(s.get('decoder_setups', 0) for s in d.get('streams', []))
decoded = sum(s.get('decoded_pictures', 0) for s in d.get('streams', []))
read = sum(s.get('frames_read', 0) for s in d.get('streams', []))
print('%s streams on %s: %.1f frames/s, %d frames, latency p50 %.1f p99 %.1f ms, batch %d, '
      'bottleneck %s, decoder set-ups %d, pictures decoded %d for %d read (+%.1f%%), exit %d' % (
          n, d['device'], d['fps'], w, d['latency_ms']['p50'], d['latency_ms']['p99'],
          d['batch'], d['bottleneck'], setups, decoded, read,
          100.0 * (decoded - read) / max(read, 1), p.returncode))
for s in d['stages']:
    q = s.get('queue', {})
    print('  %-9s x%-2d %7.3f / %7.3f ms  util %.2f  queue %.1f/%d' % (
        s['name'], s['workers'], s['latency_ms']['mean'], s['latency_ms']['p99'],
        s['utilization'], q.get('mean_depth', 0), q.get('capacity', 0)))
for g in d.get('devices', []):  # several GPUs: each one's own run
    print('  %s: %d frames in %.3f s, %.1f frames/s, batch mean %.1f, bottleneck %s; %s' % (
        g['device'], g['frames_written'], g['seconds'], g['fps'], g['batch_mean'],
        g['bottleneck'], ', '.join('%s x%d %.2f ms u%.2f q%.1f' % (
            s['name'], s['workers'], s['latency_ms']['mean'], s['utilization'],
            s.get('queue', {}).get('mean_depth', 0)) for s in g['stages'])))
for line in err.splitlines():  # with --split-gpus -v: the split's timeline (info lines)
    if 'split: ' in line:
        print('  ' + line[line.index('split: '):])
cpu = ru.ru_utime + ru.ru_stime
print('  cpu: %.3f ms per frame (user %.1f s, sys %.1f s), %.1f cores busy over %.1f s '
      '(the session ran %.2f s)' % (1e3 * cpu / max(w, 1), ru.ru_utime, ru.ru_stime,
                                     cpu / wall, wall, d['seconds']))
groups = collections.defaultdict(list)
for name, sec in threads.values():
    groups[name].append(sec)
rows = sorted(groups.items(), key=lambda kv: -sum(kv[1]))
print('  threads: ' + '; '.join('%s x%d %.2f s (max %.0f%%)' % (
    k, len(v), sum(v), 100 * max(v) / max(d['seconds'], 1e-9)) for k, v in rows[:8]))
PY
