#!/usr/bin/python3
"""Emulation of the wgmma attention kernels' data movement, for checking its
addressing where no GPU is at hand (not a test of the CUDA code).

The kernels (flash_forward_wgmma.cu, flash_backward_wgmma.cu, helpers in
wgmma_tiles.cuh) write Q, K, V (and dO, dS) into 128-byte swizzled shared tiles and hands the tensor cores matrix
descriptors. Here the shared memory is a byte array written the way
load_tile_sw128_async writes it, and each descriptor is read back the way the
PTX ISA defines it (canonical layouts of section "Shared Memory Matrix
Layout", Swizzle<3,4,3> applied to absolute addresses), so the operand every
wgmma sees can be compared with the matrix the kernel means, forward and
backward. Then one query
tile's forward runs with those operands, the accumulator / A-fragment
register layouts and the kernel's masking and online softmax, and is compared
with NumPy attention. Edit it together with the kernel.

  /usr/bin/python3 kernels/device/attention/wgmma_emulation.py    # a few seconds
"""
import numpy as np

rng = np.random.default_rng(7)
BQ, BK = 128, 128
LOG2E = 1.4426950408889634


# --- the kernel's side: swizzled tile writes (wgmma_tiles.cuh) -------------
def sw128_offset(rows, r, chunk):
    return (chunk // 8) * rows * 128 + r * 128 + (((chunk % 8) ^ (r % 8)) * 16)


def store_tile(smem, base, tile, tile_rows):
    """load_tile_sw128_async: tile [rows][D] bf16 (as uint16), zeros past rows."""
    rows, D = tile.shape
    for r in range(tile_rows):
        for c in range(D // 8):
            chunk = tile[r, 8 * c:8 * c + 8] if r < rows else np.zeros(8, np.uint16)
            o = base + sw128_offset(tile_rows, r, c)
            smem[o:o + 16] = chunk.astype('<u2').view(np.uint8)


def desc(addr, lbo, sbo):
    """sw128_desc: the 64-bit descriptor, as the kernel builds it."""
    return ((addr & 0x3FFFF) >> 4) | (((lbo & 0x3FFFF) >> 4) << 16) | \
        (((sbo & 0x3FFFF) >> 4) << 32) | (1 << 62)


# --- the hardware's side: what a descriptor means (PTX ISA) ----------------
def fields(d):
    assert d >> 62 == 1, "128-byte swizzle"
    assert (d >> 49) & 7 == 0, "base offset 0: patterns start 1024-byte aligned"
    return (d & 0x3FFF) << 4, ((d >> 16) & 0x3FFF) << 4, ((d >> 32) & 0x3FFF) << 4


def swizzle(a):  # Swizzle<3,4,3> on a byte address
    return a ^ (((a >> 7) & 7) << 4)


def read16(smem, a):
    assert a % 2 == 0
    return int(smem[a]) | (int(smem[a + 1]) << 8)


def read_k_major(smem, d, rows):
    """rows x 16 operand, K-major: ((8,m),(T,2k)):((8T,SBO),(1,T)), T = 8."""
    start, _, sbo = fields(d)
    out = np.zeros((rows, 16), np.uint16)
    for r in range(rows):
        for k in range(16):
            off = (r % 8) * 128 + (r // 8) * sbo + k * 2
            out[r, k] = read16(smem, swizzle(start + off))
    return out


def read_mn_major(smem, d, n):
    """16 x n operand (k rows), MN-major: ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO))."""
    start, lbo, sbo = fields(d)
    out = np.zeros((16, n), np.uint16)
    for k in range(16):
        for c in range(n):
            off = (c % 64) * 2 + (c // 64) * lbo + (k % 8) * 128 + (k // 8) * sbo
            out[k, c] = read16(smem, swizzle(start + off))
    return out


# --- bf16 helpers ----------------------------------------------------------
def to_bf16_bits(x):
    u = np.atleast_1d(np.asarray(x, np.float32)).view(np.uint32).astype(np.uint64)
    one, sh = np.uint64(1), np.uint64(16)
    r = (((u + np.uint64(0x7FFF) + ((u >> sh) & one)) >> sh) & np.uint64(0xFFFF)).astype(np.uint16)
    return r if np.ndim(x) else r[0]


def from_bits(b):
    f = (np.atleast_1d(np.asarray(b, np.uint32)) << np.uint32(16)).view(np.float32).astype(np.float64)
    return f if np.ndim(b) else f[0]


# --- register layouts (per warpgroup; w = warp in group, g, t) ---------------
def acc_pos(w, lane, i):  # d[i] of m64nN
    g, t = lane // 4, lane % 4
    e, j = i % 4, i // 4
    return 16 * w + g + 8 * (e // 2), 8 * j + 2 * t + e % 2


def afrag_pos(w, lane, reg, half):  # element `half` of A register `reg`
    g, t = lane // 4, lane % 4
    return 16 * w + g + 8 * (reg % 2), 2 * t + 8 * (reg // 2) + half


def check_operands(D):
    """Every descriptor the kernel builds reads the intended operand."""
    smem = np.zeros(256 * 1024, np.uint8)
    Q = rng.integers(0, 65535, (BQ, D), dtype=np.uint16)
    K = rng.integers(0, 65535, (BK - 5, D), dtype=np.uint16)  # a short last tile
    V = rng.integers(0, 65535, (BK - 5, D), dtype=np.uint16)
    q_base, k_base = 0, BQ * D * 2
    v_base = k_base + BK * D * 2
    store_tile(smem, q_base, Q, BQ)
    store_tile(smem, k_base, K, BK)
    store_tile(smem, v_base, V, BK)
    Kp = np.vstack([K, np.zeros((5, D), np.uint16)])
    Vp = np.vstack([V, np.zeros((5, D), np.uint16)])
    for wg in range(2):
        q_addr = q_base + wg * 64 * 128
        for kk in range(D // 16):
            half, off = kk // 4, (kk % 4) * 32
            a = read_k_major(smem, desc(q_addr + half * BQ * 128 + off, 16, 1024), 64)
            assert (a == Q[64 * wg:64 * wg + 64, 16 * kk:16 * kk + 16]).all(), ("Q", D, wg, kk)
            b = read_k_major(smem, desc(k_base + half * BK * 128 + off, 16, 1024), BK)
            assert (b == Kp[:, 16 * kk:16 * kk + 16]).all(), ("K", D, kk)
    for kk in range(BK // 16):
        b = read_mn_major(smem, desc(v_base + kk * 2048, BK * 128, 1024), D)
        assert (b == Vp[16 * kk:16 * kk + 16, :]).all(), ("V", D, kk)
    # No two chunks of a tile share an address, and 8 rows' chunk c spread over all banks.
    offs = [sw128_offset(BK, r, c) for r in range(BK) for c in range(D // 8)]
    assert len(set(offs)) == len(offs)
    for c in range(D // 8):
        assert len({sw128_offset(BK, r, c) % 128 for r in range(8)}) == 8


def check_backward_operands(D):
    """The backward's operands (flash_backward_wgmma.cu): BK = 128 keys, BQ = 64
    queries; every descriptor it builds, and dS written by its accumulator
    layout and read back as dQ's A operand."""
    BKb, BQb = 128, 64
    smem = np.zeros(256 * 1024, np.uint8)
    K = rng.integers(0, 65535, (BKb, D), dtype=np.uint16)
    V = rng.integers(0, 65535, (BKb, D), dtype=np.uint16)
    Q = rng.integers(0, 65535, (BQb - 3, D), dtype=np.uint16)  # a short query tile
    dO = rng.integers(0, 65535, (BQb - 3, D), dtype=np.uint16)
    k_base, v_base = 0, BKb * D * 2
    q_base = v_base + BKb * D * 2
    do_base = q_base + BQb * D * 2
    ds_base = do_base + BQb * D * 2
    for base, tile, rows in ((k_base, K, BKb), (v_base, V, BKb), (q_base, Q, BQb), (do_base, dO, BQb)):
        store_tile(smem, base, tile, rows)
    Qp = np.vstack([Q, np.zeros((3, D), np.uint16)])
    dOp = np.vstack([dO, np.zeros((3, D), np.uint16)])
    dS = rng.integers(0, 65535, (BQb, BKb), dtype=np.uint16)  # [query][key]
    for wg in range(2):
        k_rows, v_rows = k_base + wg * 64 * 128, v_base + wg * 64 * 128
        for kk in range(D // 16):  # Sᵀ = K Qᵀ, dPᵀ = V dOᵀ: K-major A and B
            half, off = kk // 4, (kk % 4) * 32
            cols = slice(16 * kk, 16 * kk + 16)
            a = read_k_major(smem, desc(k_rows + half * BKb * 128 + off, 16, 1024), 64)
            assert (a == K[64 * wg:64 * wg + 64, cols]).all(), ("K rows", D, wg, kk)
            a = read_k_major(smem, desc(v_rows + half * BKb * 128 + off, 16, 1024), 64)
            assert (a == V[64 * wg:64 * wg + 64, cols]).all(), ("V rows", D, wg, kk)
            b = read_k_major(smem, desc(q_base + half * BQb * 128 + off, 16, 1024), BQb)
            assert (b == Qp[:, cols]).all(), ("Q", D, kk)
            b = read_k_major(smem, desc(do_base + half * BQb * 128 + off, 16, 1024), BQb)
            assert (b == dOp[:, cols]).all(), ("dO", D, kk)
        for kk in range(BQb // 16):  # dV += Pᵀ dO, dK += dSᵀ Q: MN-major B
            rows = slice(16 * kk, 16 * kk + 16)
            b = read_mn_major(smem, desc(do_base + kk * 2048, BQb * 128, 1024), D)
            assert (b == dOp[rows]).all(), ("dO MN", D, kk)
            b = read_mn_major(smem, desc(q_base + kk * 2048, BQb * 128, 1024), D)
            assert (b == Qp[rows]).all(), ("Q MN", D, kk)
        # dS: each thread stores its dSᵀ accumulators (keys x queries) as [query][key].
        for w in range(4):
            for lane in range(32):
                g, t = lane // 4, lane % 4
                key_lo = wg * 64 + 16 * w + g
                for i in range(BQb // 2):
                    j, e = i // 4, i % 4
                    q, key = j * 8 + 2 * t + e % 2, key_lo + 8 * (e // 2)
                    assert acc_pos(w, lane, i) == (key - 64 * wg, q)
                    at = ds_base + sw128_offset(BQb, q, key // 8) + (key % 8) * 2
                    smem[at:at + 2] = np.array([dS[q, key]], '<u2').view(np.uint8)
    k_cols = lambda wg: k_base + (wg * BKb * 128 if D == 128 else wg * 64)  # noqa: E731
    for wg in range(2):  # dQ += dS K: dS K-major A, K MN-major B (D/2 columns each)
        for kk in range(BKb // 16):
            half, off = kk // 4, (kk % 4) * 32
            a = read_k_major(smem, desc(ds_base + half * BQb * 128 + off, 16, 1024), 64)
            assert (a == dS[:, 16 * kk:16 * kk + 16]).all(), ("dS", D, kk)
            b = read_mn_major(smem, desc(k_cols(wg) + kk * 2048, BKb * 128, 1024), D // 2)
            assert (b == K[16 * kk:16 * kk + 16, wg * D // 2:(wg + 1) * D // 2]).all(), ("K cols", D, wg, kk)


def forward_tile(Qt, Kt, Vt, qs, qp, ks, kp, scale, D):
    """One 128-query tile over all key tiles, register by register as the
    kernel computes it (both warpgroups; lanes of a warp as rows of arrays)."""
    nk = Kt.shape[0]
    smem = np.zeros(256 * 1024, np.uint8)
    q_base, k_base = 0, BQ * D * 2
    v_base = k_base + BK * D * 2
    store_tile(smem, q_base, Qt, BQ)
    out = np.zeros((BQ, D)); lse = np.zeros(BQ)
    for wg in range(2):
        o = np.zeros((4, 32, D // 2))  # [warp][lane]: the O accumulator registers
        m = np.full((4, 32, 2), -np.inf); l = np.zeros((4, 32, 2))
        for kt in range((nk + BK - 1) // BK):
            krows = min(BK, nk - kt * BK)
            store_tile(smem, k_base, Kt[kt * BK:kt * BK + krows], BK)
            store_tile(smem, v_base, Vt[kt * BK:kt * BK + krows], BK)
            tsam = [ks[kt * BK + c] if c < krows else -1 for c in range(BK)]
            tpos = [kp[kt * BK + c] if c < krows else 0 for c in range(BK)]
            S = np.zeros((64, BK))  # S = Q Kᵀ over D/16 k steps
            q_addr = q_base + wg * 64 * 128
            for kk in range(D // 16):
                half, off = kk // 4, (kk % 4) * 32
                a = from_bits(read_k_major(smem, desc(q_addr + half * BQ * 128 + off, 16, 1024), 64))
                b = from_bits(read_k_major(smem, desc(k_base + half * BK * 128 + off, 16, 1024), BK))
                S += a @ b.T
            s = np.zeros((4, 32, BK // 2))  # scale and mask, in the kernel's terms
            for w in range(4):
                for lane in range(32):
                    t = lane % 4
                    for i in range(BK // 2):
                        e, j = i % 4, i // 4
                        r = wg * 64 + 16 * w + lane // 4 + 8 * (e // 2)
                        c = j * 8 + 2 * t + e % 2
                        x = S[acc_pos(w, lane, i)] * scale * LOG2E
                        s[w, lane, i] = -np.inf if tsam[c] != qs[r] or tpos[c] > qp[r] else x
            for w in range(4):  # online softmax; the shuffles: a row's 4 lanes
                for i in range(2):
                    idx = [4 * j + 2 * i + h for j in range(BK // 8) for h in range(2)]
                    oidx = [4 * j + 2 * i + h for j in range(D // 8) for h in range(2)]
                    own = s[w][:, idx].max(axis=1)
                    for lane in range(32):
                        mx = max(own[(lane // 4) * 4 + u] for u in range(4))
                        m_new = max(m[w, lane, i], mx)
                        base = 0.0 if m_new == -np.inf else m_new
                        corr = 2.0 ** (m[w, lane, i] - base)
                        s[w, lane, idx] = 2.0 ** (s[w, lane, idx] - base)
                        l[w, lane, i] = l[w, lane, i] * corr + s[w, lane, idx].sum()
                        m[w, lane, i] = m_new
                        o[w, lane, oidx] *= corr
            # O += P V: each 64 x 16 A operand rebuilt from the packed fragments.
            for kk in range(BK // 16):
                A = np.zeros((64, 16))
                for w in range(4):
                    for lane in range(32):
                        sl = s[w, lane]
                        for reg in range(4):  # pf[kk][reg] = pack(s[8kk + 2reg], s[8kk + 2reg + 1])
                            for h in range(2):
                                A[afrag_pos(w, lane, reg, h)] = from_bits(to_bf16_bits(sl[8 * kk + 2 * reg + h]))
                B = from_bits(read_mn_major(smem, desc(v_base + kk * 2048, BK * 128, 1024), D))
                C = A @ B
                for w in range(4):
                    for lane in range(32):
                        for i in range(D // 2):
                            o[w, lane, i] += C[acc_pos(w, lane, i)]
        for w in range(4):  # epilogue
            for lane in range(32):
                t = lane % 4
                for i in range(2):
                    r = wg * 64 + 16 * w + lane // 4 + 8 * i
                    tot = sum(l[w, (lane // 4) * 4 + u, i] for u in range(4))
                    inv = 1.0 / tot if tot > 0 else 0.0
                    for j in range(D // 8):
                        out[r, j * 8 + 2 * t] = o[w, lane, 4 * j + 2 * i] * inv
                        out[r, j * 8 + 2 * t + 1] = o[w, lane, 4 * j + 2 * i + 1] * inv
                    lse[r] = m[w, lane, i] * np.log(2) + np.log(tot) if tot > 0 else -np.inf
    return out, lse


def check_forward(D):
    """A query tile of packed documents (odd lengths, a short tail) over 2 key tiles."""
    lens = [37, 90, 1, 64, 50]  # 242 tokens: keys span 2 tiles, the last one short
    qs = np.concatenate([[d] * n for d, n in enumerate(lens)])
    qp = np.concatenate([np.arange(n) for n in lens])
    n = len(qs)
    Q = to_bf16_bits(rng.standard_normal((n, D)))
    K = to_bf16_bits(rng.standard_normal((n, D)))
    V = to_bf16_bits(rng.standard_normal((n, D)))
    scale = 1 / np.sqrt(D)
    for q0 in (0, BQ):
        rows = min(BQ, n - q0)
        Qt = np.vstack([Q[q0:q0 + rows], np.zeros((BQ - rows, D), np.uint16)])
        qs_t = list(qs[q0:q0 + rows]) + [-2] * (BQ - rows)
        qp_t = list(qp[q0:q0 + rows]) + [0] * (BQ - rows)
        out, lse = forward_tile(Qt, K, V, qs_t, qp_t, qs, qp, scale, D)
        Qf, Kf, Vf = from_bits(Q), from_bits(K), from_bits(V)
        for r in range(rows):
            i = q0 + r
            vis = (qs == qs[i]) & (qp <= qp[i])
            sc = Kf[vis] @ Qf[i] * scale
            ref_lse = np.log(np.exp(sc - sc.max()).sum()) + sc.max()
            ref = np.exp(sc - ref_lse) @ Vf[vis]
            assert abs(lse[r] - ref_lse) < 1e-9, (D, i, lse[r], ref_lse)
            err = np.abs(out[r] - ref).max() / max(np.abs(ref).max(), 1e-9)
            assert err < 1e-2, (D, i, err)  # P is rounded to bf16, as on the GPU


def main():
    for D in (64, 128):
        check_operands(D)
    print("operands: every Q, K, V descriptor reads its intended 16-wide slice (D 64, 128)")
    for D in (64, 128):
        check_backward_operands(D)
    print("backward operands: K, V, Q, dO, dS and dQ's K columns as intended (D 64, 128)")
    for D in (64, 128):
        check_forward(D)
    print("forward: packed documents, odd lengths, short tiles match NumPy (D 64, 128)")


if __name__ == "__main__":
    main()
