#!/usr/bin/python3
"""Lane-level emulation of the mma.sync attention kernels, for checking their
index arithmetic where no GPU is at hand (not a test of the CUDA code).

It models ldmatrix(.trans) and mma.sync.m16n8k16 as the PTX ISA specifies
their fragment layouts, transcribes the index expressions of
flash_forward_mma.cu and flash_backward_mma.cu (tiles, masks, the unmasked
path, online softmax, dS through shared memory, dQ/dK/dV accumulation), and
compares forward (out, lse) and backward (dq, dk, dv) with NumPy attention on
packed documents with GQA. Edit it together with the kernels.

  /usr/bin/python3 kernels/device/attention/mma_emulation.py    # about 25 s
"""
import math

import numpy as np
rng = np.random.default_rng(1)
def bf(x): # round to bf16 (nearest even)
    x = np.atleast_1d(np.asarray(x, dtype=np.float32)); u = x.view(np.uint32).astype(np.uint64)
    S = np.uint64(16)
    r = ((u + np.uint64(0x7FFF) + ((u >> S) & np.uint64(1))) >> S) << S
    out = r.astype(np.uint32).view(np.float32).astype(np.float64)
    return out if out.size > 1 else float(out[0])
LANES = range(32)
def ldm(flat, offs, trans=False):  # offs[lane] = element offset of the 8-element row
    regs = [[None]*4 for _ in LANES]
    for i in range(4):
        M = np.array([flat[offs[8*i+r]:offs[8*i+r]+8] for r in range(8)])
        for l in LANES:
            regs[l][i] = (M[l//4, 2*(l%4)], M[l//4, 2*(l%4)+1]) if not trans else (M[2*(l%4), l//4], M[2*(l%4)+1, l//4])
    return regs
def mma(c, a, b0, b1):  # c: list of 32 lists of 4; a: 32 x 4 pairs; b0,b1: 32 pairs
    A = np.zeros((16,16)); B = np.zeros((16,8)); C = np.zeros((16,8))
    for l in LANES:
        g,t = l//4, l%4
        A[g,2*t:2*t+2]=a[l][0]; A[g+8,2*t:2*t+2]=a[l][1]; A[g,2*t+8:2*t+10]=a[l][2]; A[g+8,2*t+8:2*t+10]=a[l][3]
        B[2*t:2*t+2,g]=b0[l]; B[2*t+8:2*t+10,g]=b1[l]
        C[g,2*t:2*t+2]=c[l][0:2]; C[g+8,2*t:2*t+2]=c[l][2:4]
    Dm = A@B + C
    for l in LANES:
        g,t = l//4, l%4
        c[l][:] = [Dm[g,2*t],Dm[g,2*t+1],Dm[g+8,2*t],Dm[g+8,2*t+1]]
def zeros(n): return [[[0.0]*4 for _ in LANES] for _ in range(n)]
def rows_by_rows(acc, K, NT, aflat, aoff, lda, bflat, boff, ldb):
    for kk in range(K//16):
        af = ldm(aflat, [aoff + (l%16)*lda + kk*16 + (l//16)*8 for l in LANES])
        for nn in range(NT//2):
            b = ldm(bflat, [boff + (nn*16 + l%8 + (l//16)*8)*ldb + kk*16 + ((l//8)%2)*8 for l in LANES])
            mma(acc[2*nn], af, [b[l][0] for l in LANES], [b[l][1] for l in LANES])
            mma(acc[2*nn+1], af, [b[l][2] for l in LANES], [b[l][3] for l in LANES])
def frags_by_rows(acc, CT, NT, c, bflat, boff, ldb):
    for kk in range(CT//2):
        af = [[tuple(bf(np.array(c[2*kk][l][0:2]))), tuple(bf(np.array(c[2*kk][l][2:4]))), tuple(bf(np.array(c[2*kk+1][l][0:2]))), tuple(bf(np.array(c[2*kk+1][l][2:4])))] for l in LANES]
        for nn in range(NT//2):
            b = ldm(bflat, [boff + (kk*16 + l%8 + ((l//8)%2)*8)*ldb + nn*16 + (l//16)*8 for l in LANES], trans=True)
            mma(acc[2*nn], af, [b[l][0] for l in LANES], [b[l][1] for l in LANES])
            mma(acc[2*nn+1], af, [b[l][2] for l in LANES], [b[l][3] for l in LANES])
def ranges(sam, pos, tile):
    out=[]
    for b in range(0, len(sam), tile):
        s=sam[b:b+tile]; p=pos[b:b+tile]; out.append((min(s),max(s),min(p),max(p)))
    return out
def may_see(q,k): return not (k[1] < q[0] or k[0] > q[1] or k[2] > q[3])
log2e = 1.4426950408889634; ln2 = 0.6931471805599453

# problem
D = 64; H = 2; KVH = 1; group = H//KVH
docs = [5, 150, 300]   # 300-token doc spans whole 128-query tiles
sam = np.concatenate([[i]*L for i,L in enumerate(docs)]).astype(int)
pos = np.concatenate([np.arange(L) for L in docs]).astype(int)
n = len(sam)
Q = bf(rng.standard_normal((n, H*D))*0.5); K = bf(rng.standard_normal((n, KVH*D))*0.5); V = bf(rng.standard_normal((n, KVH*D)))
dO = bf(rng.standard_normal((n, H*D)))
scale = 1/math.sqrt(D)
# reference
mask = (sam[:,None]==sam[None,:]) & (pos[None,:] <= pos[:,None])
ref_o = np.zeros((n,H*D)); ref_lse = np.zeros((n,H)); ref_dq=np.zeros((n,H*D)); ref_dk=np.zeros((n,KVH*D)); ref_dv=np.zeros((n,KVH*D))
for h in range(H):
    g_ = h//group
    S = Q[:,h*D:(h+1)*D] @ K[:,g_*D:(g_+1)*D].T * scale
    S = np.where(mask, S, -np.inf); m = S.max(1, keepdims=True); P = np.exp(S-m); l = P.sum(1, keepdims=True); P/=l
    ref_o[:,h*D:(h+1)*D] = P @ V[:,g_*D:(g_+1)*D]; ref_lse[:,h] = (m + np.log(l))[:,0]
    dOh = dO[:,h*D:(h+1)*D]; dP = dOh @ V[:,g_*D:(g_+1)*D].T; delta = (dOh*ref_o[:,h*D:(h+1)*D]).sum(1, keepdims=True)
    dS = P*(dP-delta)
    ref_dq[:,h*D:(h+1)*D] = scale*dS@K[:,g_*D:(g_+1)*D]; ref_dk[:,g_*D:(g_+1)*D] += scale*dS.T@Q[:,h*D:(h+1)*D]; ref_dv[:,g_*D:(g_+1)*D] += P.T@dOh
def err(a,b): return np.abs(a-b).max()/np.abs(b).max()

# ---------------- forward kernel emulation ----------------
BQ, BK, LD = 128, 64, D+8
q_ranges = ranges(sam,pos,BQ); k_ranges = ranges(sam,pos,BK)
out = np.zeros((n,H*D)); lse_out = np.zeros((n,H))
n_qt = (n+BQ-1)//BQ; n_kt = (n+BK-1)//BK
def load_tile(src, row0, col0, rows, tile_rows):
    t = np.zeros((tile_rows, LD)); t[:rows,:D] = src[row0:row0+rows, col0:col0+D]; return t.ravel()
for qt in range(n_qt):
  for h in range(H):
    kvh = h//group; row0 = qt*BQ; rows = min(BQ, n-row0); qr = q_ranges[qt]
    sq = load_tile(Q, row0, h*D, rows, BQ)
    for warp in range(8):
        r_lo = [warp*16 + l//4 for l in LANES]
        qs = [[sam[row0+r_lo[l]+8*i] if r_lo[l]+8*i < rows else -2 for i in range(2)] for l in LANES]
        qp = [[pos[row0+r_lo[l]+8*i] if r_lo[l]+8*i < rows else 0 for i in range(2)] for l in LANES]
        o = zeros(D//8); m = [[-np.inf]*2 for _ in LANES]; lsum = [[0.0]*2 for _ in LANES]
        qf = [ldm(sq, [(warp*16 + l%16)*LD + kk*16 + (l//16)*8 for l in LANES]) for kk in range(D//16)]
        for kt in range(n_kt):
            if not may_see(qr, k_ranges[kt]): continue
            k0 = kt*BK; krows = min(BK, n-k0)
            sk = load_tile(K, k0, kvh*D, krows, BK); sv = load_tile(V, k0, kvh*D, krows, BK)
            ksam = [sam[k0+c] if c < krows else -1 for c in range(BK)]; kpos = [pos[k0+c] if c < krows else 0 for c in range(BK)]
            NT = BK//8; s = zeros(NT)
            for nn in range(BK//16):
                for kk in range(D//16):
                    b = ldm(sk, [(nn*16 + l%8 + (l//16)*8)*LD + kk*16 + ((l//8)%2)*8 for l in LANES])
                    mma(s[2*nn], qf[kk], [b[l][0] for l in LANES], [b[l][1] for l in LANES])
                    mma(s[2*nn+1], qf[kk], [b[l][2] for l in LANES], [b[l][3] for l in LANES])
            kr = k_ranges[kt]
            full = qr[0]==qr[1] and kr[0]==kr[1] and qr[0]==kr[0] and kr[3] <= qr[2] and (kt+1)*BK <= n and rows == BQ
            for l in LANES:
                t = l%4
                for j in range(NT):
                    for e in range(4):
                        x = s[j][l][e]*scale*log2e
                        if not full:
                            i = e//2; c = j*8+2*t+(e%2)
                            if ksam[c] != qs[l][i] or kpos[c] > qp[l][i]: x = -np.inf
                        s[j][l][e] = x
            mxs = [[max(max(max(s[j][ll][2*i], s[j][ll][2*i+1]) for j in range(NT)) for ll in (l^0, l^1, l^2, l^3)) for i in range(2)] for l in LANES]
            for l in LANES:
                for i in range(2):
                    s_mx = mxs[l][i]
                    m_new = max(m[l][i], s_mx); base = 0.0 if m_new == -np.inf else m_new
                    corr = 2.0**(m[l][i]-base)
                    tot = 0.0
                    for j in range(NT):
                        for e2 in (2*i, 2*i+1):
                            s[j][l][e2] = 2.0**(s[j][l][e2]-base); tot += s[j][l][e2]
                    lsum[l][i] = lsum[l][i]*corr + tot; m[l][i] = m_new
                    for j in range(D//8):
                        o[j][l][2*i] *= corr; o[j][l][2*i+1] *= corr
            frags_by_rows(o, NT, D//8, s, sv, 0, LD)
        for l in LANES:
            t = l%4
            for i in range(2):
                tot = sum(lsum[ll][i] for ll in (l&~3, (l&~3)+1, (l&~3)+2, (l&~3)+3))
                r = r_lo[l] + 8*i
                if r >= rows: continue
                inv = 1/tot if tot > 0 else 0
                for j in range(D//8):
                    out[row0+r, h*D + j*8+2*t] = o[j][l][2*i]*inv; out[row0+r, h*D + j*8+2*t+1] = o[j][l][2*i+1]*inv
                if t == 0: lse_out[row0+r, h] = m[l][i]*ln2 + math.log(tot) if tot > 0 else -np.inf
print("forward  max error: out %.2e, lse %.2e" % (err(out, ref_o), np.abs(lse_out - ref_lse).max()))

# ---------------- backward kernel emulation ----------------
BQ, BK = 64, 128; LDS = BK+8
q_ranges = ranges(sam,pos,BQ); k_ranges = ranges(sam,pos,BK)
dq = np.zeros((n,H*D)); dk = np.zeros((n,KVH*D)); dv = np.zeros((n,KVH*D))
delta_all = np.stack([(dO[:,h*D:(h+1)*D]*out[:,h*D:(h+1)*D]).sum(1) for h in range(H)], 1)
lse_in = lse_out.astype(np.float32).astype(np.float64)
n_qt = (n+BQ-1)//BQ; n_kt = (n+BK-1)//BK
for kt in range(n_kt):
  for h in range(H):
    kvh = h//group; k0 = kt*BK; krows = min(BK, n-k0); kr = k_ranges[kt]
    vis_q = [qt for qt in range(n_qt) if may_see(q_ranges[qt], kr)]
    if not vis_q: continue
    sk = load_tile(K, k0, kvh*D, krows, BK); sv = load_tile(V, k0, kvh*D, krows, BK)
    DT = D//8; NQ = BQ//8
    dkw = [zeros(DT) for _ in range(8)]; dvw = [zeros(DT) for _ in range(8)]
    for qt in vis_q:
        row0 = qt*BQ; rows = min(BQ, n-row0); qr = q_ranges[qt]
        sq = load_tile(Q, row0, h*D, rows, BQ); sdo = load_tile(dO, row0, h*D, rows, BQ)
        qs = [sam[row0+r] if r < rows else -2 for r in range(BQ)]; qp = [pos[row0+r] if r < rows else 0 for r in range(BQ)]
        lse2 = [lse_in[row0+r, h]*log2e if r < rows else 0.0 for r in range(BQ)]
        dl = [delta_all[row0+r, h] if r < rows else 0.0 for r in range(BQ)]
        full = qr[0]==qr[1] and kr[0]==kr[1] and qr[0]==kr[0] and kr[3] <= qr[2] and rows == BQ and krows == BK
        sds = np.zeros(BQ*LDS)
        for warp in range(8):
            ks = [[sam[k0+warp*16+l//4+8*i] if warp*16+l//4+8*i < krows else -1 for i in range(2)] for l in LANES]
            kp = [[pos[k0+warp*16+l//4+8*i] if warp*16+l//4+8*i < krows else 0 for i in range(2)] for l in LANES]
            s = zeros(NQ)
            rows_by_rows(s, D, NQ, sk, warp*16*LD, LD, sq, 0, LD)
            for l in LANES:
                t = l%4
                for j in range(NQ):
                    for e in range(4):
                        i = e//2; c = j*8+2*t+(e%2); l2 = lse2[c]
                        visible = full or (ks[l][i] == qs[c] and kp[l][i] <= qp[c])
                        s[j][l][e] = 2.0**(s[j][l][e]*scale*log2e - l2) if (visible and l2 != -np.inf) else 0.0
            frags_by_rows(dvw[warp], NQ, DT, s, sdo, 0, LD)
            ds = zeros(NQ)
            rows_by_rows(ds, D, NQ, sv, warp*16*LD, LD, sdo, 0, LD)
            for l in LANES:
                t = l%4
                for j in range(NQ):
                    for e in range(4): ds[j][l][e] = s[j][l][e]*(ds[j][l][e] - dl[j*8+2*t+(e%2)])
            frags_by_rows(dkw[warp], NQ, DT, ds, sq, 0, LD)
            for l in LANES:
                g,t = l//4, l%4
                for j in range(NQ):
                    for e in range(4):
                        sds[(j*8+2*t+(e%2))*LDS + warp*16 + g + 8*(e//2)] = bf(ds[j][l][e])
        for warp in range(8):
            qr0 = (warp%4)*16; c0 = (warp//4)*(D//2)
            dqa = zeros(D//16)
            for kk in range(BK//16):
                af = ldm(sds, [(qr0 + l%16)*LDS + kk*16 + (l//16)*8 for l in LANES])
                for dd in range(D//32):
                    b = ldm(sk, [(kk*16 + l%8 + ((l//8)%2)*8)*LD + c0 + dd*16 + (l//16)*8 for l in LANES], trans=True)
                    mma(dqa[2*dd], af, [b[l][0] for l in LANES], [b[l][1] for l in LANES])
                    mma(dqa[2*dd+1], af, [b[l][2] for l in LANES], [b[l][3] for l in LANES])
            for l in LANES:
                g,t = l//4, l%4
                for j in range(D//16):
                    for e in range(4):
                        r = qr0 + g + 8*(e//2)
                        if r < rows: dq[row0+r, h*D + c0 + j*8+2*t+(e%2)] += scale*dqa[j][l][e]
    for warp in range(8):
        for l in LANES:
            g,t = l//4, l%4
            for i in range(2):
                key = warp*16+g+8*i
                if key >= krows: continue
                for j in range(DT):
                    for e in range(2):
                        dk[k0+key, kvh*D + j*8+2*t+e] += scale*dkw[warp][j][l][2*i+e]
                        dv[k0+key, kvh*D + j*8+2*t+e] += dvw[warp][j][l][2*i+e]
print("backward max error: dq %.2e, dk %.2e, dv %.2e" % (err(dq, ref_dq), err(dk, ref_dk), err(dv, ref_dv)))
worst = max(err(out, ref_o), err(dq, ref_dq), err(dk, ref_dk), err(dv, ref_dv))
print("within bf16 tolerance (1e-2)" if worst < 1e-2 else "MISMATCH")
raise SystemExit(0 if worst < 1e-2 else 1)
