"""keyer: AI video effects (person segmentation, background blur and replacement) from Python.

The package wraps keyer's C library (a C extension written against its public headers):

* :class:`Keyer` keys frames one by one: NumPy arrays from OpenCV (BGR), PIL or NumPy (RGB,
  RGBA) or NV12 planes in, the composited frame and/or the matte out as NumPy arrays.
* :func:`run` runs keyer's main job (the ``keyer INPUT -o OUTPUT`` command) on video files,
  with the command line's options, a progress callback and the statistics as a dict.
* :class:`Detector` and :func:`detect` find faces (boxes, keypoints, face mesh, track ids)
  and the body pose in frames, as :class:`Detections` objects convertible to NumPy arrays.
* :class:`Overlay` draws boxes, lines, curves, graphs (:class:`KnnGraph`), text, faces and
  skeletons on frames, with keyer's renderer.
* :func:`models` lists the shipped models; :func:`options` the option tables.

Errors raise :class:`Error` subclasses, one per keyer status, carrying keyer's message. The
GIL is released while keyer works. Objects free their C memory on :meth:`Keyer.close` or at
the end of a ``with`` block.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from . import _keyer
from .detections import (FACE_MESH_CONTOURS, POSE_CONNECTIONS, Detections, Face, Faces,
                         Pose)
from ._keyer import KnnGraph, Overlay
from ._keyer import (
    AgainError,
    BadDataError,
    CancelledError,
    DeviceError,
    EndError,
    Error,
    InputOutputError,
    InternalError,
    InvalidArgumentError,
    OutOfMemoryError,
    UnsupportedError,
)

__all__ = [
    "Keyer", "Detector", "detect", "Detections", "Face", "Faces", "Pose", "POSE_CONNECTIONS",
    "FACE_MESH_CONTOURS", "Overlay", "KnnGraph", "run", "models", "options", "version", "built_with_cuda", "read_image",
    "write_image",
    "Error", "InvalidArgumentError", "OutOfMemoryError", "InputOutputError", "BadDataError",
    "UnsupportedError", "DeviceError", "CancelledError", "InternalError", "AgainError",
    "EndError",
]

PathLike = Union[str, "os.PathLike[str]"]
Frame = Any  # a NumPy array, or an NV12 (y, uv) pair of arrays

_TABLES = ("session", "refine", "composite", "prepare")
_table_cache: Dict[str, Dict[str, tuple]] = {}


def options(table: str) -> List[Dict[str, Any]]:
    """The option table ``table`` ("refine", "composite", "session" or "prepare") as a list of
    dicts: name, type, default, min, max, choices, help. These are the library's tables, the
    same the command line and the configuration file read."""
    return [dict(zip(("name", "type", "default", "min", "max", "choices", "help"), row))
            for row in _keyer.options(table)]


def _table(name: str) -> Dict[str, tuple]:
    t = _table_cache.get(name)
    if t is None:
        t = {row[0]: row for row in _keyer.options(name)}
        _table_cache[name] = t
    return t


def _text(value: Any, kind: str) -> Optional[str]:
    """A Python value as the text an option of type ``kind`` parses."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    if kind == "color":
        if isinstance(value, (tuple, list)) and len(value) == 3:
            r, g, b = (int(v) for v in value)
            return "#%02x%02x%02x" % (r, g, b)
        if isinstance(value, int):
            return "#%06x" % value
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # NumPy scalars
        return _text(value.item(), kind)
    return str(value)


def _name(key: str) -> str:
    return key.replace("-", "_")


def _split(opts: Dict[str, Any], tables: Sequence[str], what: str) -> Dict[str, Dict[str, str]]:
    """Sorts keyword options into the first table (in ``tables`` order) that has each name,
    as option text. Unknown names raise InvalidArgumentError."""
    out: Dict[str, Dict[str, str]] = {t: {} for t in tables}
    for key, value in opts.items():
        name = _name(key)
        for t in tables:
            row = _table(t).get(name)
            if row is not None:
                out[t][name] = _text(value, row[1])
                break
        else:
            raise InvalidArgumentError("unknown option '%s' (not a %s option; see "
                                       "keyer.options())" % (key, what))
    return out


