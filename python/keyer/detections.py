"""Detections as small Python objects: faces (boxes, scores, keypoints, optional face mesh,
track ids) and the body pose (33 landmarks, world coordinates), each convertible to NumPy
arrays. Made by :class:`keyer.Detector`, :func:`keyer.detect` and the per-frame callbacks
of :class:`keyer.Session`. Coordinates are frame pixels (continuous: pixel ``i`` covers
``[i, i + 1)``)."""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Tuple

import numpy as np

from . import _keyer

__all__ = ["Face", "Faces", "Pose", "Detections", "POSE_CONNECTIONS", "FACE_MESH_CONTOURS"]

#: The 35 BlazePose skeleton connections (landmark index pairs), as keyer draws them.
POSE_CONNECTIONS: Tuple[Tuple[int, int], ...] = _keyer.connections("pose")
#: The face-mesh contours MediaPipe draws (lips, eyes, eyebrows, face oval) as landmark pairs.
FACE_MESH_CONTOURS: Tuple[Tuple[int, int], ...] = _keyer.connections("face_mesh")


class Face:
    """One face in a frame.

    * ``id``: the tracker's id, stable while the face is followed; 0 until the tracker has
      confirmed it (3 frames), so a single picture gives 0.
    * ``score``: the detection's probability (with the face mesh: its presence).
    * ``detected``: True when the detector found it in this frame (else it was tracked).
    * ``box``: ``(x0, y0, x1, y1)``.
    * ``keypoints``: ``(6, 2)`` float32: right eye, left eye, nose tip, mouth centre, right and
      left ear (with the mesh: taken from its landmarks).
    * ``landmarks``: ``(468, 3)`` float32 face mesh (x, y, depth) or None without the mesh;
      ``presence`` its probability or None.

    ``numpy()`` (and ``numpy.asarray(face)``) gives ``[x0, y0, x1, y1, score]`` as float32.
    """

    __slots__ = ("id", "score", "detected", "box", "keypoints", "presence", "landmarks")

    def __init__(self, id: int, score: float, detected: bool, box: Tuple[float, ...],
                 keypoints: np.ndarray, presence: Optional[float] = None,
                 landmarks: Optional[np.ndarray] = None) -> None:
        self.id = int(id)
        self.score = float(score)
        self.detected = bool(detected)
        self.box = tuple(float(v) for v in box)
        self.keypoints = keypoints
        self.presence = presence
        self.landmarks = landmarks

    def numpy(self) -> np.ndarray:
        return np.array(self.box + (self.score,), np.float32)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    @property
    def center(self) -> Tuple[float, float]:
        x0, y0, x1, y1 = self.box
        return ((x0 + x1) / 2, (y0 + y1) / 2)

    def to_dict(self) -> Dict[str, Any]:
        """The face as ``keyer ... --export`` writes it (unrounded)."""
        d: Dict[str, Any] = {"id": self.id, "score": self.score, "detected": int(self.detected),
                             "box": list(self.box), "keypoints": self.keypoints.tolist()}
        if self.landmarks is not None:
            d["presence"] = self.presence
            d["landmarks"] = self.landmarks.tolist()
        return d

    def __repr__(self) -> str:
        return "Face(id=%d, score=%.3f, box=(%.1f, %.1f, %.1f, %.1f)%s)" % (
            (self.id, self.score) + self.box + (", mesh" if self.landmarks is not None else "",))


class Faces(list):
    """The faces of a frame (a list of :class:`Face`, tracked faces first, then new ones best
    first). ``numpy()`` gives an ``(n, 5)`` float32 array of ``[x0, y0, x1, y1, score]``;
    ``ids`` an int64 array of the track ids."""

    def numpy(self) -> np.ndarray:
        if not self:
            return np.zeros((0, 5), np.float32)
        return np.stack([f.numpy() for f in self])

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    @property
    def ids(self) -> np.ndarray:
        return np.array([f.id for f in self], np.int64)


