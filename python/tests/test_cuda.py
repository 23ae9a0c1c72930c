"""GPU tensors in and out of keyer.Keyer (skipped without a CUDA build, a CUDA device and
PyTorch or CuPy): a CUDA tensor in, a keyer.CudaArray out that PyTorch and CuPy take without a
copy (its pointer is device memory, and no frame crosses to the host: a profile of the call
has no device-to-host copy), on the Keyer's or the caller's stream, equal to the CPU path
within the tolerance between the CPU and CUDA kernels (PSNR >= 30 dB, as the C library's
session test, tests/unit/test_pipeline_gpu.c)."""
import ctypes
import math

import numpy as np
import pytest

import keyer

if not keyer.built_with_cuda():
    pytest.skip("keyer was built without CUDA", allow_module_level=True)
try:
    import torch
    if not torch.cuda.is_available():
        torch = None
except ImportError:
    torch = None
try:
    import cupy
    if cupy.cuda.runtime.getDeviceCount() < 1:
        cupy = None
except Exception:  # ImportError, or CuPy without a usable driver
    cupy = None
if torch is None and cupy is None:
    pytest.skip("neither PyTorch nor CuPy with a CUDA device", allow_module_level=True)


def psnr(a, b):
    mse = np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2)
    return math.inf if mse == 0 else 10 * math.log10(255.0 ** 2 / mse)


def memory_type(ptr):
    """CU_POINTER_ATTRIBUTE_MEMORY_TYPE of a pointer through the driver API: 1 host, 2 device."""
    cuda = ctypes.CDLL("libcuda.so.1")
    value = ctypes.c_uint(0)
    rc = cuda.cuPointerGetAttribute(ctypes.byref(value), 2, ctypes.c_uint64(ptr))
    assert rc == 0, "cuPointerGetAttribute: %d" % rc
    return value.value


@pytest.fixture(scope="module")
def photo(data):
    return keyer.read_image(data / "grace_hopper.jpg")


@pytest.fixture(scope="module")
def cpu_result(photo):
    with keyer.Keyer(temporal="off") as k:
        return k.process(photo, matte=True)


@pytest.mark.skipif(torch is None, reason="no PyTorch with CUDA")
def test_torch_in_out_no_copy(photo, cpu_result):
    ref, ref_matte = cpu_result
    t = torch.from_numpy(photo).cuda()
    torch.cuda.synchronize()
    with keyer.Keyer(device="cuda", temporal="off") as k:
        out, matte = k.process(t, matte=True)
        assert isinstance(out, keyer.CudaArray) and isinstance(matte, keyer.CudaArray)
        assert out.shape == photo.shape and matte.shape == photo.shape[:2]
        # no copy: torch's tensor is keyer's device memory
        g, gm = torch.from_dlpack(out), torch.from_dlpack(matte)
        assert g.is_cuda and g.data_ptr() == out.ptr and gm.data_ptr() == matte.ptr
        assert memory_type(out.ptr) == 2 and memory_type(matte.ptr) == 2
        cai = out.__cuda_array_interface__
        assert cai["data"][0] == out.ptr and cai["shape"] == photo.shape
        assert cai["typestr"] == "|u1" and cai["stream"] == out.stream == k.stream
        # equal to the CPU path within the GPU tolerance
        p, pm = psnr(g.cpu().numpy(), ref), psnr(gm.cpu().numpy(), ref_matte)
        print("CUDA vs CPU: frame %.2f dB, matte %.2f dB" % (p, pm))
        assert p >= 30 and pm >= 30
        # no frame crosses to the host inside process()
        prof = torch.profiler
        with prof.profile(activities=[prof.ProfilerActivity.CUDA]) as trace:
            r = k.process(t)
            torch.cuda.synchronize()
        names = [e.name for e in trace.events()]
        print("CUDA activity in process():", sorted(set(names)))
        assert not [n for n in names if "DtoH" in n or "Device -> Pageable" in n
                    or "Device -> Pinned" in n]
        # the same frame again (no history: temporal off) gives the same picture
        assert psnr(torch.from_dlpack(r).cpu().numpy(), g.cpu().numpy()) >= 40
        # out= reuse, a torch tensor written in place
        o = torch.empty_like(t)
        assert k.process(t, o) is o
        torch.cuda.synchronize()
        assert psnr(o.cpu().numpy(), g.cpu().numpy()) >= 40


@pytest.mark.skipif(torch is None, reason="no PyTorch with CUDA")
def test_torch_on_the_callers_stream_and_nv12(photo):
    t = torch.from_numpy(photo).cuda()
    torch.cuda.synchronize()
    with keyer.Keyer(device="cuda", temporal="off") as k:
        ref = torch.from_dlpack(k.process(t)).clone()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        with keyer.Keyer(device="cuda", temporal="off", stream=s) as k:
            assert k.stream == s.cuda_stream
            u = t.clone()
            g = torch.from_dlpack(k.process(u))  # queued on s, read on s
            assert psnr(g.cpu().numpy(), ref.cpu().numpy()) >= 40
    # NV12 planes in, NV12 planes out; host arrays into a CUDA Keyer come back as NumPy
    h, w = photo.shape[:2]
    y = torch.from_numpy(np.ascontiguousarray(photo[..., 1])).cuda()
    uv = torch.full((h // 2, w // 2, 2), 128, dtype=torch.uint8, device="cuda")
    with keyer.Keyer(device="cuda", temporal="off", format="nv12") as k:
        oy, ouv = k.process((y, uv))
        host = k.process((y.cpu().numpy(), uv.cpu().numpy()))
        assert psnr(torch.from_dlpack(oy).cpu().numpy(), host[0]) >= 30
        assert psnr(torch.from_dlpack(ouv).cpu().numpy(), host[1]) >= 30
    with keyer.Keyer(device="cpu", temporal="off", format="nv12") as k:
        cpu = k.process((y.cpu().numpy(), uv.cpu().numpy()))
        assert psnr(host[0], cpu[0]) >= 30


@pytest.mark.skipif(cupy is None, reason="no CuPy with CUDA")
def test_cupy_through_cuda_array_interface(photo, cpu_result):
    ref, ref_matte = cpu_result
    a = cupy.asarray(photo)
    with keyer.Keyer(device="cuda", temporal="off") as k:
        out, matte = k.process(a, matte=True)
        g = cupy.asarray(out)  # __cuda_array_interface__ 3: CuPy waits for keyer's stream
        assert g.data.ptr == out.ptr
        assert cupy.cuda.runtime.pointerGetAttributes(out.ptr).type == 2
        assert psnr(cupy.asnumpy(g), ref) >= 30
        assert psnr(cupy.asnumpy(cupy.asarray(matte)), ref_matte) >= 30
        o = cupy.empty_like(a)
        assert k.process(a, o) is o
        cupy.cuda.get_current_stream().synchronize()
        k.synchronize()
        assert psnr(cupy.asnumpy(o), cupy.asnumpy(g)) >= 40
