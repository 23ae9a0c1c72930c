"""keyer.Session (several streams, on_frame in order per stream, detections, drawing on the
frames) and keyer.run's detect, draw, export and config options, which equal the keyer
command's on the sample clip (frames and export)."""
import json
import os
import subprocess

import numpy as np
import pytest

import keyer


def frames(directory, prefix=""):
    names = sorted(n for n in os.listdir(directory) if n.endswith(".png") and n.startswith(prefix))
    return [keyer.read_image(os.path.join(directory, n)) for n in names]


def cli(keyer_bin, *args):
    subprocess.run([keyer_bin, *map(str, args), "-q"], check=True, capture_output=True)


@pytest.mark.parametrize("detect,draw", [("faces,pose", "all,graph:k=3"), ("faces", None)])
def test_run_detect_equals_cli(keyer_bin, data, tmp_path, detect, draw):
    # faces and pose: per-frame analysers; faces alone: the session's batched detector
    clip = str(data / "sample_hevc.mp4")
    for d in ("cli", "py"):
        (tmp_path / d).mkdir()
    args = ["--device", "cpu", "--threads", "1", "--detect", detect]
    if draw:
        args += ["--draw", draw]
    cli(keyer_bin, clip, "-o", tmp_path / "cli" / "f_%03d.png", *args,
        "--export", tmp_path / "cli.jsonl")
    stats = keyer.run(clip, tmp_path / "py" / "f_%03d.png", device="cpu", threads=1,
                      detect=detect.split(","), draw=draw, export=tmp_path / "py.jsonl")
    a, b = frames(tmp_path / "cli"), frames(tmp_path / "py")
    assert len(a) == len(b) == 24
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    # drawn on the frames as they are (no effect given): not the input itself
    assert stats["model"] == "none"
    ref = [json.loads(l) for l in (tmp_path / "cli.jsonl").read_text().splitlines()]
    got = [json.loads(l) for l in (tmp_path / "py.jsonl").read_text().splitlines()]
    assert len(ref) == 24 and got == ref
    assert any(f["faces"] or f.get("pose") for f in got)
    if detect == "faces":
        assert stats["detector"] == "face-short"


def test_run_config_equals_cli(keyer_bin, data, tmp_path):
    clip = str(data / "sample_hevc.mp4")
    cfg = tmp_path / "job.yaml"
    cfg.write_text("input: %s\nblur: 20\nrefine:\n  feather: 3\ndevice: cpu\nthreads: 1\n"
                   "smooth: 0\n" % clip)
    (tmp_path / "cli").mkdir()
    (tmp_path / "py").mkdir()
    cli(keyer_bin, "--config", cfg, "-o", tmp_path / "cli" / "f_%03d.png")
    keyer.run(None, tmp_path / "py" / "f_%03d.png", config=cfg)
    a, b = frames(tmp_path / "cli"), frames(tmp_path / "py")
    assert len(a) == 24 and all(np.array_equal(x, y) for x, y in zip(a, b))
    # the options given win over the file's
    (tmp_path / "py2").mkdir()
    keyer.run(None, tmp_path / "py2" / "f_%03d.png", config=cfg, blur=8)
    assert not np.array_equal(frames(tmp_path / "py2")[5], b[5])


def test_run_analytics_errors(data, tmp_path):
    clip = str(data / "sample_hevc.mp4")
    with pytest.raises(keyer.InvalidArgumentError, match="need detect"):
        keyer.run(clip, tmp_path / "o.mp4", export=tmp_path / "x.jsonl")
    with pytest.raises(keyer.InvalidArgumentError, match="detect: unknown 'hands'"):
        keyer.run(clip, tmp_path / "o.mp4", detect="faces,hands")
    with pytest.raises(keyer.InvalidArgumentError, match="draw: unknown 'circles'"):
        keyer.run(clip, tmp_path / "o.mp4", detect="faces", draw="boxes,circles")
    with pytest.raises(keyer.InvalidArgumentError, match="K in 1..16"):
        keyer.run(clip, tmp_path / "o.mp4", detect="faces", draw="graph:k=40")
    with pytest.raises(keyer.InvalidArgumentError, match="colour output"):
        keyer.run(clip, tmp_path / "o.mp4", detect="faces", mask=True)
    bad = tmp_path / "bad.yaml"
    bad.write_text("config: other.yaml\n")
    with pytest.raises(keyer.InvalidArgumentError, match="cannot name another"):
        keyer.run(clip, tmp_path / "o.mp4", config=bad)
    with pytest.raises(keyer.InputOutputError):
        keyer.run(clip, tmp_path / "o.mp4", config=tmp_path / "missing.yaml")


