"""keyer: AI video effects (person segmentation, background blur and replacement) from Python.

The package wraps keyer's C library (a C extension written against its public headers):

* :class:`Keyer` keys frames one by one: NumPy arrays from OpenCV (BGR), PIL or NumPy (RGB,
  RGBA) or NV12 planes in, the composited frame and/or the matte out as NumPy arrays.
* :func:`run` runs keyer's main job (the ``keyer INPUT -o OUTPUT`` command) on video files,
  with the command line's options, a progress callback and the statistics as a dict.
* :class:`Session` runs several streams through one pipeline with a per-frame callback
  (frames and detections, in order per stream).
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
from ._keyer import CudaArray, KnnGraph, Overlay
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
    "FACE_MESH_CONTOURS", "Overlay", "KnnGraph", "CudaArray", "run", "Session", "models",
    "options", "version", "built_with_cuda", "read_image", "write_image",
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


def _stream_handle(stream: Any) -> int:
    """A CUDA stream as its cudaStream_t number: an int, a torch.cuda.Stream (cuda_stream), a
    cupy.cuda.Stream (ptr); None: 0 (the Keyer makes its own)."""
    if stream is None:
        return 0
    for attr in ("cuda_stream", "ptr"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    return int(stream)


def _device_backend(device: str) -> str:
    d = device.split(":")[0]
    if d == "auto":
        return "cpu"
    return d


class Keyer(_keyer.Keyer):
    """The keying chain for frames one by one: model input preparation, the segmentation
    network, matte refinement (with temporal smoothing across the frames given) and
    compositing, as ``keyer INPUT -o OUTPUT`` does to each frame of a video.

    ``Keyer(model=None, device="cpu", precision="auto", effect=None, *, background=None,
    format="rgb", threads=0, stream=None, **options)``

    * ``model``: a registry name (see :func:`models`; default "selfie") or a .tflite path.
    * ``device``: where the network runs: "cpu" (XNNPACK), "reference" (the plain-C oracle) or
      "cuda" / "cuda:N"; "auto" is "cpu". Frames may be NumPy arrays (host) or GPU tensors
      (anything with ``__dlpack__`` or ``__cuda_array_interface__``: PyTorch, CuPy, ...) on
      any device kind; the result comes back where the frame was (GPU: a
      :class:`CudaArray`, taken by ``torch.from_dlpack`` or ``cupy.asarray`` without a copy).
    * ``stream``: the CUDA stream GPU work is queued on (an int, ``torch.cuda.Stream``,
      ``cupy.cuda.Stream``); None: the Keyer's own, ordered with the frames' producers and
      the results' consumers through the array protocols.
    * ``precision``: "auto" (default: f16 on CUDA for the models that meet keyer's half-precision
      bounds, f32 otherwise), "f32", or "f16" on CUDA.
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
                 precision: str = "auto", effect: Optional[str] = None, *,
                 background: Union[PathLike, Frame, None] = None, format: str = "rgb",
                 threads: int = 0, stream: Any = None, **options: Any) -> None:
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
        kind, _, ordinal = str(device).partition(":")
        if ordinal and not ordinal.isdigit():
            raise InvalidArgumentError("device '%s': cuda:N takes a device number" % device)
        super().__init__(model, _device_backend(kind), precision, int(threads), merged,
                         format, background, int(ordinal or 0), _stream_handle(stream))

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


# The words of the command line's --detect and --draw (tools/keyer/analytics.c).
_DETECT_WORDS = ("faces", "faces:short", "faces:full", "pose", "pose:lite", "pose:full",
                 "pose:heavy")
_DRAW_WORDS = ("boxes", "ids", "keypoints", "mesh", "skeleton", "all", "none")
# Options of the command line that only change what it prints.
_DISPLAY_ONLY = ("progress", "no_progress", "quiet", "verbose")
_SWITCHES = ("alpha", "premultiply", "mask", "no_audio", "live", "realtime", "yes", "no")


def _words(value: Any, what: str) -> str:
    """A list option (--detect, --draw) as the command line's comma-separated text."""
    if isinstance(value, str):
        return value
    try:
        return ",".join(str(v) for v in value)
    except TypeError:
        raise InvalidArgumentError("%s: a str or a sequence of str" % what) from None


