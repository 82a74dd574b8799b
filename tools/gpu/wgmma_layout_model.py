#!/usr/bin/env python3
"""Host model of the shared-memory side of kernels/common/prefill_wgmma.cuh.

Writes K, V and Q tiles into a byte array exactly as the kernel's cp.async
addresses do (128-byte swizzle), builds the kernel's wgmma descriptors with
the same arithmetic, then reads the operands back the way the PTX ISA's
canonical layouts describe wgmma reading them (section "Shared Memory Matrix
Layout": K-major 128B ((8,m),(T,2k)):((8T,SBO),(1,T)), MN-major 128B
((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)), T = 8 for bf16, Swizzle<3,4,3> on the
byte address) and checks S = Q K^T and O = P V against numpy. It checks the
kernel's address arithmetic against that reading of the ISA, not the ISA
itself: run on a GPU (tools/gpu/prefill_wgmma_check.cu --tiny) for that.
"""
import numpy as np

D = 128


def swz(addr):  # Swizzle<3,4,3> on byte addresses: bits 4..6 ^= bits 7..9
    return addr ^ (((addr >> 7) & 7) << 4)


def make_desc(smem, lbo, sbo):
    return ((smem & 0x3FFFF) >> 4) | (((lbo & 0x3FFFF) >> 4) << 16) | (((sbo & 0x3FFFF) >> 4) << 32) | (1 << 62)


def decode(desc):
    start = (desc & 0x3FFF) << 4
    lbo = ((desc >> 16) & 0x3FFF) << 4
    sbo = ((desc >> 32) & 0x3FFF) << 4
    assert (desc >> 62) == 1 and ((desc >> 49) & 7) == 0
    return start, lbo, sbo