def test_session_streams_in_order_with_detections(data, tmp_path):
    clip = str(data / "sample_hevc.mp4")
    seen = {0: [], 1: []}

    def on_frame(stream, index, frame, detections):
        assert detections.stream == stream and detections.index == index
        seen[stream].append((index, frame.copy(), detections))

    with keyer.Session(detect=("faces", "pose"), on_frame=on_frame, device="cpu",
                       threads=1) as s:
        assert s.add(clip, tmp_path / "a_%03d.png") == 0
        assert s.add(clip) == 1
        stats = s.run()
        with pytest.raises(keyer.InvalidArgumentError, match="already run"):
            s.run()
    assert stats["frames_written"] == 48 and len(stats["streams"]) == 2
    for stream in (0, 1):
        assert [i for i, _, _ in seen[stream]] == list(range(24))
    # the frames pass through (detect without an effect): the written frames are the ones
    # on_frame saw, and the detections are a Detector's on those frames
    written = frames(tmp_path, "a_")
    assert len(written) == 24
    with keyer.Detector(("faces", "pose"), threads=1) as det:
        for (index, frame, d), out in zip(seen[0], written):
            assert frame.shape == (240, 320, 3)
            assert np.array_equal(frame, out)
            ref = det.detect(frame)
            assert d.faces.numpy().tolist() == ref.faces.numpy().tolist()
            assert [f.id for f in d.faces] == [f.id for f in ref.faces]
            assert (d.pose is None) == (ref.pose is None)
            if d.pose is not None:
                assert np.array_equal(d.pose.landmarks, ref.pose.landmarks)
    assert any(d.faces for _, _, d in seen[1])


def test_session_drawing_and_effects(data, tmp_path):
    clip = str(data / "sample_hevc.mp4")
    ov = keyer.Overlay()
    shapes = []

    def draw(stream, index, frame, detections):
        shapes.append(frame.shape)
        assert detections is None
        ov.clear()
        ov.box(10, 10, 60, 40, width=3, color=(1, 0, 0), fill=(0, 0, 1, 1))
        ov.render(frame, format="bgr")

    with keyer.Session(effect="green", format="bgr", on_frame=draw, device="cpu",
                       threads=1) as s:
        s.add(clip, tmp_path / "g_%03d.png")
        s.run()
    assert len(shapes) == 24 and shapes[0] == (240, 320, 3)
    out = frames(tmp_path, "g_")
    # the filled box (blue in RGB) is in every written frame; green screen elsewhere
    assert all(f[25, 35, 2] > 200 and f[25, 35, 0] < 40 for f in out)
    assert out[0][200, 300, 1] > 100
    # the alpha effect gives RGBA frames; format=None no pixels
    kinds = []
    with keyer.Session(effect="alpha", format="rgba", device="cpu",
                       on_frame=lambda s, i, f, d: kinds.append(f.shape)) as s:
        s.add(clip)
        s.run()
    assert kinds[0] == (240, 320, 4)
    with keyer.Session(effect="blur", format=None, detect="faces", device="cpu",
                       on_frame=lambda s, i, f, d: kinds.append((f, d))) as s:
        s.add(clip)
        stats = s.run()
    assert kinds[-1][0] is None and kinds[-1][1].faces is not None
    assert stats["detector"] == "face-short"


def test_session_errors_and_callbacks(data, tmp_path):
    clip = str(data / "sample_hevc.mp4")

    class Boom(Exception):
        pass

    def boom(stream, index, frame, detections):
        if index == 3:
            raise Boom("frame 3")

    with keyer.Session(on_frame=boom, device="cpu") as s:
        s.add(clip)
        with pytest.raises(Boom, match="frame 3"):
            s.run()
    progress = []
    with keyer.Session(device="cpu", progress=progress.append, progress_interval=0.01,
                       effect="mask") as s:
        s.add(clip)
        stats = s.run(stats=tmp_path / "s.json")
    assert progress and stats["frames_written"] == 24 and (tmp_path / "s.json").exists()
    with pytest.raises(keyer.InvalidArgumentError, match="unknown 'hands'"):
        keyer.Session(detect="hands")
    with pytest.raises(keyer.InvalidArgumentError, match="unknown option 'bogus'"):
        keyer.Session(bogus=1)
    with pytest.raises(keyer.InvalidArgumentError, match="format nv12"):
        keyer.Session(format="nv12", on_frame=print)
    s = keyer.Session(device="cpu")
    with pytest.raises(keyer.InputOutputError, match="missing.mp4"):
        s.add(tmp_path / "missing.mp4")
    with pytest.raises(keyer.InvalidArgumentError, match="unknown writer option"):
        s.add(clip, tmp_path / "x.mp4", bitrate=5)
    s.close()
    assert s.closed
    with pytest.raises(keyer.InvalidArgumentError, match="closed"):
        s.add(clip)


def test_session_cancel(data):
    clip = str(data / "sample_hevc.mp4")

    def stop_at_2(stream, index, frame, detections):
        if index == 2:
            s.cancel()  # from a stream's thread: the frames read so far are finished

    s = keyer.Session(device="cpu", effect="mask", format=None, on_frame=stop_at_2)
    s.add(clip)
    with pytest.raises(keyer.CancelledError):
        s.run()
    assert s.report()["frames_written"] >= 3
    s.close()