def _check_words(text: str, allowed: Sequence[str], what: str, graph: bool = False) -> None:
    for w in filter(None, text.split(",")):
        if w in allowed:
            continue
        if graph and (w == "graph" or w.startswith("graph:")):
            k = w[6:][2:] if w.startswith("graph:k=") else w[6:]
            if w == "graph" or (k.isdigit() and 1 <= int(k) <= 16):
                continue
            raise InvalidArgumentError("%s: graph:k=K takes K in 1..16, not '%s'" % (what, w))
        raise InvalidArgumentError("%s: unknown '%s' (%s%s)" % (
            what, w, ", ".join(a for a in allowed if ":" not in a or what == "detect"),
            ", graph[:k=K]" if graph else ""))


def _bool_text(key: str, text: str) -> bool:
    t = text.strip().lower()
    if t in ("1", "true", "yes", "on"):
        return True
    if t in ("0", "false", "no", "off"):
        return False
    raise InvalidArgumentError("%s: '%s' is not a boolean (1/0, true/false, yes/no, on/off)"
                               % (key, text))


def _config_options(path: PathLike) -> Tuple[List[str], Dict[str, Any]]:
    """The inputs and options of a configuration file (YAML, keys = the command line's long
    options; refine.*, composite.*, session.* prefixes dropped), as the command reads it."""
    inputs: List[str] = []
    opts: Dict[str, Any] = {}
    where = os.fsdecode(os.fspath(path))
    for key, value, line in _keyer.read_config(path):
        name = _name(key)
        if name in ("input", "inputs"):
            inputs.append(value)
            continue
        if name == "config":
            raise InvalidArgumentError("%s:%d: a configuration file cannot name another"
                                       % (where, line))
        for prefix in ("refine.", "composite.", "session."):
            if name.startswith(prefix):
                name = name[len(prefix):]
        if name in _SWITCHES:
            opts[name] = _bool_text("%s:%d: %s" % (where, line, key), value)
        else:
            opts[name] = value
    return inputs, opts


