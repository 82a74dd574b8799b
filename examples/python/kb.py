"""kb from Python: libkb's C ABI (include/kb/kb.h) through ctypes, with nothing to install.

    import kb
    lib = kb.Library("build/capi/libkb.so.1")        # or $KB_LIBRARY, or the installed libkb.so.1
    with lib.context() as ctx:
        d = ctx.load_definition_by_name("kernels", "rmsnorm_h4096")   # or ctx.load_definition(PATH)
        x = kb.Tensor.from_values("bfloat16", [3, 4096], values)      # any iterable of numbers
        w = kb.Tensor.from_values("bfloat16", [4096], weights)
        y = kb.Tensor.empty("bfloat16", [3, 4096])
        d.check([x, w], [y])                          # shapes, dtypes, constraints: kb.Error if not
        ctx.run(d, "kb_cpu_rmsnorm", [x, w], [y])
        print(y.tolist()[:4])                          # Python floats, bfloat16 decoded

Tensors are DLPack DLTensor views (declared once here: DLDevice, DLDataType, DLTensor). A kb.Tensor
owns contiguous row-major host memory; bfloat16 values are converted to and from their bits by
kb.bf16_bits / kb.bf16_value (round to nearest even, as PyTorch does) so no caller twiddles bits.
With numpy, Tensor.from_values takes arrays and Tensor.numpy() returns one (bfloat16 as float32);
without numpy, lists, tuples and array.array work. Anything with __dlpack__ (a PyTorch tensor, CPU
or CUDA) or a DLPack capsule (torch.utils.dlpack.to_dlpack) may stand for a tensor too: kb reads it
in place, without a copy.

Every failing call raises kb.Error with kb's status and message (kb_last_error(), which names the
file and JSON path or the tensor and dimension).
"""
import array
import ctypes
import ctypes.util
import math
import os
import struct

try:
    import numpy as _np
except ImportError:  # numpy is optional: bytes, lists and array.array work without it
    _np = None

ABI_VERSION = 1  # KB_ABI_VERSION of the kb.h this module follows
OK = 0

# ---- DLPack (dlpack.h), the tensor hand-off kb reads --------------------------------------------

DL_CPU, DL_CUDA, DL_CUDA_HOST = 1, 2, 3
DL_INT, DL_UINT, DL_FLOAT, DL_BFLOAT, DL_BOOL = 0, 1, 2, 4, 6


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


# ---- kb.h's structs and enums -------------------------------------------------------------------

# kb_dtype values (pinned) and, for the host tensors this module makes, the DLPack type and how one
# element is packed ("bf16": two bytes of bfloat16 bits, converted here).
DTYPES = {
    "float32": (0, DL_FLOAT, 32, "f"),
    "float16": (1, DL_FLOAT, 16, "e"),
    "bfloat16": (2, DL_BFLOAT, 16, "bf16"),
    "int64": (6, DL_INT, 64, "q"),
    "int32": (7, DL_INT, 32, "i"),
    "int16": (8, DL_INT, 16, "h"),
    "int8": (9, DL_INT, 8, "b"),
    "bool": (10, DL_BOOL, 8, "?"),
}
# float8 / float4 have kb_dtype values but no Python packing here: name them for Definition.inputs.
DTYPE_NAMES = {0: "float32", 1: "float16", 2: "bfloat16", 3: "float8_e4m3fn", 4: "float8_e5m2",
               5: "float4_e2m1", 6: "int64", 7: "int32", 8: "int16", 9: "int8", 10: "bool"}
AXIS_CONST, AXIS_VAR = 0, 1


class _AxisInfo(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("name", ctypes.c_char_p), ("kind", ctypes.c_int),
                ("value", ctypes.c_int64), ("description", ctypes.c_char_p)]


class _TensorInfo(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("name", ctypes.c_char_p), ("dtype", ctypes.c_int),
                ("rank", ctypes.c_int32), ("shape", ctypes.POINTER(ctypes.c_char_p)),
                ("description", ctypes.c_char_p), ("optional", ctypes.c_int)]


class _CheckResult(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("axis_values", ctypes.POINTER(ctypes.c_int64)),
                ("axis_capacity", ctypes.c_size_t), ("constraints_held", ctypes.c_size_t),
                ("constraints_unchecked", ctypes.c_size_t), ("axis_count", ctypes.c_size_t)]


class Error(Exception):
    """A kb call that failed: `status` (kb_status), `status_name` and kb's one-line `message`."""

    def __init__(self, call, status, status_name, message):
        super().__init__(f"{call}: {status_name}: {message}")
        self.call, self.status, self.status_name, self.message = call, status, status_name, message


