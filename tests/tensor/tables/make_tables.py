#!/usr/bin/env python3
"""Reference tables for kb's dtype conversions (lib/tensor/convert.cpp).

The expected values come from ml_dtypes and numpy, never from kb, corrected
where PyTorch's rule differs (each correction is spelled out below with the
torch behaviour it follows), and cross-checked inside this script against a
second, independent derivation: a plain formula decoder and a
nearest-value-ties-to-even search over the representable values. Any
disagreement aborts the script.

    python3 -m venv /tmp/dtvenv && /tmp/dtvenv/bin/pip install ml_dtypes numpy
    /tmp/dtvenv/bin/python tests/tensor/tables/make_tables.py           # writes tests/tensor/tables/
    /tmp/dtvenv/bin/python tests/tensor/tables/make_tables.py --verify  # regenerates, compares bytes
    python3 tests/tensor/tables/make_tables.py --check-torch            # where torch is (a GPU machine)

Produced with ml_dtypes 0.6.0 and numpy 2.4.6 (--verify with ml_dtypes 0.6.0
and numpy 2.5.2 reproduces them byte for byte). --check-torch with torch
2.11.0+cu130, on the CPU and an H200: every entry agrees. The file formats are
described in README.md beside this script; tests/tensor/test_convert.cpp reads
them.

--check-torch reads the committed tables (it needs numpy and torch, not
ml_dtypes), recomputes every decode and encode with torch on the CPU and, if
there is one, on the GPU, and reports every mismatch. NaN is compared by
NaN-ness (torch's NaN sign and payload differ between its scalar, vectorized
CPU and CUDA paths). float4_e2m1 has no torch conversion; for it the mode uses
torch's own test helpers (torch.testing._internal.common_quantized) when they
exist, excluding NaN inputs, which those helpers do not support.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import struct
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = HERE

RANDOM_COUNT = 50_000
RANDOM_SEED = 0x6B62_6474_7970_6573  # "kbdtypes"

DEC_MAGIC = b"KBDEC01\0"
ENC_MAGIC = b"KBENC01\0"
CANONICAL_NAN_F32 = 0x7FC00000

M64 = (1 << 64) - 1


# ----------------------------------------------------------------------------
# The formats
# ----------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Fmt:
    name: str          # file stem and kb's DType name
    exp_bits: int
    man_bits: int
    bias: int
    special: str       # "ieee": exponent all ones is inf/NaN; "fn": only S.1111.111 is NaN; "none"
    overflow: str      # what rounds past the largest finite value: "inf", "nan" or "saturate"

    @property
    def bits(self) -> int:
        return 1 + self.exp_bits + self.man_bits

    @property
    def sign_bit(self) -> int:
        return 1 << (self.exp_bits + self.man_bits)

    @property
    def mag_mask(self) -> int:
        return self.sign_bit - 1

    @property
    def out_bytes(self) -> int:
        return 2 if self.bits == 16 else 1

    def is_nan_pattern(self, p: int) -> bool:
        mag = p & self.mag_mask
        if self.special == "ieee":
            return (mag >> self.man_bits) == (1 << self.exp_bits) - 1 and (mag & ((1 << self.man_bits) - 1)) != 0
        if self.special == "fn":
            return mag == self.mag_mask
        return False

    def max_pattern(self) -> int:
        """Largest positive finite pattern."""
        if self.special == "ieee":
            return (((1 << self.exp_bits) - 1) << self.man_bits) - 1
        if self.special == "fn":
            return self.mag_mask - 1
        return self.mag_mask


F16 = Fmt("float16", 5, 10, 15, "ieee", "inf")
BF16 = Fmt("bfloat16", 8, 7, 127, "ieee", "inf")
E4M3FN = Fmt("float8_e4m3fn", 4, 3, 7, "fn", "nan")
E5M2 = Fmt("float8_e5m2", 5, 2, 15, "ieee", "inf")
E2M1 = Fmt("float4_e2m1", 2, 1, 1, "none", "saturate")
FORMATS = [F16, BF16, E4M3FN, E5M2, E2M1]


def f32_bits(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float32).view(np.uint32)


def bits_f32(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


# ----------------------------------------------------------------------------
# Witness 1: ml_dtypes / numpy, with PyTorch's rules where they differ
# ----------------------------------------------------------------------------

def _ml_type(fmt: Fmt):
    import ml_dtypes

    return {
        "float16": np.float16,
        "bfloat16": ml_dtypes.bfloat16,
        "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
        "float8_e5m2": ml_dtypes.float8_e5m2,
        "float4_e2m1": ml_dtypes.float4_e2m1fn,
    }[fmt.name]


def _storage(fmt: Fmt):
    return np.uint16 if fmt.bits == 16 else np.uint8


def ml_decode(fmt: Fmt) -> np.ndarray:
    """float32 bits of every pattern (NaN canonicalized)."""
    pats = np.arange(1 << fmt.bits, dtype=_storage(fmt))
    with np.errstate(invalid="ignore"):
        vals = pats.view(_ml_type(fmt)).astype(np.float32)
    out = vals.view(np.uint32).copy()
    out[np.isnan(vals)] = CANONICAL_NAN_F32
    return out


def torch_nan_result(fmt: Fmt, sign: int) -> int:
    """What a float32 NaN (of the given sign) converts to under the rule kb follows.

    float16: c10::detail::fp16_ieee_from_fp32_value returns 0x7E00 with the
      input's sign. bfloat16: c10::detail::round_to_nearest_even returns 0x7FC0,
      dropping the sign (ml_dtypes keeps the sign: 0xFFC0 for -NaN; torch's
      vectorized CPU and CUDA paths need not write the same NaN as its scalar
      one, which is why the tests compare NaN-ness only). float8_e4m3fn / float8_e5m2:
      c10's fp8e4m3fn_from_fp32_value / fp8e5m2_from_fp32_value return 0x7F with
      the input's sign (ml_dtypes writes 0x7E / 0xFE for e5m2 NaN).
    float4_e2m1 has no NaN and torch has no float->float4 conversion: the OCP MX
      spec leaves NaN conversion implementation-defined. ml_dtypes gives -0 for
      +NaN and +0 for -NaN (its quiet_NaN() placeholder is the -0 pattern, then
      negated); torch's test helper _f32_to_floatx_unpacked has no NaN support
      at all. kb saturates NaN like inf and overflow: the largest magnitude with
      the input's sign (0x7 / 0xF), so a NaN never reads back as a silent zero.
    """
    if fmt is F16:
        return 0x7E00 | (0x8000 if sign else 0)
    if fmt is BF16:
        return 0x7FC0
    if fmt in (E4M3FN, E5M2):
        return 0x7F | (0x80 if sign else 0)
    return 0x7 | (0x8 if sign else 0)


def expected_encode(fmt: Fmt, inputs: np.ndarray) -> np.ndarray:
    """Expected output bits for float32 input bits."""
    x = bits_f32(inputs)
    with np.errstate(invalid="ignore", over="ignore"):
        out = x.astype(_ml_type(fmt)).view(_storage(fmt)).astype(np.uint32)
    nan = np.isnan(x)
    neg = (inputs >> 31).astype(bool)
    # NaN: PyTorch's (or kb's, for float4) rule, see torch_nan_result.
    out[nan & ~neg] = torch_nan_result(fmt, 0)
    out[nan & neg] = torch_nan_result(fmt, 1)
    if fmt is E4M3FN:
        # torch (c10::detail::fp8e4m3fn_from_fp32_value): |x| >= 480 and +-inf
        # give NaN (0x7F | sign); |x| in (464, 480) rounds up into the NaN
        # pattern S.1111.111; exactly 464 is a tie between 448 (mantissa 110,
        # even) and that pattern, so it gives 448. ml_dtypes' non-saturating
        # cast agrees (checked by witness 2); the rule is imposed here so the
        # tables say torch's behaviour whatever ml_dtypes version runs.
        with np.errstate(invalid="ignore"):
            a = np.abs(x.astype(np.float64))
        over = ~nan & (a > 464.0)
        out[over] = np.where(neg[over], 0xFF, 0x7F)
    if fmt is E2M1:
        # No torch conversion exists; ml_dtypes' float4_e2m1fn saturates finite
        # overflow and +-inf to +-6, which kb follows (checked by witness 2).
        pass
    return out


# ----------------------------------------------------------------------------
# Witness 2: formula decoder and nearest-ties-to-even search (no ml_dtypes)
# ----------------------------------------------------------------------------

def formula_value(fmt: Fmt, p: int) -> float:
    sign = -1.0 if p & fmt.sign_bit else 1.0
    mag = p & fmt.mag_mask
    e = mag >> fmt.man_bits
    m = mag & ((1 << fmt.man_bits) - 1)
    if fmt.is_nan_pattern(p):
        return float("nan")
    if fmt.special == "ieee" and e == (1 << fmt.exp_bits) - 1:
        return sign * float("inf")
    if e == 0:
        return sign * m * 2.0 ** (1 - fmt.bias - fmt.man_bits)
    return sign * (1 + m / 2.0 ** fmt.man_bits) * 2.0 ** (e - fmt.bias)


def formula_decode(fmt: Fmt) -> np.ndarray:
    vals = np.array([formula_value(fmt, p) for p in range(1 << fmt.bits)], dtype=np.float64)
    f = vals.astype(np.float32)
    assert np.array_equal(f.astype(np.float64), vals, equal_nan=True), f"{fmt.name}: a value is not a float32"
    out = f.view(np.uint32).copy()
    out[np.isnan(f)] = CANONICAL_NAN_F32
    return out


def positive_values(fmt: Fmt) -> np.ndarray:
    """Values of patterns 0..max_pattern (ascending), float64."""
    return np.array([formula_value(fmt, p) for p in range(fmt.max_pattern() + 1)], dtype=np.float64)


def overflow_threshold(fmt: Fmt) -> float:
    """Midpoint between the largest finite value and the next value the
    exponent/mantissa grid would have (past the format's range)."""
    v = positive_values(fmt)
    return v[-1] + (v[-1] - v[-2]) / 2


def rne_encode(fmt: Fmt, inputs: np.ndarray) -> np.ndarray:
    """Round to nearest, ties to the even pattern, by search; NaN inputs -> 0 (not used)."""
    vals = positive_values(fmt)
    maxp = fmt.max_pattern()
    with np.errstate(invalid="ignore"):
        x = bits_f32(inputs).astype(np.float64)
    a = np.abs(x)
    neg = (inputs >> 31).astype(bool)
    finite = np.isfinite(a)
    af = np.where(finite, a, 0.0)
    i = np.clip(np.searchsorted(vals, af, side="right") - 1, 0, maxp)
    hi = np.minimum(i + 1, maxp)
    mid = (vals[i] + vals[hi]) / 2  # exact: adjacent values differ in one low bit
    up = (af > mid) | ((af == mid) & (i % 2 == 1))
    p = np.where(up & (hi > i), i + 1, i)
    # Past the largest finite value: round against the grid's next value.
    thr = overflow_threshold(fmt)
    max_is_odd = maxp % 2 == 1
    overflow = ~finite | (a > thr) | ((a == thr) & max_is_odd)
    overflow &= ~np.isnan(x)
    over_mag = {"inf": ((1 << fmt.exp_bits) - 1) << fmt.man_bits, "nan": fmt.mag_mask, "saturate": maxp}[fmt.overflow]
    p = np.where(overflow, over_mag, p)
    return (p | np.where(neg, fmt.sign_bit, 0)).astype(np.uint32)


# ----------------------------------------------------------------------------
# Encode inputs
# ----------------------------------------------------------------------------

def special_inputs(fmt: Fmt, values_f32: np.ndarray) -> np.ndarray:
    """Explicit cases, both signs: zeros, infinities, NaN payloads, float32
    extremes, and the format's overflow and subnormal boundaries."""
    vals = values_f32.astype(np.float64)  # positive finite values, ascending
    maxv = vals[-1]
    thr = overflow_threshold(fmt)
    smallest_sub = vals[1]
    min_normal = 2.0 ** (1 - fmt.bias)
    largest_sub = vals[(1 << fmt.man_bits) - 1]
    pos = []

    def around(v: float, k: int = 2):
        with np.errstate(over="ignore"):
            b = int(f32_bits([v])[0])
        for d in range(-k, k + 1):
            if 0 <= b + d <= 0x7F800000:
                pos.append(b + d)

    pos += [0x00000000, 0x7F800000]                     # +0, +inf
    pos += [0x7FC00000, 0x7F800001, 0x7FFFFFFF, 0x7FA00000, 0x7FC00001, 0x7F80E000]  # NaNs
    pos += [0x00000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0x3F800000]  # f32 extremes, 1.0
    around(maxv)
    around(thr, 3)
    around(maxv + (maxv - vals[-2]))                    # the value the grid would have next
    around(2 * maxv)
    around(min_normal)
    around(smallest_sub)
    around(smallest_sub / 2, 3)                         # tie between 0 and the smallest subnormal
    around(smallest_sub / 4)
    around(smallest_sub * 1.5)                          # tie between subnormals 1 and 2
    around(largest_sub)
    around((largest_sub + min_normal) / 2)              # tie: largest subnormal / smallest normal
    if fmt is E4M3FN:
        for v in (448.0, 464.0, 470.0, 479.0, 480.0, 481.0, 496.0, 512.0, 1e30):
            around(v, 1)
    if fmt is E5M2:
        for v in (57344.0, 61440.0, 65535.0, 65536.0):
            around(v, 1)
    if fmt is F16:
        for v in (65504.0, 65519.0, 65520.0, 65536.0, 2.0 ** -24, 2.0 ** -25, 2.0 ** -14):
            around(v, 1)
    if fmt is E2M1:
        for v in (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0, 7.0, 8.0, 100.0):
            around(v, 1)
    if fmt is BF16:
        pos += [0x3F808000, 0x3F818000, 0x3F807FFF, 0x3F808001, 0x7F7F7FFF, 0x7F7F8000, 0x7F7F8001]
    uniq = sorted(set(b for b in pos if b <= 0x7FFFFFFF))
    out = []
    for b in uniq:
        out += [b, b | 0x80000000]
    return np.array(out, dtype=np.uint32)


def grid_inputs(fmt: Fmt, dec: np.ndarray) -> np.ndarray:
    """For each non-negative finite pattern p (ascending): value(p), and the
    midpoint m between value(p) and the next value (for the largest pattern,
    the overflow threshold) as bits(m)-1, bits(m), bits(m)+1.

    `dec` is the decode table (float32 bits per pattern); test_convert.cpp
    derives the same inputs from the same table and checks the checksum."""
    maxp = fmt.max_pattern()
    v = bits_f32(dec[: maxp + 1]).astype(np.float64)
    nxt = np.empty_like(v)
    nxt[:-1] = v[1:]
    nxt[-1] = 2 * v[-1] - v[-2]
    mid = (v + nxt) / 2
    mid32 = mid.astype(np.float32)
    assert np.array_equal(mid32.astype(np.float64), mid), f"{fmt.name}: a midpoint is not a float32"
    mb = mid32.view(np.uint32).astype(np.int64)
    vb = dec[: maxp + 1].astype(np.int64)
    g = np.stack([vb, mb - 1, mb, mb + 1], axis=1).reshape(-1)
    assert g.min() >= 0
    return g.astype(np.uint32)


class SplitMix64:
    """splitmix64 (Steele, Lea, Flood 2014); test_convert.cpp has the same."""

    def __init__(self, seed: int):
        self.s = seed & M64

    def next(self) -> int:
        self.s = (self.s + 0x9E3779B97F4A7C15) & M64
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)