def run(inputs: Union[PathLike, Iterable[PathLike], None], output: Optional[PathLike] = None, *,
        progress: Optional[Callable[[Dict[str, Any]], Any]] = None,
        progress_interval: float = 0.2, overwrite: bool = False, config: Optional[PathLike] = None,
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

    Analytics, as the command's: ``detect="faces,pose"`` (or a sequence: faces, faces:full,
    pose, pose:full, pose:heavy) tracks faces and/or the body pose; ``draw`` what is drawn
    (boxes, ids, keypoints, mesh, skeleton, graph[:k=K], all, none; default
    "boxes,ids,skeleton"); ``export`` a JSON-lines file of every frame's detections. With
    ``detect`` and no effect option, the frames are drawn on as they are. ``config``: a YAML
    configuration file of the command (``--config``); the options given here win, and its
    inputs come before ``inputs``.

    ``progress(p)`` is called about every ``progress_interval`` seconds (at least 0.01) with a dict
    (frames_done, frames_total, frames_read, elapsed, fps, remaining); returning False stops
    the job, as does an exception it raises (re-raised here) or Ctrl-C; the outputs then
    hold every frame read so far. Existing outputs are refused unless ``overwrite``.
    """
    if inputs is None:
        inputs = []
    elif isinstance(inputs, (str, bytes, os.PathLike)):
        inputs = [inputs]
    ins = [os.fsdecode(os.fspath(i)) for i in inputs]
    if config is not None:
        cfg_inputs, cfg_opts = _config_options(config)
        ins = cfg_inputs + ins
        cfg_opts.update(options)
        options = cfg_opts
        if "output" in options and output is None:
            output = options.pop("output")
        options.pop("output", None)
        if options.pop("yes", False):
            overwrite = True
        options.pop("no", None)
        for name in _DISPLAY_ONLY:
            options.pop(name, None)
    if not ins:
        raise InvalidArgumentError("no input given")
    out = None if output is None else os.fsdecode(os.fspath(output))
    session: Dict[str, str] = {}
    refine: Dict[str, str] = {}
    composite: Dict[str, str] = {}
    writer: Dict[str, Any] = {}
    model = background = stats = trace = None
    detect = draw = export = None
    copy_streams = True
    effect_set = False
    threshold = softness = smooth = None
    rest: Dict[str, Any] = {}
    for key, value in options.items():
        name = _name(key)
        if name == "blur":
            if value is False:
                continue
            composite["mode"] = "blur"
            effect_set = True
            if value is not True and value is not None:
                composite["blur_radius"] = _text(value, "float")
        elif name == "replace":
            v = os.fsdecode(os.fspath(value)) if isinstance(value, os.PathLike) else value
            effect_set = True
            if isinstance(v, str) and os.path.exists(v):
                composite["mode"], background = "image", v
            else:
                composite["mode"], composite["color"] = "color", _text(v, "color")
                background = None
        elif name == "green":
            if value is False:
                continue
            composite["mode"] = "green"
            effect_set = True
            if value is not True and value is not None:
                composite["key_color"] = _text(value, "color")
        elif name in ("alpha", "premultiply", "mask"):
            if not value:
                continue
            effect_set = True
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
        elif name == "detect":
            detect = None if value is None else _words(value, "detect")
        elif name == "draw":
            draw = None if value is None else _words(value, "draw")
        elif name == "export":
            export = None if value is None else os.fsdecode(os.fspath(value))
        else:
            rest[name] = value
    split = _split(rest, ("session", "refine", "composite"), "run, session, refine or composite")
    session.update(split["session"])
    refine.update(split["refine"])
    composite.update(split["composite"])
    _settle_matte(refine, threshold, softness, smooth)
    if out is None and stats is None:
        raise InvalidArgumentError("no output given (output=PATH)")
    # --detect, --draw, --export (tools/keyer/run_options.c, settle_analytics)
    passthrough = False
    if detect is None and (draw is not None or export is not None):
        raise InvalidArgumentError("draw and export need detect")
    if detect is not None:
        _check_words(detect, _DETECT_WORDS, "detect")
        if not any(filter(None, detect.split(","))):
            raise InvalidArgumentError("detect needs faces and/or pose")
        if draw is None:
            draw = "boxes,ids,skeleton"
        _check_words(draw, _DRAW_WORDS, "draw", graph=True)
        words = [w for w in draw.split(",") if w]
        last_none = max((i for i, w in enumerate(words) if w == "none"), default=-1)
        drawing = len(words) > last_none + 1  # "none" forgets the words before it
        if drawing and composite.get("mode") == "mask":
            raise InvalidArgumentError("draw needs a colour output; mask writes the matte (use "
                                       "draw='none' to only detect and export)")
        passthrough = not effect_set

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
    return _keyer.run(ins, outs, session, refine, composite, model, background, passthrough,
                      writer, copy_streams, progress, max(10, int(progress_interval * 1000)),
                      stats, trace, detect, draw, export)


# ---- several streams with per-frame callbacks -----------------------------------------------

def _dispatcher(on_frame: Callable[..., Any]) -> Callable[..., Any]:
    def dispatch(stream: int, index: int, frame: Any, raw: Any) -> None:
        on_frame(stream, index, frame, None if raw is None else Detections._from_raw(raw))
    return dispatch


class Session(_keyer.Session):
    """Several streams (files, URLs, cameras) through one keying session, the pipeline of
    the main job: frames of all streams share the inference batches, each stream keeps its
    own temporal smoothing, and a callback sees every frame, in order per stream::

        def on_frame(stream, index, frame, detections):
            for face in detections.faces:
                log.write("%d %d %d %s\n" % (stream, index, face.id, face.box))

        with keyer.Session(detect="faces", on_frame=on_frame) as s:
            for cam in ("cam1.mp4", "cam2.mp4"):
                s.add(cam, "out/" + cam)
            stats = s.run()

    ``Session(*, model=None, device="auto", effect=None, background=None, detect=None,
    mesh=False, max_faces=16, format="rgb", on_frame=None, progress=None,
    progress_interval=0.2, **options)``

    * ``effect``: as :class:`Keyer`'s ("blur" by default); "none" keys nothing (the frames
      pass through). With ``detect`` and no effect, the frames pass through.
    * ``background``: the picture or video of effect "image".
    * ``device``: "auto", "cpu", "cuda" or "cuda:N".
    * ``detect``, ``mesh``, ``max_faces``: the analysers of every stream, as
      :class:`Detector` (faces alone are detected by the session itself, batched across the
      streams on its device, then tracked per stream).
    * ``on_frame(stream, index, frame, detections)``: called for every frame of every stream
      with the stream's id (the order of :meth:`add`), the frame's number in it (0, 1, ...),
      the output frame as a NumPy array in ``format`` ("rgb", "bgr", "rgba" or "bgra"; RGBA
      for the alpha effects, ``(h, w)`` for "mask"; ``format=None``: no pixels, None, which
      keeps the decoder's format and saves two copies per frame) and the frame's
      :class:`Detections` (None without ``detect``). The calls of one stream come in order
      from that stream's own thread; different streams call at the same time (one at a time
      holds the GIL). Drawing on ``frame`` (e.g. with :class:`Overlay`) changes what is
      written. An exception stops the session and is raised by :meth:`run`.
    * ``progress``, ``progress_interval``: as :func:`run`'s.
    * ``options``: any field of the session, refinement or compositing tables
      (:func:`options`).
    """

    def __init__(self, *, model: Optional[PathLike] = None, device: Optional[str] = None,
                 effect: Optional[str] = None, background: Optional[PathLike] = None,
                 detect: Union[str, Sequence[str], None] = None, mesh: bool = False,
                 max_faces: int = 16, format: Optional[str] = "rgb",
                 on_frame: Optional[Callable[[int, int, Any, Optional[Detections]], Any]] = None,
                 progress: Optional[Callable[[Dict[str, Any]], Any]] = None,
                 progress_interval: float = 0.2, **options: Any) -> None:
        opts = dict(options)
        if device is not None:
            kind, _, ordinal = str(device).partition(":")
            opts["device"] = kind
            if ordinal:
                opts["cuda_device"] = ordinal
        if effect is None and background is not None:
            effect = "image"
        passthrough = effect == "none" or (effect is None and detect is not None)
        split = _split(opts, ("session", "refine", "composite"), "session, refine or composite")
        if effect is not None and effect != "none":
            split["composite"]["mode"] = effect
        bg = None if background is None else os.fsdecode(os.fspath(background))
        mdl = None if model is None else os.fsdecode(os.fspath(model))
        super().__init__(split["session"], split["refine"], split["composite"], mdl, bg,
                         passthrough, None if detect is None else _words(detect, "detect"),
                         bool(mesh), int(max_faces),
                         None if on_frame is None else _dispatcher(on_frame),
                         format if on_frame is not None else None, progress,
                         max(10, int(progress_interval * 1000)))

    def add(self, input: PathLike, output: Optional[PathLike] = None, *,
            no_audio: bool = False, **writer: Any) -> int:
        """Adds a stream: ``input`` (a file, URL or camera) and its ``output`` (a file, or
        None to only process it), with the writer options of :func:`run` (codec, preset,
        crf, pix_fmt, format, codec_options). Returns the stream's id (0, 1, ...)."""
        w: Dict[str, Any] = {}
        for key, value in writer.items():
            name = _name(key)
            if name not in _WRITER:
                raise InvalidArgumentError("unknown writer option '%s' (%s)"
                                           % (key, ", ".join(_WRITER)))
            w[_WRITER[name]] = value if name == "crf" else _text(value, "string")
        out = None if output is None else os.fsdecode(os.fspath(output))
        return self._add(os.fsdecode(os.fspath(input)), out, w, not no_audio)

    def run(self, *, stats: Optional[PathLike] = None,
            trace: Optional[PathLike] = None) -> Dict[str, Any]:
        """Runs every stream to its end (the GIL is released meanwhile) and returns the
        statistics, as :func:`run`; ``stats``/``trace`` also write them as files (a trace
        needs the session option ``trace_events``). A Session runs once."""
        return self._run(None if stats is None else os.fsdecode(os.fspath(stats)),
                         None if trace is None else os.fsdecode(os.fspath(trace)))

    def __enter__(self) -> "Session":
        if self.closed:
            raise InvalidArgumentError("Session: closed")
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False
