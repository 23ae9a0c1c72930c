"""Arrays through the array protocols on the CPU: a DLPack tensor in host memory (NumPy's
__dlpack__, as a PyTorch CPU tensor gives it) keys like the NumPy array; objects with
__cuda_array_interface__ are parsed and checked (a keyer without CUDA refuses them with a
clear error). The GPU path itself: test_cuda.py."""
import numpy as np
import pytest

import keyer


class DLPackOnly:
    """An array seen only through DLPack (no buffer protocol)."""

    def __init__(self, a):
        self.a = a
        self.calls = 0

    def __dlpack__(self, stream=None):
        self.calls += 1
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


class FakeCAI:
    """A __cuda_array_interface__ describing host memory (never dereferenced without CUDA)."""

    def __init__(self, a, typestr="|u1", strides=None, stream=None):
        self.a = a
        self.__cuda_array_interface__ = {
            "shape": a.shape, "typestr": typestr, "data": (a.ctypes.data, False),
            "strides": strides, "version": 3, "stream": stream}


def test_dlpack_host_tensor_equals_numpy(data):
    if not hasattr(np.empty(1), "__dlpack__"):
        pytest.skip("NumPy without DLPack")
    frame = keyer.read_image(data / "grace_hopper.jpg")
    with keyer.Keyer(temporal="off", threads=2) as k:
        ref, ref_matte = k.process(frame, matte=True)
        wrapped = DLPackOnly(frame)
        out, matte = k.process(wrapped, matte=True)
        assert wrapped.calls == 1
        assert isinstance(out, np.ndarray)
        assert np.array_equal(out, ref) and np.array_equal(matte, ref_matte)
        # NV12 planes as DLPack tensors too
        y = np.ascontiguousarray(frame[..., 1])
        uv = np.full((frame.shape[0] // 2, frame.shape[1] // 2, 2), 128, np.uint8)
        a = k.process((y, uv), format="nv12")
        b = k.process((DLPackOnly(y), DLPackOnly(uv)), format="nv12")
        assert all(np.array_equal(p, q) for p, q in zip(a, b))
    d = keyer.detect(DLPackOnly(frame), "faces")
    assert d.to_dict() == keyer.detect(frame, "faces").to_dict()
    with pytest.raises(keyer.InvalidArgumentError, match="uint8"):
        k2 = keyer.Keyer(threads=1)
        k2.process(DLPackOnly(frame.astype(np.float32)))


def test_cuda_array_interface_is_checked(data):
    frame = np.zeros((48, 64, 3), np.uint8)
    with keyer.Keyer(threads=1) as k:
        with pytest.raises(keyer.InvalidArgumentError, match="uint8, not <f4"):
            k.process(FakeCAI(frame.astype(np.float32), "<f4"))
        with pytest.raises(keyer.InvalidArgumentError, match="contiguous within each row"):
            k.process(FakeCAI(frame, strides=(64 * 3, 6, 1)))
        with pytest.raises(keyer.InvalidArgumentError, match="GPU array"):
            keyer.detect(FakeCAI(frame))
        with pytest.raises(keyer.InvalidArgumentError, match="GPU array"):
            keyer.Overlay().render(FakeCAI(frame))
        if not keyer.built_with_cuda():
            with pytest.raises(keyer.UnsupportedError, match="without CUDA"):
                k.process(FakeCAI(frame))
        # a host frame with a GPU output (or the reverse) is refused
        with pytest.raises(keyer.InvalidArgumentError, match="memory"):
            k.process(frame, FakeCAI(np.zeros_like(frame)))
        with pytest.raises(keyer.UnsupportedError, match="bgr on the GPU"):
            k.process(FakeCAI(frame), format="bgr")