def _device_backend(device: str) -> str:
    d = device.split(":")[0]
    if d == "auto":
        return "cpu"
    return d


class Keyer(_keyer.Keyer):
    """The keying chain for frames one by one: model input preparation, the segmentation
    network, matte refinement (with temporal smoothing across the frames given) and
    compositing, as ``keyer INPUT -o OUTPUT`` does to each frame of a video.

    ``Keyer(model=None, device="cpu", precision="f32", effect=None, *, background=None,
    format="rgb", threads=0, **options)``

    * ``model``: a registry name (see :func:`models`; default "selfie") or a .tflite path.
    * ``device``: "cpu" (XNNPACK backend) or "reference" (the plain-C oracle); "auto" is
      "cpu". The per-frame path takes host arrays.
    * ``precision``: "f32" (the CPU backends take nothing else).
    * ``effect``: the compositing mode: "blur" (default), "color", "image" (default when
      ``background`` is given), "green", "alpha", "premultiplied" or "mask".
    * ``background``: for "image": a picture path or an array in ``format``.
    * ``format``: how frames are laid out unless a call says otherwise: "rgb", "bgr"
      (OpenCV), "rgba", "bgra" or "nv12" (a (y, uv) pair, or one (h * 3 / 2, w) array).
    * ``threads``: CPU threads of every step (0: one per core).
    * ``options``: any field of the refinement or compositing option tables
      (:func:`options`), e.g. ``feather=2, blur_radius=16, color="#3060c0", temporal="off"``.

    Use it as a context manager (or call :meth:`close`) to free the C objects at once. One
    thread at a time per Keyer.
    """

    def __init__(self, model: Optional[str] = None, device: str = "cpu",
                 precision: str = "f32", effect: Optional[str] = None, *,
                 background: Union[PathLike, Frame, None] = None, format: str = "rgb",
                 threads: int = 0, **options: Any) -> None:
        opts = dict(options)
        if effect is None and "mode" not in opts:
            effect = "image" if background is not None else "blur"
        if effect is not None:
            opts["mode"] = effect
        split = _split(opts, ("refine", "composite"), "refine or composite")
        merged = dict(split["refine"])
        merged.update(split["composite"])
        if isinstance(model, os.PathLike):
            model = os.fspath(model)
        super().__init__(model, _device_backend(device), precision, int(threads), merged,
                         format, background)

    # process(), matte(), set_background(), reset(), close() and the context manager are the
    # extension's; their signatures, for readers and type checkers:
    if False:  # pragma: no cover
        def process(self, frame: Frame, out: Any = None, *, matte: Any = None,
                    format: Optional[str] = None) -> Any:
            """Keys ``frame``. Returns the composited frame (a new array, or ``out`` filled),
            or ``(frame, matte)`` when ``matte`` is True or a (h, w) uint8 array to fill.
            The output has the input's layout (NV12: planes like the input's), RGBA/BGRA for
            the alpha effects, (h, w) for "mask"."""

        def matte(self, frame: Frame, out: Any = None, *, format: Optional[str] = None) -> Any:
            """The refined matte of ``frame`` alone, (h, w) uint8 (255 = person)."""