# ---- bfloat16 -----------------------------------------------------------------------------------

def bf16_bits(value):
    """The bfloat16 bits of a number: float32 rounded to nearest even (PyTorch's conversion); NaN
    gives the quiet NaN 0x7fc0 (with the input's sign)."""
    value = float(value)
    try:
        bits = struct.unpack("<I", struct.pack("<f", value))[0]
    except OverflowError:  # beyond float32: infinity, as a float32 cast gives
        return 0xFF80 if value < 0 else 0x7F80
    if math.isnan(value):
        return (bits >> 16) & 0x8000 | 0x7FC0
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def bf16_value(bits):
    """The number that bfloat16 `bits` (0..65535) stand for, as a Python float."""
    return struct.unpack("<f", struct.pack("<I", (int(bits) & 0xFFFF) << 16))[0]


def _bf16_bits_numpy(values):
    f = _np.ascontiguousarray(values, dtype=_np.float32).reshape(-1)
    u = f.view(_np.uint32).astype(_np.uint64)
    out = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(_np.uint16)
    nan = _np.isnan(f)
    out[nan] = ((u[nan] >> 16) & 0x8000 | 0x7FC0).astype(_np.uint16)
    return out


# ---- host tensors -------------------------------------------------------------------------------

class Tensor:
    """A host tensor kb reads or writes: contiguous row-major memory this object owns, described by
    a DLTensor (`.dltensor`) that stays valid while the Tensor lives."""

    def __init__(self, dtype, shape, data=None):
        if dtype not in DTYPES:
            raise ValueError(f"dtype {dtype!r}: this module makes host tensors of {', '.join(DTYPES)}")
        self.dtype, self.shape = dtype, tuple(int(s) for s in shape)
        if any(s < 0 for s in self.shape):
            raise ValueError(f"shape {list(self.shape)} has a negative dimension")
        _, code, bits, _ = DTYPES[dtype]
        self.itemsize = bits // 8
        self.size = math.prod(self.shape)
        nbytes = self.size * self.itemsize
        self._buffer = ctypes.create_string_buffer(max(nbytes, 1))
        if data is not None:
            data = bytes(data)
            if len(data) != nbytes:
                raise ValueError(f"{len(data)} bytes given, a {dtype} tensor of shape {list(self.shape)} "
                                 f"holds {nbytes}")
            ctypes.memmove(self._buffer, data, nbytes)
        self._shape = (ctypes.c_int64 * max(len(self.shape), 1))(*self.shape)
        self.dltensor = DLTensor(ctypes.cast(self._buffer, ctypes.c_void_p), DLDevice(DL_CPU, 0),
                                 len(self.shape), DLDataType(code, bits, 1),
                                 ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64)), None, 0)

    @classmethod
    def empty(cls, dtype, shape, fill=float("nan")):
        """A tensor filled with `fill` (NaN by default for floats, 0 for integers), so that a
        solution that writes nothing is seen."""
        if DTYPES[dtype][1] in (DL_INT, DL_UINT, DL_BOOL):
            fill = 0
        return cls.from_values(dtype, shape, [fill] * math.prod(int(s) for s in shape))

    @classmethod
    def from_values(cls, dtype, shape, values):
        """A tensor holding `values` (numbers in row-major order: a list, tuple, array.array, any
        iterable, or a numpy array of any shape with the right count), converted to `dtype`."""
        if dtype not in DTYPES:
            raise ValueError(f"dtype {dtype!r}: this module makes host tensors of {', '.join(DTYPES)}")
        fmt = DTYPES[dtype][3]
        if _np is not None and isinstance(values, _np.ndarray):
            if fmt == "bf16":
                data = _bf16_bits_numpy(values).tobytes()
            else:
                np_type = {"f": _np.float32, "e": _np.float16, "q": _np.int64, "i": _np.int32, "h": _np.int16,
                           "b": _np.int8, "?": _np.bool_}[fmt]
                data = _np.ascontiguousarray(values, dtype=np_type).tobytes()
            return cls(dtype, shape, data)
        values = list(values)
        if fmt == "bf16":
            data = struct.pack(f"<{len(values)}H", *(bf16_bits(v) for v in values))
        else:
            data = struct.pack(f"<{len(values)}{fmt}", *values)
        return cls(dtype, shape, data)

    def tobytes(self):
        return ctypes.string_at(self._buffer, self.size * self.itemsize)

    def tolist(self):
        """The elements in row-major order as Python numbers (bfloat16 decoded to floats)."""
        fmt = DTYPES[self.dtype][3]
        raw = self.tobytes()
        if fmt == "bf16":
            return [bf16_value(b) for b in struct.unpack(f"<{self.size}H", raw)]
        return list(struct.unpack(f"<{self.size}{fmt}", raw))

    def numpy(self):
        """A numpy copy of the elements in this shape (bfloat16 as float32); needs numpy."""
        if _np is None:
            raise RuntimeError("Tensor.numpy() needs numpy; Tensor.tolist() works without it")
        raw = _np.frombuffer(self.tobytes(), dtype=_np.uint8)
        fmt = DTYPES[self.dtype][3]
        if fmt == "bf16":
            out = (raw.view(_np.uint16).astype(_np.uint32) << 16).view(_np.float32)
        else:
            out = raw.view({"f": _np.float32, "e": _np.float16, "q": _np.int64, "i": _np.int32, "h": _np.int16,
                            "b": _np.int8, "?": _np.bool_}[fmt])
        return out.reshape(self.shape).copy()


