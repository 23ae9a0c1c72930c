#!/usr/bin/env python3
"""Where a realtime run's latency goes, frame by frame, from a keyer trace (--trace FILE).

A stream read with --realtime at a known rate releases frame i at (its frame 0's release) +
i / fps; the trace has each frame's read (decode) and write (drawn and written) events, so a
frame's latency is its write's end minus its release, as the session's statistics count it
(within the time between frame 0's release and its read's start, microseconds). The batch
stages (detect, pose, mesh, infer, people) have one event per batch. Prints, compactly:
  - the latency p50 / p99 / max over all frames, over the first frames of the streams
    (--first, default 2: frames 0 and 1) and over the rest (the steady state);
  - the frame indices whose slowest stream was slowest (a burst of all streams, or one);
  - the slowest frames: stream, frame, latency, its decode, release to decoded, decoded to
    the write's start (prepare, the model stages and their queues), the write;
  - each batch stage's slowest batches: when (ms after the first release, and as a frame
    index), frames in it, duration.
usage: scripts/trace-latency.py TRACE.json [--fps 30] [--first 2] [--worst 6]
"""
import argparse
import json
import sys

BATCH_STAGES = ("detect", "pose", "mesh", "infer", "people")


def quantile(values, q):
    """The nearest-rank quantile (as the session's histogram counts it: the value below
    which a fraction q of the values lie)."""
    if not values:
        return float("nan")
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(q * len(s) + 0.999999) - 1))
    return s[k]


def load(path):
    with open(path) as f:
        d = json.load(f)
    reads, writes, batches = {}, {}, {}
    for e in d.get("traceEvents", []):
        if e.get("ph") != "X":
            continue
        name, a = e.get("name"), e.get("args", {})
        ts, dur = float(e["ts"]), float(e.get("dur", 0.0))
        if name in ("read", "write") and "stream" in a and "frame" in a:
            (reads if name == "read" else writes)[(a["stream"], a["frame"])] = (ts, dur)
        elif name in BATCH_STAGES:
            batches.setdefault(name, []).append((ts, dur, a.get("frames", 1)))
    return reads, writes, batches


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--fps", type=float, default=30.0)
    ap.add_argument("--first", type=int, default=2, help="frames counted as the start")
    ap.add_argument("--worst", type=int, default=6)
    a = ap.parse_args(argv)
    reads, writes, batches = load(a.trace)
    origin = {}
    for (s, f), (ts, _) in reads.items():
        if f == 0:
            origin[s] = ts
    if not origin:
        print("trace-latency: no frame 0 read in the trace", file=sys.stderr)
        return 1
    t0 = min(origin.values())
    period = 1e6 / a.fps
    rows = []  # (latency ms, stream, frame, decode ms, released->decoded ms, ->write ms, write ms)
    for (s, f), (wts, wdur) in writes.items():
        if s not in origin or (s, f) not in reads:
            continue
        due = origin[s] + f * period
        rts, rdur = reads[(s, f)]
        rows.append(((wts + wdur - due) / 1e3, s, f, rdur / 1e3, (rts + rdur - due) / 1e3,
                     (wts - rts - rdur) / 1e3, wdur / 1e3))
    if not rows:
        print("trace-latency: no frame with both a read and a write", file=sys.stderr)
        return 1

    def summary(sel):
        lat = [r[0] for r in sel]
        return (f"{quantile(lat, 0.5):.1f} / {quantile(lat, 0.99):.1f} / {max(lat):.1f} ms "
                f"({len(lat)} frames)" if lat else "none")

    first = [r for r in rows if r[2] < a.first]
    rest = [r for r in rows if r[2] >= a.first]
    print(f"latency p50 / p99 / max: all {summary(rows)}; frames 0-{a.first - 1} "
          f"{summary(first)}; frames {a.first}+ {summary(rest)}")
    by_frame = {}
    for r in rows:
        by_frame.setdefault(r[2], []).append(r[0])
    top = sorted(by_frame.items(), key=lambda kv: -max(kv[1]))[: a.worst]
    print("slowest frame indices (max / median over streams, streams over 50 ms): " + "; ".join(
        f"{f}: {max(v):.1f} / {quantile(v, 0.5):.1f}, {sum(1 for x in v if x > 50)}"
        for f, v in top))
    print("slowest frames (stream/frame: latency = released to decoded [decode] + to the "
          "write + write, ms): " + "; ".join(
              f"{s}/{f}: {lat:.1f} = {rel:.1f} [{dec:.1f}] + {mid:.1f} + {wr:.1f}"
              for lat, s, f, dec, rel, mid, wr in sorted(rows, reverse=True)[: a.worst]))
    for name in BATCH_STAGES:
        b = batches.get(name)
        if not b:
            continue
        durs = [d / 1e3 for _, d, _ in b]
        slow = sorted(b, key=lambda x: -x[1])[: a.worst]
        print(f"{name}: {len(b)} batches, mean {sum(durs) / len(durs):.2f} ms, p99 "
              f"{quantile(durs, 0.99):.2f}; slowest (ms after the first release = frame, "
              "frames, ms): " + "; ".join(
                  f"{(ts - t0) / 1e3:.0f} = f{(ts - t0) / period:.1f}, {n}, {d / 1e3:.1f}"
                  for ts, d, n in slow))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