class Detector(_keyer.Detector):
    """Face and body analysers for the frames of one stream, as the main job's ``--detect``
    runs them (``keyer INPUT -o OUTPUT --detect faces,pose``): the same models, settings and
    tracking, so the same frames give the same :class:`Detections`.

    ``Detector(what=("faces",), *, mesh=False, max_faces=16, device="cpu", threads=0,
    format="rgb")``

    * ``what``: "faces" (BlazeFace short range; "faces:full" for the full-range model) and/or
      "pose" (BlazePose lite; "pose:full", "pose:heavy"), as a sequence or "faces,pose".
    * ``mesh``: also the 468-point face mesh on each face (``Face.landmarks``), which then
      tracks the faces from frame to frame (the main job's ``--draw mesh``).
    * ``max_faces``: faces followed at most (1..64).
    * ``device``: where the networks run: "cpu" (default), "reference" or "cuda" (frames stay
      host arrays).
    * ``format``: the frames' layout unless a call says otherwise: "rgb", "bgr", "rgba",
      "bgra" or "nv12".

    Frames are a video: faces keep their ids from frame to frame (an id is given once a face
    was seen in 3 frames, 0 before); :meth:`reset` forgets them. One thread at a time per
    Detector; use it as a context manager (or :meth:`close`) to free its models at once.
    """

    def __init__(self, what: Union[str, Sequence[str]] = ("faces",), *, mesh: bool = False,
                 max_faces: int = 16, device: str = "cpu", threads: int = 0,
                 format: str = "rgb") -> None:
        super().__init__(what, bool(mesh), int(max_faces), _device_backend(device),
                         int(threads), format)
        self._index = 0

    def detect(self, frame: Frame, *, format: Optional[str] = None) -> Detections:
        """Analyses the next frame of the stream: its :class:`Detections` (``index`` counts
        the frames given so far)."""
        raw = self._detect(frame, format=format, index=self._index)
        self._index += 1
        return Detections._from_raw(raw)

    def reset(self) -> None:
        """Forgets the tracked faces and pose (a new clip, a seek); frame numbers restart."""
        super().reset()
        self._index = 0

    def __enter__(self) -> "Detector":
        if self.closed:
            raise InvalidArgumentError("Detector: closed")
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False


def detect(frame: Frame, what: Union[str, Sequence[str]] = ("faces", "pose"), *,
           format: str = "rgb", mesh: bool = False, max_faces: int = 16, device: str = "cpu",
           threads: int = 0) -> Detections:
    """Finds faces and/or the body pose in one picture (see :class:`Detector` for the
    arguments; for a video, keep a Detector so that faces keep their ids)::

        d = keyer.detect(keyer.read_image("group.jpg"), ("faces", "pose"))
        boxes = d.faces.numpy()          # (n, 5): x0, y0, x1, y1, score
        skeleton = d.pose.keypoints      # (33, 2), or d.pose is None
    """
    with Detector(what, mesh=mesh, max_faces=max_faces, device=device, threads=threads,
                  format=format) as d:
        return d.detect(frame)


def models() -> List[Dict[str, Any]]:
    """The shipped models: dicts with name, file, path, package, task, input_size,
    input_scale, input_offset, letterbox, has_mask, description and present (whether the
    file is in the models directory: scripts/setup.sh fetches them)."""
    return _keyer.models()


def read_image(path: PathLike, format: str = "rgb") -> Any:
    """Decodes a still image (anything FFmpeg reads: JPEG, PNG, ...) into a uint8 array:
    (h, w, 3) for "rgb"/"bgr", (h, w, 4) for "rgba"/"bgra", (h, w) for "gray"."""
    return _keyer.read_image(path, format)


def write_image(path: PathLike, image: Any, format: str = "rgb") -> None:
    """Writes a uint8 array ((h, w), (h, w, 3) or (h, w, 4); channels in ``format`` order)
    as a PNG file (written to a temporary name, then renamed)."""
    _keyer.write_image(path, image, format)


def version() -> str:
    """keyer's version."""
    return _keyer.version()


def built_with_cuda() -> bool:
    """Whether keyer was built with its CUDA backends (device="cuda", GPU tensors)."""
    return _keyer.built_with_cuda()


# ---- the main job -------------------------------------------------------------------------