# ---- tensors from other frameworks (DLPack capsules) --------------------------------------------

_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_is_valid.restype = ctypes.c_int
_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _dltensor_pointers(tensors, keep):
    """DLTensor* of each entry (None stays NULL, for optional inputs); capsules made here go to
    `keep`, which the caller holds until kb returns."""
    out = (ctypes.c_void_p * max(len(tensors), 1))()
    for i, t in enumerate(tensors):
        if t is None:
            out[i] = None
            continue
        if isinstance(t, Tensor):
            keep.append(t)
            out[i] = ctypes.addressof(t.dltensor)
            continue
        if isinstance(t, DLTensor):
            keep.append(t)
            out[i] = ctypes.addressof(t)
            continue
        capsule = t if type(t).__name__ == "PyCapsule" else t.__dlpack__()
        keep.append(capsule)
        # A "dltensor" capsule holds a DLManagedTensor*, whose first member is the DLTensor.
        if not _is_valid(capsule, b"dltensor"):
            raise TypeError(f"tensor {i}: not a legacy DLPack capsule (\"dltensor\"); pass torch.utils.dlpack."
                            "to_dlpack(t) or a kb.Tensor")
        out[i] = _get_pointer(capsule, b"dltensor")
    return out


# ---- the library --------------------------------------------------------------------------------

class Library:
    """libkb loaded once, its functions declared. `path`: the shared library; default $KB_LIBRARY,
    else the installed libkb.so.1."""

    def __init__(self, path=None):
        path = path or os.environ.get("KB_LIBRARY") or ctypes.util.find_library("kb") or "libkb.so.1"
        self.path = path
        self._lib = lib = ctypes.CDLL(path)
        P, S, I, C = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_char_p
        out = ctypes.POINTER(ctypes.c_void_p)
        tensors = ctypes.POINTER(ctypes.c_void_p)
        for name, restype, argtypes in [
            ("kb_version", C, []),
            ("kb_abi_version", I, []),
            ("kb_status_string", C, [I]),
            ("kb_last_error", C, []),
            ("kb_context_create", I, [P, I, out]),
            ("kb_context_destroy", None, [P]),
            ("kb_definition_load", I, [P, C, S, out]),
            ("kb_definition_load_file", I, [P, C, out]),
            ("kb_definition_load_by_name", I, [P, C, C, out]),
            ("kb_definition_destroy", None, [P]),
            ("kb_definition_name", C, [P]),
            ("kb_definition_op_type", C, [P]),
            ("kb_definition_json", C, [P]),
            ("kb_definition_axis_count", S, [P]),
            ("kb_definition_axis", I, [P, S, ctypes.POINTER(_AxisInfo)]),
            ("kb_definition_input_count", S, [P]),
            ("kb_definition_output_count", S, [P]),
            ("kb_definition_input", I, [P, S, ctypes.POINTER(_TensorInfo)]),
            ("kb_definition_output", I, [P, S, ctypes.POINTER(_TensorInfo)]),
            ("kb_definition_check_tensors", I, [P, tensors, S, tensors, S, ctypes.POINTER(_CheckResult)]),
            ("kb_solution_run", I, [P, P, C, tensors, S, tensors, S, P]),
        ]:
            f = getattr(lib, name)
            f.restype, f.argtypes = restype, argtypes
        if lib.kb_abi_version() != ABI_VERSION:
            raise Error("kb_abi_version", 11, "ABI mismatch",
                        f"{path} has ABI version {lib.kb_abi_version()}, this module follows {ABI_VERSION}")

    @property
    def version(self):
        return self._lib.kb_version().decode()

    def _check(self, call, status):
        if status != OK:
            raise Error(call, status, self._lib.kb_status_string(status).decode(),
                        self._lib.kb_last_error().decode(errors="replace"))

    def context(self):
        return Context(self)