def random_exponent_range(fmt: Fmt) -> tuple[int, int]:
    """Biased float32 exponents from two below the smallest subnormal to two
    above the largest finite value."""
    lo = 127 + (1 - fmt.bias - fmt.man_bits) - 2
    hi = 127 + (fmt.max_pattern() >> fmt.man_bits) - fmt.bias + 2
    return max(lo, 0), min(hi, 254)


def format_seed(fmt: Fmt) -> int:
    return RANDOM_SEED ^ (fmt.bits << 8) ^ fmt.exp_bits


def random_inputs(seed: int, count: int, lo: int, hi: int) -> np.ndarray:
    """Random float32 bits: a quarter uniform over all 2^32 patterns, the rest
    with the biased exponent uniform in [lo, hi] (random_exponent_range),
    random sign and mantissa. Each draw: r = next(); low = r & 0xFFFFFFFF;
    if (r >> 32) & 3 == 0: input = low; else
    input = (low & 0x807FFFFF) | ((lo + (r >> 34) % (hi - lo + 1)) << 23)."""
    rng = SplitMix64(seed)
    out = np.empty(count, dtype=np.uint32)
    for k in range(count):
        r = rng.next()
        low = r & 0xFFFFFFFF
        if (r >> 32) & 3 == 0:
            out[k] = low
        else:
            e = lo + (r >> 34) % (hi - lo + 1)
            out[k] = (low & 0x807FFFFF) | (e << 23)
    return out


