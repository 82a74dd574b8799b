"""kb's C ABI from Python (ctypes), shared by the GPU machine's tools that call kb directly
(interleaved_ratio.py, ncu_flushed_launches.py, dispatch_check.py): the signatures of the functions they use,
DLPack's structs, and the two ways a tensor reaches kb: a DLPack capsule from torch (dltensor_ptr) or a DLTensor
built here over host memory (tests/tools/test_gpu_tools.py runs kb_cpu_gemm that way, with no torch).
examples/python/rmsnorm.py declares its own: an example stands alone.
"""
import ctypes
import sys

KB_ABI_VERSION, KB_OK = 1, 0
KDL_CPU, KDL_CUDA = 1, 2
DTYPE_CODES = {"float16": 2, "bfloat16": 4, "float32": 2}  # DLPack's kDLFloat = 2, kDLBfloat = 4
DTYPE_BITS = {"float16": 16, "bfloat16": 16, "float32": 32}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class KbError(RuntimeError):
    pass


def load(path):
    """libkb at `path`, with the signatures of the functions the tools call."""
    kb = ctypes.CDLL(path)
    vp, pvp = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)
    kb.kb_context_create.argtypes = [vp, ctypes.c_int, pvp]
    kb.kb_context_destroy.argtypes = [vp]
    kb.kb_definition_load_file.argtypes = [vp, ctypes.c_char_p, pvp]
    kb.kb_definition_destroy.argtypes = [vp]
    kb.kb_definition_name.argtypes = [vp]
    kb.kb_definition_name.restype = ctypes.c_char_p
    kb.kb_status_string.argtypes = [ctypes.c_int]
    kb.kb_status_string.restype = ctypes.c_char_p
    kb.kb_last_error.restype = ctypes.c_char_p
    kb.kb_solution_run.argtypes = [vp, vp, ctypes.c_char_p, pvp, ctypes.c_size_t, pvp, ctypes.c_size_t, vp]
    return kb


def check(kb, what, status):
    """Raises KbError naming `what`, kb's status and kb_last_error() unless status is KB_OK."""
    if status != KB_OK:
        raise KbError(f"{what}: {kb.kb_status_string(status).decode()}: {kb.kb_last_error().decode()}")


def context(kb):
    ctx = ctypes.c_void_p()
    check(kb, "kb_context_create", kb.kb_context_create(None, KB_ABI_VERSION, ctypes.byref(ctx)))
    return ctx


def definition(kb, ctx, path):
    handle = ctypes.c_void_p()
    check(kb, f"{path}: kb_definition_load_file", kb.kb_definition_load_file(ctx, path.encode(), ctypes.byref(handle)))
    return handle


def pointers(addresses):
    """A C array of DLTensor* for kb_solution_run's inputs or outputs."""
    return (ctypes.c_void_p * len(addresses))(*addresses)


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def dltensor_ptr(capsule):
    """The DLTensor* inside a DLPack capsule (torch.utils.dlpack.to_dlpack): a DLManagedTensor starts with it.
    The capsule must stay alive while kb uses the pointer."""
    return _capsule_pointer(capsule, b"dltensor")


def torch_cuda_or_skip():
    """torch (with torch.utils.dlpack loaded) where it and a CUDA device are there; else exit 77, the tools'
    'skipped'."""
    try:
        import torch
        import torch.utils.dlpack  # noqa: F401
    except ImportError as e:
        print(f"skipped: no torch ({e})")
        sys.exit(77)
    if not torch.cuda.is_available():
        print("skipped: no CUDA device")
        sys.exit(77)
    return torch