class Context:
    """A kb_context; a `with` block destroys it (so does close())."""

    def __init__(self, library):
        self.library, self._lib = library, library._lib
        self._handle = ctypes.c_void_p()
        library._check("kb_context_create", self._lib.kb_context_create(None, ABI_VERSION, ctypes.byref(self._handle)))

    def close(self):
        if self._handle:
            self._lib.kb_context_destroy(self._handle)
            self._handle = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def _load(self, call, *args):
        handle = ctypes.c_void_p()
        self.library._check(call, getattr(self._lib, call)(self._handle, *args, ctypes.byref(handle)))
        return Definition(self.library, handle)

    def load_definition(self, path):
        """A definition from its .json file."""
        return self._load("kb_definition_load_file", os.fsencode(path))

    def load_definition_json(self, text):
        data = text.encode() if isinstance(text, str) else bytes(text)
        return self._load("kb_definition_load", data, len(data))

    def load_definition_by_name(self, directory, name):
        """The definition `name` in a dataset directory or any folder of definitions (as
        `kb show DIR NAME`); kb.Error with status 5 (not found) names the near matches."""
        return self._load("kb_definition_load_by_name", os.fsencode(directory), name.encode())

    def run(self, definition, solution, inputs, outputs, stream=None):
        """Runs kb's solution `solution` (e.g. "kb_cpu_rmsnorm") on the tensors, which are first
        checked as Definition.check does; outputs are written in place."""
        keep = []
        ins, outs = _dltensor_pointers(inputs, keep), _dltensor_pointers(outputs, keep)
        self.library._check("kb_solution_run", self._lib.kb_solution_run(
            self._handle, definition._handle, solution.encode(), ins, len(inputs), outs, len(outputs), stream))


class Definition:
    """A loaded kb_definition: name, op_type, axes, inputs, outputs and json, and check()."""

    def __init__(self, library, handle):
        self.library, self._lib, self._handle = library, library._lib, handle
        lib = self._lib
        self.name = lib.kb_definition_name(handle).decode()
        self.op_type = lib.kb_definition_op_type(handle).decode()
        self.axes = []  # (name, "const" | "var", value or None)
        for i in range(lib.kb_definition_axis_count(handle)):
            a = _AxisInfo(ctypes.sizeof(_AxisInfo))
            library._check("kb_definition_axis", lib.kb_definition_axis(handle, i, ctypes.byref(a)))
            self.axes.append((a.name.decode(), "const" if a.kind == AXIS_CONST else "var",
                              a.value if a.kind == AXIS_CONST else None))
        self.inputs = self._tensors(lib.kb_definition_input_count, lib.kb_definition_input, "kb_definition_input")
        self.outputs = self._tensors(lib.kb_definition_output_count, lib.kb_definition_output, "kb_definition_output")

    def _tensors(self, count, get, call):
        out = []  # (name, dtype name, [axis names] or None for a Python scalar)
        for i in range(count(self._handle)):
            t = _TensorInfo(ctypes.sizeof(_TensorInfo))
            self.library._check(call, get(self._handle, i, ctypes.byref(t)))
            shape = None if t.rank < 0 else [t.shape[k].decode() for k in range(t.rank)]
            out.append((t.name.decode(), DTYPE_NAMES.get(t.dtype, str(t.dtype)), shape))
        return out

    @property
    def json(self):
        return self._lib.kb_definition_json(self._handle).decode()

    def check(self, inputs, outputs):
        """Checks a call's tensors against the signature and constraints; returns the axis values
        they bind ({name: value}, -1 for a var axis no tensor binds); raises kb.Error otherwise."""
        keep = []
        ins, outs = _dltensor_pointers(inputs, keep), _dltensor_pointers(outputs, keep)
        values = (ctypes.c_int64 * max(len(self.axes), 1))()
        result = _CheckResult(ctypes.sizeof(_CheckResult), ctypes.cast(values, ctypes.POINTER(ctypes.c_int64)),
                              len(self.axes), 0, 0, 0)
        self.library._check("kb_definition_check_tensors", self._lib.kb_definition_check_tensors(
            self._handle, ins, len(inputs), outs, len(outputs), ctypes.byref(result)))
        return {name: values[i] for i, (name, _, _) in enumerate(self.axes)}

    def close(self):
        if self._handle:
            self._lib.kb_definition_destroy(self._handle)
            self._handle = ctypes.c_void_p()

    def __del__(self):
        self.close()