# The command line's own options (tools/keyer/run_options.c) that are not table fields.
_WRITER = {"codec": "codec", "preset": "preset", "crf": "quality", "pix_fmt": "pixel_format",
           "format": "format", "codec_options": "codec_options"}


def _output_in_dir(directory: str, inp: str, alpha: bool) -> str:
    base = inp.rsplit("/", 1)[-1]
    dot = base.rfind(".")
    stem, ext = (base[:dot], base[dot:]) if dot > 0 else (base, ".mp4")
    if alpha:
        ext = ".mov"
    elif "://" in inp or inp == "-" or "%" in base or inp.startswith("/dev/"):
        ext = ".mp4"
    return os.path.join(directory, (stem if base else "stream") + ext)


def _settle_matte(refine: Dict[str, str], threshold: Any, softness: Any, smooth: Any) -> None:
    """--threshold, --softness and --smooth as the command line turns them into refinement
    fields (tools/keyer/run_options.c, settle_matte), in single precision like the C code."""
    import numpy as np
    f32 = np.float32
    defaults = _table("refine")

    def cur(name: str) -> Any:
        return refine.get(name, defaults[name][2])

    if threshold is not None or softness is not None:
        lo0, hi0 = f32(float(cur("threshold_low"))), f32(float(cur("threshold_high")))
        t = f32(threshold) if threshold is not None else f32(0.5) * (lo0 + hi0)
        w = f32(softness) if softness is not None else hi0 - lo0
        if w < f32(0.01):
            w = f32(0.01)
        lo, hi = t - f32(0.5) * w, t + f32(0.5) * w
        lo, hi = max(lo, f32(0)), min(hi, f32(1))
        if hi <= lo:
            raise InvalidArgumentError("threshold %.2f with softness %.2f leaves no edge"
                                       % (float(t), float(w)))
        refine["threshold"] = "1"
        refine["threshold_low"] = repr(float(lo))
        refine["threshold_high"] = repr(float(hi))
    if smooth is not None:
        refine["temporal_strength"] = repr(float(f32(smooth)))
        if float(smooth) == 0:
            refine["temporal"] = "off"
        elif cur("temporal") == "off":
            refine["temporal"] = "adaptive"


