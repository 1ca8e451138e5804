#!/usr/bin/python3
"""Compare two step dumps (meshloom train --dump-step N FILE).

The batch (tokens, and image patches where there are any) must be identical; the loss and every gradient tensor must agree to
a relative error of at most TOL (default 1e-5): |a - b| / |a| for the loss,
||a - b|| / ||a|| per gradient tensor. The parameters (before the step's
update) must be equal, or, with PARAMS_TOL, agree per tensor to that relative
error (dumps of later steps, after updates computed in another order). Prints
the worst tensor; exits 1 on a mismatch.

Usage: compare_dumps.py REFERENCE.h5 OTHER.h5 [TOL [PARAMS_TOL]]
"""
import sys

import h5py
import numpy as np


def main():
    if len(sys.argv) not in (3, 4, 5):
        sys.exit(__doc__)
    tol = float(sys.argv[3]) if len(sys.argv) >= 4 else 1e-5
    params_tol = float(sys.argv[4]) if len(sys.argv) == 5 else None
    a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
    names = ["batch/tokens", "batch/sample_lengths", "batch/source"]
    if "batch/patches" in a or "batch/patches" in b:  # image positions' inputs
        names.append("batch/patches")
    for name in names:
        if name not in a or name not in b or not np.array_equal(a[name][()], b[name][()]):
            print(f"FAIL: /{name} differs: the batches are not the same")
            return 1
    la, lb = float(a["loss"][()]), float(b["loss"][()])
    worst = ("loss", abs(la - lb) / abs(la))
    worst_params = ("", 0.0)
    for name in a["grads"]:
        ga, gb = a["grads"][name][()].astype(np.float64), b["grads"][name][()].astype(np.float64)
        if ga.shape != gb.shape:
            print(f"FAIL: grads/{name} shapes {ga.shape} vs {gb.shape}")
            return 1
        na = np.linalg.norm(ga)
        err = np.linalg.norm(ga - gb) / na if na > 0 else np.linalg.norm(gb)
        if err > worst[1]:
            worst = ("grads/" + name, err)
        pa, pb = a["params"][name][()], b["params"][name][()]
        if params_tol is None:
            if not np.array_equal(pa, pb):
                print(f"FAIL: params/{name} differ before the update")
                return 1
        else:
            pa, pb = pa.astype(np.float64), pb.astype(np.float64)
            err = np.linalg.norm(pa - pb) / max(np.linalg.norm(pa), 1e-30)
            if err > worst_params[1]:
                worst_params = ("params/" + name, err)
    ok = worst[1] <= tol and (params_tol is None or worst_params[1] <= params_tol)
    line = (f"{'ok' if ok else 'FAIL'}: loss {la:.6f} vs {lb:.6f}; worst relative error "
            f"{worst[1]:.2e} in {worst[0]} (tolerance {tol:g})")
    if params_tol is not None:
        line += (f"; parameters: worst {worst_params[1]:.2e} in {worst_params[0] or '-'} "
                 f"(tolerance {params_tol:g})")
    print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
