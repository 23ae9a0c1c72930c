"""keyer.detect and keyer.Detector: detections equal the main job's export (`keyer INPUT -o
OUTPUT --detect faces,pose --export FILE`) on the test photos, with and without the face mesh;
NumPy conversions; tracking ids; layouts; errors."""
import json
import subprocess

import numpy as np
import pytest

import keyer

# the test photos and what finds their faces (messi5's are small: the full-range detector)
PHOTOS = [("grace_hopper", "faces,pose"), ("messi5", "faces:full,pose")]


def export_of(keyer_bin, picture, tmp_path, what, mesh):
    """The export line of `keyer PICTURE --detect WHAT` (the face mesh with --draw mesh)."""
    out = tmp_path / "out.mp4"
    exp = tmp_path / "faces.jsonl"
    args = [keyer_bin, str(picture), "-o", str(out), "-y", "--detect", what,
            "--export", str(exp)]
    if mesh:
        args += ["--draw", "mesh"]
    subprocess.run(args, check=True, capture_output=True)
    lines = exp.read_text().splitlines()
    assert len(lines) == 1
    return json.loads(lines[0])


def rounded(d):
    """A Detections.to_dict() with the export's rounding (printf %.2f, %.4f)."""
    def r2(v):
        return float("%.2f" % v)

    def r4(v):
        return float("%.4f" % v)

    out = {"stream": d["stream"], "frame": d["frame"], "width": d["width"],
           "height": d["height"], "faces": []}
    for f in d["faces"]:
        g = {"id": f["id"], "score": r4(f["score"]), "detected": f["detected"],
             "box": [r2(v) for v in f["box"]],
             "keypoints": [[r2(x), r2(y)] for x, y in f["keypoints"]]}
        if "landmarks" in f:
            g["presence"] = r4(f["presence"])
            g["landmarks"] = [[r2(v) for v in p] for p in f["landmarks"]]
        out["faces"].append(g)
    p = d["pose"]
    out["pose"] = None if p is None else {
        "presence": r4(p["presence"]),
        "landmarks": [[r2(x), r2(y), r2(z), r4(v)] for x, y, z, v in p["landmarks"]]}
    return out


@pytest.mark.parametrize("photo,what", PHOTOS)
@pytest.mark.parametrize("mesh", [False, True])
def test_detect_equals_export(keyer_bin, data, tmp_path, photo, what, mesh):
    # an RGBA picture, so that the command and keyer.detect see the same pixels (the
    # command's decoder hands a JPEG over as YUV, and draws on the frames it analyses: RGBA
    # frames it can draw on)
    frame = keyer.read_image(data / (photo + ".jpg"), "rgba")
    png = tmp_path / (photo + ".png")
    keyer.write_image(png, frame, "rgba")
    ref = export_of(keyer_bin, png, tmp_path, what, mesh)
    d = keyer.detect(frame, what, format="rgba", mesh=mesh)
    assert len(d.faces) >= 1 and d.pose is not None
    assert (d.width, d.height) == (frame.shape[1], frame.shape[0])
    for key in ("input", "time"):
        ref.pop(key)
    assert rounded(d.to_dict()) == ref
    if mesh:
        assert all(f.landmarks.shape == (468, 3) for f in d.faces)


def test_numpy_conversions(data):
    frame = keyer.read_image(data / "messi5.jpg")
    d = keyer.detect(frame, "faces:full,pose")
    boxes = d.faces.numpy()
    assert boxes.dtype == np.float32 and boxes.shape == (len(d.faces), 5)
    assert np.array_equal(np.asarray(d.faces), boxes)
    f = d.faces[0]
    assert np.array_equal(np.asarray(f), boxes[0])
    assert np.allclose(boxes[0], list(f.box) + [f.score])
    assert f.keypoints.shape == (6, 2) and f.keypoints.dtype == np.float32
    assert f.landmarks is None and f.presence is None
    x0, y0, x1, y1 = f.box
    assert 0 <= x0 < x1 <= frame.shape[1] and 0 <= y0 < y1 <= frame.shape[0]
    assert f.center == ((x0 + x1) / 2, (y0 + y1) / 2)
    assert d.faces.ids.dtype == np.int64
    p = d.pose
    assert np.asarray(p).shape == (33, 5) and p.world.shape == (33, 3)
    assert np.array_equal(p.keypoints, p.landmarks[:, :2])
    assert len(keyer.POSE_CONNECTIONS) == 35
    assert all(0 <= a < 33 and 0 <= b < 33 for a, b in keyer.POSE_CONNECTIONS)
    assert len(keyer.FACE_MESH_CONTOURS) > 0
    # only what was asked for
    faces_only = keyer.detect(frame, "faces:full")
    assert faces_only.pose is None and not faces_only.pose_analysed
    assert "pose" not in faces_only.to_dict()
    pose_only = keyer.detect(frame, ["pose"])
    assert pose_only.faces is None and pose_only.pose is not None


def test_tracking_ids_and_layouts(data):
    rgb = keyer.read_image(data / "grace_hopper.jpg")
    with keyer.Detector("faces") as det:
        ids = [det.detect(rgb).faces[0].id for _ in range(4)]
        # a face gets its id once the tracker has seen it in 3 frames, then keeps it
        assert ids[:2] == [0, 0] and ids[2] > 0 and ids[3] == ids[2]
        assert det.detect(rgb).index == 4
        det.reset()
        d = det.detect(rgb)
        assert d.index == 0 and d.faces[0].id == 0
    ref = keyer.detect(rgb, "faces")
    bgr = np.ascontiguousarray(rgb[..., ::-1])
    assert keyer.detect(bgr, "faces", format="bgr").to_dict() == ref.to_dict()
    rgba = np.dstack([rgb, np.full(rgb.shape[:2], 255, np.uint8)])
    assert keyer.detect(rgba, "faces", format="rgba").to_dict() == ref.to_dict()


def test_errors(data):
    frame = keyer.read_image(data / "grace_hopper.jpg")
    with pytest.raises(keyer.InvalidArgumentError, match="unknown 'hands'"):
        keyer.Detector("faces,hands")
    with pytest.raises(keyer.InvalidArgumentError, match="faces and/or pose"):
        keyer.Detector(())
    with pytest.raises(keyer.InvalidArgumentError, match="max_faces"):
        keyer.Detector(max_faces=0)
    with pytest.raises(keyer.InvalidArgumentError, match="unknown backend"):
        keyer.Detector(device="tpu")
    det = keyer.Detector()
    with pytest.raises(keyer.InvalidArgumentError, match="elements must be uint8"):
        det.detect(frame.astype(np.float32))
    with pytest.raises(keyer.InvalidArgumentError, match="format rgba takes"):
        det.detect(frame, format="rgba")
    det.close()
    assert det.closed
    with pytest.raises(keyer.InvalidArgumentError, match="closed"):
        det.detect(frame)