def fnv1a_words(*arrays: np.ndarray) -> int:
    """FNV-1a over 32-bit words: h ^= w; h *= 0x100000001b3 (mod 2^64)."""
    h = 0xCBF29CE484222325
    for arr in arrays:
        for w in arr.tolist():
            h = ((h ^ w) * 0x100000001B3) & M64
    return h


# ----------------------------------------------------------------------------
# Files
# ----------------------------------------------------------------------------

def decode_file(fmt: Fmt, dec: np.ndarray) -> bytes:
    # bfloat16 -> float32 only ever sets the upper 16 bits: store those.
    shift = 16 if fmt is BF16 else 0
    if shift:
        assert not (dec & 0xFFFF).any()
        body = (dec >> 16).astype("<u2").tobytes()
        nbytes = 2
    else:
        body = dec.astype("<u4").tobytes()
        nbytes = 4
    return DEC_MAGIC + struct.pack("<4I", fmt.bits, shift, nbytes, len(dec)) + body


def encode_file(fmt: Fmt, special, special_out, grid, grid_out, rand, rand_out, seed: int) -> bytes:
    dt = "<u2" if fmt.out_bytes == 2 else "u1"
    lo, hi = random_exponent_range(fmt)
    head = ENC_MAGIC + struct.pack(
        "<6IQQ", fmt.out_bytes, len(special), len(grid) // 4, len(rand), lo, hi, seed, fnv1a_words(grid, rand)
    )
    return (head + special.astype("<u4").tobytes() + special_out.astype(dt).tobytes()
            + grid_out.astype(dt).tobytes() + rand_out.astype(dt).tobytes())