class Pose:
    """The body pose of a frame (BlazePose).

    * ``presence``: the pose's probability.
    * ``landmarks``: ``(33, 5)`` float32: x, y, z (depth relative to the hips, in pixels at
      the scale of x), visibility and presence of each landmark, in MediaPipe's order
      (0 nose, 11/12 shoulders, 23/24 hips, ...); :data:`POSE_CONNECTIONS` joins them.
    * ``world``: ``(33, 3)`` float32, metres, origin between the hips.

    ``numpy()`` (and ``numpy.asarray(pose)``) gives ``landmarks``; ``keypoints`` its x, y.
    """

    __slots__ = ("presence", "landmarks", "world")

    def __init__(self, presence: float, landmarks: np.ndarray, world: np.ndarray) -> None:
        self.presence = float(presence)
        self.landmarks = landmarks
        self.world = world

    def numpy(self) -> np.ndarray:
        return self.landmarks

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.landmarks if dtype is None else self.landmarks.astype(dtype)

    @property
    def keypoints(self) -> np.ndarray:
        return self.landmarks[:, :2]

    @property
    def visibility(self) -> np.ndarray:
        return self.landmarks[:, 3]

    def to_dict(self) -> Dict[str, Any]:
        """The pose as ``keyer ... --export`` writes it: landmarks as x, y, z, visibility."""
        return {"presence": self.presence, "landmarks": self.landmarks[:, :4].tolist()}

    def __repr__(self) -> str:
        return "Pose(presence=%.3f)" % self.presence


class Detections:
    """What was found in one frame.

    * ``stream``, ``index``: which stream and which of its frames (0, 1, ...).
    * ``width``, ``height``: the frame's size; ``time``: its time in seconds, or None.
    * ``faces``: :class:`Faces`, or None when faces were not asked for.
    * ``pose``: :class:`Pose`, or None (not asked for, or no person found: see
      ``pose_analysed``).
    """

    __slots__ = ("stream", "index", "width", "height", "time", "faces", "pose", "pose_analysed")

    def __init__(self, stream: int = 0, index: int = 0, width: int = 0, height: int = 0,
                 time: Optional[float] = None, faces: Optional[Iterable[Face]] = None,
                 pose: Optional[Pose] = None, pose_analysed: bool = False) -> None:
        self.stream = stream
        self.index = index
        self.width = width
        self.height = height
        self.time = time
        self.faces = None if faces is None else Faces(faces)
        self.pose = pose
        self.pose_analysed = pose_analysed or pose is not None

    @classmethod
    def _from_raw(cls, raw: Dict[str, Any]) -> "Detections":
        faces = raw.get("faces")
        if faces is not None:
            faces = [Face(*f) for f in faces]
        pose = raw.get("pose")
        return cls(raw["stream"], raw["index"], raw["width"], raw["height"], raw.get("time"),
                   faces, None if pose is None else Pose(*pose), "pose" in raw)

    def to_dict(self) -> Dict[str, Any]:
        """The frame as one line of ``keyer ... --export`` (unrounded; without "input")."""
        d: Dict[str, Any] = {"stream": self.stream, "frame": self.index}
        if self.time is not None:
            d["time"] = self.time
        d["width"] = self.width
        d["height"] = self.height
        if self.faces is not None:
            d["faces"] = [f.to_dict() for f in self.faces]
        if self.pose_analysed:
            d["pose"] = None if self.pose is None else self.pose.to_dict()
        return d

    def __repr__(self) -> str:
        parts: List[str] = []
        if self.faces is not None:
            parts.append("%d face%s" % (len(self.faces), "" if len(self.faces) == 1 else "s"))
        if self.pose_analysed:
            parts.append("a pose" if self.pose is not None else "no pose")
        return "Detections(stream %d, frame %d: %s)" % (self.stream, self.index,
                                                        ", ".join(parts) or "nothing asked")
