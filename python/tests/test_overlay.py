"""keyer.Overlay and keyer.KnnGraph: the scene of the C renderer's golden test
(tests/unit/test_overlay_golden.c: boxes, lines, a polyline, curves, dots, points, connections,
text, labels and a kNN graph after two updates) drawn from Python on the same background equals
the C renderer's picture bit for bit, on RGBA and through the RGB and BGR layouts; NV12; faces
and poses from keyer.detect; errors."""
import numpy as np
import pytest

import keyer

RED, GREEN = (0.9, 0.1, 0.1, 1), (0.1, 0.85, 0.2, 1)
BLUE, YELLOW = (0.15, 0.3, 1, 0.35), (1, 0.85, 0.1, 0.9)
WHITE, BLACK, NONE = (1, 1, 1, 1), (0, 0, 0, 1), (0, 0, 0, 0)
MAGENTA, CYAN = (0.9, 0.2, 0.8, 0.6), (0.2, 0.9, 1, 0.85)
PLATE, ORANGE = (0, 0, 0, 0.6), (1, 0.55, 0.1, 1)


def knn_points(frame):
    """test_overlay_golden.c's kNN points: 12 ids on a loose grid, moved in the second frame."""
    ids, xy = [], []
    for i in range(12):
        x = 170 + 35 * (i % 4) + 9 * ((i * 7) % 3)
        y = 130 + 30 * (i // 4) + 7 * ((i * 5) % 4)
        if frame:
            x += (i % 3) * 4 - 4
            y += (i % 2) * 5
        ids.append(100 + 3 * i)
        xy.append((x, y))
    return ids, np.array(xy, np.float32)


def golden_scene(ov):
    """build_scene() of test_overlay_golden.c at 320x240 (scale 1)."""
    ov.clear()
    ov.box(20, 20, 140, 110, radius=10, width=3, color=RED, fill=BLUE)
    ov.box(150.5, 30.25, 230, 90, radius=0, width=2, color=GREEN, fill=NONE)
    ov.box(270, -20, 340, 60, radius=20, width=4, color=YELLOW, fill=(1, 1, 1, 0.2))
    ov.box(30, 150, 90, 210, radius=30, width=0, color=NONE, fill=MAGENTA)
    ov.line(5.5, 230.5, 315, 120.25, width=1, color=WHITE)
    ov.line(10, 125, 150, 140, width=2.5, color=CYAN)
    ov.line(100, 160, 135, 225, width=6, color=ORANGE)
    ov.line(-10, 200, 20, 250, width=3, color=GREEN)
    ov.polyline([(150 + 16 * i, 96 if i % 2 else 112) for i in range(6)], width=2, color=WHITE)
    ov.curve(20, 130, 140, 130, bend=0.25, width=2, color=YELLOW)
    ov.curve(240, 20, 300, 100, bend=-0.3, width=1.5, color=MAGENTA)
    ov.dot(250.5, 110.5, radius=5, color=RED)
    ov.dot(262, 112, radius=1.2, color=WHITE)
    pts = [(40, 60), (60, 62), (np.nan, 70), (80, 58), (100, 66)]
    ov.points(pts, radius=3, color=GREEN)
    ov.connections(pts, [(0, 1), (1, 3), (3, 4), (1, 2), (0, 4)], width=1.5, color=WHITE)
    ov.label(24.5, 24.25, "id 7", scale=2, color=WHITE, background=PLATE)
    ov.text(152.3, 40.6, "keyer 0.5\nAa{|}~\x7f", scale=1.25, color=WHITE)
    ov.text(8, 4, "Overlay golden", scale=1, color=WHITE)
    ov.label(200, 212, "kNN k=3", scale=1.5, color=BLACK, background=(1, 1, 1, 0.8))
    g = keyer.KnnGraph(3, max_points=12)
    for frame in range(2):
        ids, xy = knn_points(frame)
        edges = g.update(ids, xy)
    assert edges
    index = [((a - 100) // 3, (b - 100) // 3) for a, b in edges]
    ov.graph(xy, index, width=1.5, color=CYAN, bend=0.15)
    ov.points(xy, radius=2.5, color=CYAN)


def background(w, h):
    """test_overlay_golden.c's background: 16-pixel slate checks, a dark band on the left."""
    y, x = np.mgrid[0:h, 0:w]
    light = ((x // 16) ^ (y // 16)) & 1
    f = np.empty((h, w, 4), np.uint8)
    f[..., 0] = np.where(light, 92, 64)
    f[..., 1] = np.where(light, 104, 72)
    f[..., 2] = np.where(light, 120, 88)
    f[:, :8, :3] = 24
    f[..., 3] = 255
    return f


def test_scene_equals_c_renderer(data):
    golden = keyer.read_image(data / "golden" / "overlay_scene_320x240.png", "rgba")
    with keyer.Overlay(1024, format="rgba") as ov:
        golden_scene(ov)
        assert len(ov) > 100
        frame = background(320, 240)
        assert ov.render(frame) is frame
    assert np.array_equal(frame, golden)
    # RGB and BGR frames: the colour channels come out as on the RGBA frame
    with keyer.Overlay(1024) as ov:
        golden_scene(ov)
        rgb = np.ascontiguousarray(background(320, 240)[..., :3])
        ov.render(rgb)
        assert np.array_equal(rgb, golden[..., :3])
        bgr = np.ascontiguousarray(background(320, 240)[..., 2::-1])
        ov.render(bgr, format="bgr")
        assert np.array_equal(bgr[..., ::-1], golden[..., :3])
        bgra = np.ascontiguousarray(background(320, 240)[..., [2, 1, 0, 3]])
        ov.render(bgra, format="bgra")
        assert np.array_equal(bgra[..., [2, 1, 0, 3]], golden)
        # a frame's rows may be padded (a crop)
        wide = np.zeros((240, 400, 4), np.uint8)
        wide[:, :320] = background(320, 240)
        ov.render(wide[:, :320], format="rgba")
        assert np.array_equal(wide[:, :320], golden) and not wide[:, 320:].any()


def test_nv12_and_drawing_helpers(data):
    rgb = keyer.read_image(data / "grace_hopper.jpg")
    h, w = rgb.shape[:2]
    y = np.full((h, w), 100, np.uint8)
    uv = np.full((h // 2, w // 2, 2), 128, np.uint8)
    with keyer.Overlay() as ov:
        ov.box(10, 10, 100, 80, width=4, color="#ff0000")
        ov.render((y, uv), format="nv12")
        # a red stroke on grey: darker luma, V above neutral, nothing outside the box
        assert y[10:80, 10:100].min() < 100 and uv[5:40, 5:50, 1].max() > 128
        assert (y[90:] == 100).all() and (uv[50:] == 128).all()
        stacked = np.concatenate([np.full((h, w), 100, np.uint8),
                                  np.full((h // 2, w), 128, np.uint8)])
        ov.render(stacked, format="nv12")
        assert np.array_equal(stacked[:h], y)
        # faces and a pose from keyer.detect, drawn as the C helpers draw them
        d = keyer.detect(rgb, ("faces", "pose"), mesh=True)
        ov.clear()
        n0 = len(ov)
        ov.faces(d.faces, keypoints=True)
        after_faces = len(ov)
        ov.pose(d.pose)
        assert n0 == 0 and after_faces > 0 and len(ov) > after_faces
        out = ov.render(rgb.copy())
        assert (out != rgb).any()
        ov.pose(None)  # no person: nothing
    w_, h_ = keyer.Overlay.text_size("ab\ncd", 2)
    assert (w_, h_) == ((6 * 2 - 1) * 2, (9 * 2 - 2) * 2)


def test_errors():
    ov = keyer.Overlay(8)
    with pytest.raises(keyer.InvalidArgumentError, match="colour"):
        ov.box(0, 0, 10, 10, color=(2, 0, 0))
    with pytest.raises(keyer.InvalidArgumentError, match="colour"):
        ov.line(0, 0, 10, 10, color="red")
    with pytest.raises(keyer.InvalidArgumentError):
        ov.box(0, 0, 10, 10, width=float("nan"))
    with pytest.raises(keyer.InvalidArgumentError, match=r"\(n, 2\)"):
        ov.polyline(np.zeros((4, 3)))
    with pytest.raises(keyer.InvalidArgumentError, match="edge 0"):
        ov.graph([(0, 0), (1, 1)], [(0, 5)])
    with pytest.raises(keyer.OutOfMemoryError):
        for _ in range(9):
            ov.dot(1, 1)
    assert len(ov) == 8
    with pytest.raises(keyer.InvalidArgumentError, match="format rgb takes"):
        ov.render(np.zeros((8, 8, 4), np.uint8))
    with pytest.raises(keyer.InvalidArgumentError, match="writable"):
        ro = np.zeros((8, 8, 3), np.uint8)
        ro.flags.writeable = False
        ov.render(ro)
    g = keyer.KnnGraph(3)
    with pytest.raises(keyer.InvalidArgumentError, match="ids"):
        g.update([1, 2], [(0, 0)])
    ov.close()
    with pytest.raises(keyer.InvalidArgumentError, match="closed"):
        ov.dot(1, 1)