def read_decode(path: str) -> np.ndarray:
    data = open(path, "rb").read()
    assert data[:8] == DEC_MAGIC, path
    _bits, shift, nbytes, count = struct.unpack_from("<4I", data, 8)
    body = np.frombuffer(data, dtype="<u2" if nbytes == 2 else "<u4", count=count, offset=24)
    return body.astype(np.uint32) << shift


def read_encode(path: str):
    data = open(path, "rb").read()
    assert data[:8] == ENC_MAGIC, path
    out_bytes, n_special, n_grid, n_random, lo, hi, seed, checksum = struct.unpack_from("<6IQQ", data, 8)
    dt = "<u2" if out_bytes == 2 else "u1"
    off = 8 + 40
    special = np.frombuffer(data, "<u4", n_special, off).astype(np.uint32)
    off += 4 * n_special
    special_out = np.frombuffer(data, dt, n_special, off).astype(np.uint32)
    off += out_bytes * n_special
    grid_out = np.frombuffer(data, dt, 4 * n_grid, off).astype(np.uint32)
    off += out_bytes * 4 * n_grid
    rand_out = np.frombuffer(data, dt, n_random, off).astype(np.uint32)
    off += out_bytes * n_random
    assert off == len(data), path
    return dict(special=special, special_out=special_out, n_grid=n_grid, grid_out=grid_out,
                n_random=n_random, exp_lo=lo, exp_hi=hi, seed=seed, checksum=checksum, rand_out=rand_out)