def read_kmajor(mem, desc, mn_size):
    """Operand [mn_size x 16] (row mn, column k), K-major, 128B swizzle."""
    start, _, sbo = decode(desc)
    out = np.zeros((mn_size, 16), dtype=np.float32)
    for mn in range(mn_size):
        for k in range(16):
            off_el = (mn % 8) * 64 + (k % 8) + (k // 8) * 8  # elements within the 8-row group
            addr = start + (mn // 8) * sbo + 2 * off_el
            out[mn, k] = mem[swz(addr) // 2]
    return out


def read_mnmajor(mem, desc, mn_size):
    """Operand B [16 x mn_size] (row k, column n), MN-major, 128B swizzle."""
    start, lbo, sbo = decode(desc)
    out = np.zeros((16, mn_size), dtype=np.float32)
    for k in range(16):
        for n in range(mn_size):
            a0, a1, a2 = n % 8, (n // 8) % 8, n // 64
            b0, b1 = k % 8, k // 8
            addr = start + 2 * (a0 + a1 * 8) + a2 * lbo + 2 * (b0 * 64) + b1 * sbo
            out[k, n] = mem[swz(addr) // 2]
    return out


def check(BN, STAGES):
    rng = np.random.default_rng(BN * 10 + STAGES)
    kHalf = 128
    q_half = 64 * kHalf
    q_bytes = 2 * q_half
    kv_half = BN * kHalf
    kv_bytes = 2 * kv_half
    q_off = 0
    k_off = q_off + 2 * q_bytes
    v_off = k_off + STAGES * kv_bytes
    sbase = 1024 * 3  # some 1024-aligned shared address
    mem = np.full((sbase + v_off + STAGES * kv_bytes) // 2 + 16, np.nan, dtype=np.float32)

    Q = [rng.standard_normal((64, D)).astype(np.float32) for _ in range(2)]
    K = [rng.standard_normal((BN, D)).astype(np.float32) for _ in range(STAGES)]
    V = [rng.standard_normal((BN, D)).astype(np.float32) for _ in range(STAGES)]

    # Q stores (consumer cw, thread wt, i): c = wt + 128 i, r = c / 16, ch = c % 16
    for cw in range(2):
        q_sm = sbase + q_off + cw * q_bytes
        for wt in range(128):
            for i in range(8):
                c = wt + 128 * i
                r, ch = c // 16, c % 16
                dst = q_sm + (ch // 8) * q_half + r * kHalf + (((ch % 8) ^ (r % 8)) << 4)
                mem[dst // 2: dst // 2 + 8] = Q[cw][r, ch * 8: ch * 8 + 8]
    # K / V stores (producer thread pt, row r0 + 8 i)
    for s in range(STAGES):
        for pt in range(128):
            cc, r0 = pt % 16, pt // 16
            dst0 = (cc // 8) * kv_half + r0 * kHalf + (((cc % 8) ^ r0) << 4)
            for i in range(BN // 8):
                row = r0 + 8 * i
                kd = sbase + k_off + s * kv_bytes + dst0 + i * 8 * kHalf
                vd = sbase + v_off + s * kv_bytes + dst0 + i * 8 * kHalf
                mem[kd // 2: kd // 2 + 8] = K[s][row, cc * 8: cc * 8 + 8]
                mem[vd // 2: vd // 2 + 8] = V[s][row, cc * 8: cc * 8 + 8]

    for cw in range(2):
        q_sm = sbase + q_off + cw * q_bytes
        q_desc = make_desc(q_sm, 16, 1024)
        k_desc0 = make_desc(sbase + k_off, 16, 1024)
        v_desc0 = make_desc(sbase + v_off, kv_half, 1024)
        for st in range(STAGES):
            # S = Q K^T: 8 k-steps
            kd = k_desc0 + ((st * kv_bytes) >> 4)
            S = np.zeros((64, BN), dtype=np.float64)
            for kk in range(D // 16):
                qo = (kk // 4) * q_half + (kk % 4) * 32
                ko = (kk // 4) * kv_half + (kk % 4) * 32
                A = read_kmajor(mem, q_desc + (qo >> 4), 64)      # [64 x 16]
                Bt = read_kmajor(mem, kd + (ko >> 4), BN)         # [BN x 16] = B^T
                assert not np.isnan(A).any() and not np.isnan(Bt).any()
                S += A.astype(np.float64) @ Bt.T.astype(np.float64)
            ref = Q[cw].astype(np.float64) @ K[st].T.astype(np.float64)
            assert np.allclose(S, ref), f"S mismatch BN={BN} st={st} cw={cw}"
            # O = P V: BN / 16 k-steps, P arbitrary
            P = rng.standard_normal((64, BN))
            vd = v_desc0 + ((st * kv_bytes) >> 4)
            O = np.zeros((64, D))
            for kk in range(BN // 16):
                B = read_mnmajor(mem, vd + ((kk * 16 * kHalf) >> 4), D)  # [16 x 128]
                assert not np.isnan(B).any()
                O += P[:, kk * 16: kk * 16 + 16] @ B
            assert np.allclose(O, P @ V[st].astype(np.float64)), f"O mismatch BN={BN} st={st}"
    print(f"BN={BN} STAGES={STAGES}: S = Q K^T and O = P V read back correctly")


def check_fragments():
    """P accumulator (m64nN D layout) -> A register fragments (m64nNk16 A layout)."""
    BN = 128
    for w in range(4):
        for lane in range(32):
            g, tq = lane // 4, lane % 4
            # D layout: s[4 jb + e] = S[16 w + g + 8 (e >> 1)][8 jb + 2 tq + (e & 1)]
            dpos = {}
            for jb in range(BN // 8):
                for e in range(4):
                    dpos[4 * jb + e] = (16 * w + g + 8 * (e >> 1), 8 * jb + 2 * tq + (e & 1))
            for k in range(BN // 16):
                # A layout of k-step k, register i holds two elements (low, high):
                # i 0: (g, 2tq..), 1: (g + 8, 2tq..), 2: (g, 2tq + 8..), 3: (g + 8, 2tq + 8..)
                for i in range(4):
                    want_row = 16 * w + g + 8 * (i & 1)
                    want_col = 16 * k + 2 * tq + 8 * (i >> 1)
                    lo, hi = dpos[8 * k + 2 * i], dpos[8 * k + 2 * i + 1]
                    assert lo == (want_row, want_col) and hi == (want_row, want_col + 1), (w, lane, k, i)
    print("P fragments: accumulator -> A operand mapping consistent")


if __name__ == "__main__":
    check_fragments()
    for bn, st in ((128, 2), (128, 3), (64, 4)):
        check(bn, st)