def run(inputs: Union[PathLike, Iterable[PathLike]], output: Optional[PathLike] = None, *,
        progress: Optional[Callable[[Dict[str, Any]], Any]] = None,
        progress_interval: float = 0.2, overwrite: bool = False,
        **options: Any) -> Dict[str, Any]:
    """Runs keyer's main job, as ``keyer INPUT... -o OUTPUT [options]``: reads each input,
    keys the person out and writes the output with the input's audio. Returns the statistics
    (frames, fps, device, model, per-stage latencies, per-stream counters) as a dict.

    ``output``: a file for one input, or a directory (several inputs, an existing directory
    or a path ending in "/"), where each output is named after its input. ``options`` are
    the command line's long options with '-' written '_': ``blur=16`` (or True),
    ``replace="beach.jpg"`` or a colour, ``green=True``, ``alpha=True``,
    ``premultiply=True``, ``mask=True``, ``model``, ``threshold``, ``softness``, ``smooth``,
    ``feather``, ``dilate``, ``device``, ``mode``, ``batch``, ``threads``, ``codec``,
    ``preset``, ``crf``, ``pix_fmt``, ``format``, ``codec_options``, ``no_audio``,
    ``live``, ``realtime``, ``stats`` (a JSON path), ``trace`` (a JSON path), and any field
    of the session, refinement or compositing tables (:func:`options`), also as
    ``refine={...}`` and ``composite={...}``.

    ``progress(p)`` is called about every ``progress_interval`` seconds (at least 0.01) with a dict
    (frames_done, frames_total, frames_read, elapsed, fps, remaining); returning False stops
    the job, as does an exception it raises (re-raised here) or Ctrl-C; the outputs then
    hold every frame read so far. Existing outputs are refused unless ``overwrite``.
    """
    if isinstance(inputs, (str, bytes, os.PathLike)):
        inputs = [inputs]
    ins = [os.fsdecode(os.fspath(i)) for i in inputs]
    out = None if output is None else os.fsdecode(os.fspath(output))
    session: Dict[str, str] = {}
    refine: Dict[str, str] = {}
    composite: Dict[str, str] = {}
    writer: Dict[str, Any] = {}
    model = background = stats = trace = None
    copy_streams = True
    threshold = softness = smooth = None
    rest: Dict[str, Any] = {}
    for key, value in options.items():
        name = _name(key)
        if name == "blur":
            if value is False:
                continue
            composite["mode"] = "blur"
            if value is not True and value is not None:
                composite["blur_radius"] = _text(value, "float")
        elif name == "replace":
            v = os.fsdecode(os.fspath(value)) if isinstance(value, os.PathLike) else value
            if isinstance(v, str) and os.path.exists(v):
                composite["mode"], background = "image", v
            else:
                composite["mode"], composite["color"] = "color", _text(v, "color")
                background = None
        elif name == "green":
            if value is False:
                continue
            composite["mode"] = "green"
            if value is not True and value is not None:
                composite["key_color"] = _text(value, "color")
        elif name in ("alpha", "premultiply", "mask"):
            if not value:
                continue
            if name == "mask":
                composite["mode"] = "mask"
            elif name == "premultiply" or composite.get("mode") == "premultiplied":
                composite["mode"] = "premultiplied"
            else:
                composite["mode"] = "alpha"
        elif name == "model":
            model = None if value is None else os.fsdecode(os.fspath(value))
        elif name == "threshold":
            threshold = value
        elif name == "softness":
            softness = value
        elif name == "smooth":
            smooth = value
        elif name in _WRITER:
            writer[_WRITER[name]] = value if name == "crf" else _text(value, "string")
        elif name == "no_audio":
            copy_streams = not value
        elif name == "live":
            session["live"] = "1" if value else "-1"
        elif name == "stats":
            stats = os.fsdecode(os.fspath(value))
        elif name == "trace":
            trace = os.fsdecode(os.fspath(value))
        elif name in ("refine", "composite"):
            split = _split(dict(value), (name,), name)
            (refine if name == "refine" else composite).update(split[name])
        elif name in ("detect", "draw", "export", "config"):
            raise UnsupportedError("option %s: not available in keyer.run yet; use the keyer "
                                   "command" % key)
        else:
            rest[name] = value
    split = _split(rest, ("session", "refine", "composite"), "run, session, refine or composite")
    session.update(split["session"])
    refine.update(split["refine"])
    composite.update(split["composite"])
    _settle_matte(refine, threshold, softness, smooth)
    if out is None and stats is None:
        raise InvalidArgumentError("no output given (output=PATH)")

    outs: List[Optional[str]] = []
    if out is not None:
        dir_out = len(ins) > 1 or os.path.isdir(out) or out.endswith("/")
        if dir_out:
            os.makedirs(out, exist_ok=True)
        alpha = composite.get("mode") in ("alpha", "premultiplied")
        for i, inp in enumerate(ins):
            o = _output_in_dir(out, inp, alpha) if dir_out else out
            if o in outs:
                raise InvalidArgumentError("inputs %s and %s would both write %s"
                                           % (ins[outs.index(o)], inp, o))
            if o == inp:
                raise InvalidArgumentError("%s: the output would overwrite its input" % o)
            if o != "-" and "%" not in o and os.path.exists(o) and not overwrite:
                raise InputOutputError("%s exists (pass overwrite=True)" % o)
            outs.append(o)
    else:
        outs = [None] * len(ins)
    return _keyer.run(ins, outs, session, refine, composite, model, background, writer,
                      copy_streams, progress, max(10, int(progress_interval * 1000)), stats, trace)