# ----------------------------------------------------------------------------
# Generation
# ----------------------------------------------------------------------------

def check_decode(fmt: Fmt, dec: np.ndarray) -> None:
    ref = formula_decode(fmt)
    bad = np.nonzero(ref != dec)[0]
    if len(bad):
        raise SystemExit(f"{fmt.name} decode: ml_dtypes and the formula differ at patterns "
                         + ", ".join(hex(int(p)) for p in bad[:10]))


def check_encode(fmt: Fmt, inputs: np.ndarray, out: np.ndarray) -> None:
    nan = np.isnan(bits_f32(inputs))
    ref = rne_encode(fmt, inputs)
    bad = np.nonzero((ref != out) & ~nan)[0]
    if len(bad):
        lines = [f"  in {int(inputs[k]):#010x} ({bits_f32(inputs[k:k+1])[0]!r}): expected {int(out[k]):#x}"
                 f", search says {int(ref[k]):#x}" for k in bad[:10]]
        raise SystemExit(f"{fmt.name} encode: {len(bad)} disagreements\n" + "\n".join(lines))
    # Every NaN input must give a NaN pattern where the format has one.
    if fmt.special != "none":
        assert all(fmt.is_nan_pattern(int(p)) for p in out[nan])


def generate(out_dir: str) -> dict[str, int]:
    os.makedirs(out_dir, exist_ok=True)
    sizes = {}
    for fmt in FORMATS:
        dec = ml_decode(fmt)
        check_decode(fmt, dec)
        name = f"{fmt.name}.decode.bin"
        data = decode_file(fmt, dec)
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)
        sizes[name] = len(data)

        special = special_inputs(fmt, bits_f32(dec[: fmt.max_pattern() + 1]))
        grid = grid_inputs(fmt, dec)
        rand = random_inputs(format_seed(fmt), RANDOM_COUNT, *random_exponent_range(fmt))
        outs = []
        for inputs in (special, grid, rand):
            o = expected_encode(fmt, inputs)
            check_encode(fmt, inputs, o)
            outs.append(o)
        # The C++ test checks -x for every grid input, expecting the output with
        # the sign bit set: confirm that symmetry on the reference itself.
        neg = expected_encode(fmt, grid | np.uint32(0x80000000))
        assert np.array_equal(neg, outs[1] | fmt.sign_bit), f"{fmt.name}: encode is not sign-symmetric"
        name = f"{fmt.name}.encode.bin"
        data = encode_file(fmt, special, outs[0], grid, outs[1], rand, outs[2], format_seed(fmt))
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)
        sizes[name] = len(data)
    return sizes


