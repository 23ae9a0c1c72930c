"""Nothing leaks: 1,000 rounds of create / process / destroy, with the Python heap
(tracemalloc) and the process's resident memory bounded."""
import gc
import tracemalloc

import numpy as np

import keyer


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_create_process_destroy_1000_times():
    frame = np.random.default_rng(1).integers(0, 256, (72, 96, 3), dtype=np.uint8)
    out = np.empty_like(frame)

    def round_trip(i):
        if i % 2:
            with keyer.Keyer(threads=1, feather=2) as k:
                k.process(frame, out)
                k.matte(frame)
        else:  # freed by the garbage collector instead of close()
            k = keyer.Keyer(threads=1, effect="alpha")
            k.process(frame, matte=True)
            del k

    for i in range(100):  # warm-up: caches, allocator pools
        round_trip(i)
    gc.collect()
    tracemalloc.start()
    snap0 = tracemalloc.take_snapshot()
    rss0 = rss_bytes()
    for i in range(1000):
        round_trip(i)
    gc.collect()
    rss1 = rss_bytes()
    grown = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(snap0, "filename"))
    tracemalloc.stop()
    # one leaked model alone (selfie: 0.5 MB of weights) would add 500 MB over 1,000 rounds
    assert rss1 - rss0 < 16 << 20, "resident memory grew by %d bytes" % (rss1 - rss0)
    assert grown < 256 << 10, "the Python heap grew by %d bytes" % grown


def test_detector_overlay_session_rounds(data):
    """Detectors, overlays and sessions (with a stream added, closed unrun or by the garbage
    collector through an on_frame closure that holds the session) come and go without
    leaking."""
    frame = keyer.read_image(data / "grace_hopper.jpg")
    clip = str(data / "sample_hevc.mp4")

    def round_trip(i):
        with keyer.Detector("faces", threads=1) as det:
            det.detect(frame)
        for _ in range(5):
            ov = keyer.Overlay(64)
            ov.box(10, 10, 50, 50, fill=(1, 0, 0, 0.5))
            ov.label(5, 5, "id %d" % i)
            ov.render(frame.copy())
            del ov
        s = keyer.Session(device="cpu", on_frame=lambda *a: s.report())
        s.add(clip)
        if i % 2:
            s.close()
        del s  # the lambda holds s: a cycle for the collector

    for i in range(20):
        round_trip(i)
    gc.collect()
    tracemalloc.start()
    snap0 = tracemalloc.take_snapshot()
    rss0 = rss_bytes()
    for i in range(200):
        round_trip(i)
    gc.collect()
    rss1 = rss_bytes()
    grown = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(snap0, "filename"))
    tracemalloc.stop()
    # a leaked detector (face-short: 0.4 MB of weights) or session (a decoder) would add
    # tens of megabytes over 200 rounds
    assert rss1 - rss0 < 16 << 20, "resident memory grew by %d bytes" % (rss1 - rss0)
    assert grown < 256 << 10, "the Python heap grew by %d bytes" % grown