# ----------------------------------------------------------------------------
# --check-torch
# ----------------------------------------------------------------------------

def check_torch(tables: str) -> int:
    import torch

    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    print(f"torch {torch.__version__}, devices {devices}, numpy {np.__version__}")
    tdt = {"float16": torch.float16, "bfloat16": torch.bfloat16,
           "float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}
    store = {2: torch.int16, 1: torch.uint8}
    problems = 0

    def fmt_nan(fmt: Fmt, pats) -> np.ndarray:
        mag = np.asarray(pats, dtype=np.uint32) & fmt.mag_mask
        if fmt.special == "ieee":
            return mag > (((1 << fmt.exp_bits) - 1) << fmt.man_bits)
        if fmt.special == "fn":
            return mag == fmt.mag_mask
        return np.zeros(len(mag), dtype=bool)

    def compare(fmt: Fmt, label: str, inputs, expected, actual, exp_nan, act_nan) -> int:
        """Equal bits, or NaN where NaN is expected."""
        bad = np.nonzero(np.where(exp_nan, ~act_nan, actual != expected))[0]
        print(f"  {fmt.name:14} {label:32} {len(expected):7} checked, {len(bad)} mismatches")
        for k in bad[:10]:
            print(f"      in {int(inputs[k]):#010x}: table {int(expected[k]):#x}, torch {int(actual[k]):#x}")
        return len(bad)

    for fmt in FORMATS:
        dec = read_decode(os.path.join(tables, f"{fmt.name}.decode.bin"))
        enc = read_encode(os.path.join(tables, f"{fmt.name}.encode.bin"))
        grid = grid_inputs(fmt, dec)
        rand = random_inputs(enc["seed"], enc["n_random"], enc["exp_lo"], enc["exp_hi"])
        assert fnv1a_words(grid, rand) == enc["checksum"], f"{fmt.name}: regenerated inputs differ"
        inputs = np.concatenate([enc["special"], grid, rand])
        expected = np.concatenate([enc["special_out"], enc["grid_out"], enc["rand_out"]])
        neg_inputs = grid | np.uint32(0x80000000)
        neg_expected = enc["grid_out"] | fmt.sign_bit
        inputs = np.concatenate([inputs, neg_inputs])
        expected = np.concatenate([expected, neg_expected])
        exp_nan = fmt_nan(fmt, expected)
        pats = np.arange(1 << fmt.bits, dtype=np.uint32)
        dec_nan = np.isnan(bits_f32(dec))

        if fmt.name in tdt:
            dt = tdt[fmt.name]
            st = store[fmt.out_bytes]
            np_st = np.int16 if fmt.out_bytes == 2 else np.uint8
            for dev in devices:
                # decode
                raw = torch.from_numpy(pats.astype(np.uint16 if fmt.bits == 16 else np.uint8).view(np_st).copy())
                got = raw.to(dev).view(dt).float().cpu().numpy()
                problems += compare(fmt, f"decode {dev}", pats, dec, got.view(np.uint32), dec_nan, np.isnan(got))
                # encode, whole tensor (vectorized paths)
                x = torch.from_numpy(bits_f32(inputs).copy()).to(dev)
                got = x.to(dt).view(st).cpu().numpy().view(np.uint16 if fmt.out_bytes == 2 else np.uint8)
                got = got.astype(np.uint32)
                problems += compare(fmt, f"encode {dev}", inputs, expected, got, exp_nan, fmt_nan(fmt, got))
            # encode one element at a time on the CPU (scalar path), special cases only
            sp = enc["special"]
            got = np.array([
                int(torch.tensor(float(bits_f32(sp[k:k + 1])[0]), dtype=torch.float32).to(dt).view(st).item())
                & ((1 << fmt.bits) - 1) for k in range(len(sp))], dtype=np.uint32)
            problems += compare(fmt, "encode cpu one by one (special)", sp, enc["special_out"], got,
                                fmt_nan(fmt, enc["special_out"]), fmt_nan(fmt, got))
        elif fmt is E2M1:
            try:
                import importlib.util
                if importlib.util.find_spec("expecttest") is None:
                    # torch's test modules import expecttest for TestCase only;
                    # the helpers used here do not need it.
                    import types
                    import unittest
                    sys.modules["expecttest"] = types.SimpleNamespace(TestCase=unittest.TestCase)
                from torch.testing._internal import common_quantized as cq
                to_fx = cq._f32_to_floatx_unpacked
                from_fx = cq._floatx_unpacked_to_f32
            except (ImportError, AttributeError) as e:
                print(f"  {fmt.name}: torch has no float4 conversion and no test helper ({e}); skipped")
                continue
            for dev in devices:
                raw = torch.from_numpy(pats.astype(np.uint8)).to(dev)
                got = from_fx(raw, 2, 1).float().cpu().numpy()
                problems += compare(fmt, f"decode {dev} (test helper)", pats, dec, got.view(np.uint32), dec_nan,
                                    np.isnan(got))
                keep = ~np.isnan(bits_f32(inputs))
                x = torch.from_numpy(bits_f32(inputs[keep]).copy()).to(dev)
                got = to_fx(x, 2, 1).cpu().numpy().astype(np.uint32)
                none = np.zeros(int(keep.sum()), bool)
                problems += compare(fmt, f"encode {dev} (test helper, no NaN)", inputs[keep], expected[keep], got,
                                    none, none)
    print("torch agrees with every table entry" if problems == 0 else f"{problems} mismatches")
    return 1 if problems else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT, help="where to write the tables")
    ap.add_argument("--verify", action="store_true", help="regenerate and compare with the files in --out")
    ap.add_argument("--check-torch", action="store_true", help="recompute the tables in --out with torch")
    args = ap.parse_args()
    if args.check_torch:
        return check_torch(args.out)
    if args.verify:
        with tempfile.TemporaryDirectory() as tmp:
            sizes = generate(tmp)
            diff = [n for n in sizes if open(os.path.join(tmp, n), "rb").read()
                    != open(os.path.join(args.out, n), "rb").read()]
        print("tables match the generator" if not diff else f"differ: {', '.join(diff)}")
        return 1 if diff else 0
    sizes = generate(args.out)
    for n, s in sizes.items():
        print(f"{s:9} {n}")
    print(f"{sum(sizes.values()):9} total")
    return 0


if __name__ == "__main__":
    sys.exit(main())
