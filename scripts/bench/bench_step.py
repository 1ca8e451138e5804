#!/usr/bin/python3
"""Helpers of scripts/bench/bench_step.sh (Debian /usr/bin/python3 + matplotlib).

  bench_step.py busy [SECONDS]
      cores kept busy by everything running on the machine (from /proc/stat)
  bench_step.py watch --rank R --metrics FILE --out CSV -- COMMAND...
      runs COMMAND (an mpirun), samples the CPU time of world rank R's process
      and the time at which each line of FILE appears (rank 0 writes a line as
      soon as the step's acknowledgements arrive)
  bench_step.py mfu --bench TXT --train METRICS --watch CSV --threads N --out CSV
  bench_step.py hdp --hdp METRICS --static METRICS --out CSV [--skip 2]
  bench_step.py calib METRICS --out CSV [--skip 2]
      the k = 1 micro-batches of a run as `meshloom plan --calibrate` reads them
  bench_step.py errors --layout NAME --ranks N --trainers T --fit TXT --metrics METRICS
                       --points CSV --rows CSV [--skip 2] [--load L]
      each trainer's predicted vs measured compute time per step
  bench_step.py report --dir bench/results
      markdown tables of parts 2 and 3, and step.png
"""
import argparse
import csv
import json
import os
import re
import statistics as st
import subprocess
import sys
import time


def steps_of(path):
    return [r for r in map(json.loads, open(path)) if "step" in r]


def cpu_counters():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle, sum(v)


def cmd_busy(a):
    b0, t0 = cpu_counters()
    time.sleep(a.seconds)
    b1, t1 = cpu_counters()
    print(f"{os.cpu_count() * (b1 - b0) / max(1, t1 - t0):.2f}")


def parent_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def job_pids(root):
    """{world rank: pid} of the meshloom processes descending from `root`."""
    found = {}
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() != "meshloom":
                    continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
            q = pid
            while q > 1 and q != root:
                q = parent_of(q)
        except (OSError, ValueError):
            continue
        if q == root and b"OMPI_COMM_WORLD_RANK" in env:
            found[int(env[b"OMPI_COMM_WORLD_RANK"])] = pid
    return found


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cmd_watch(a):
    """Samples, each time the metrics file grows: seconds since start, CPU
    seconds of rank R, of the whole job, and of the whole machine."""
    proc = subprocess.Popen(a.command)
    pids, lines, rows = {}, 0, []
    start = time.monotonic()
    hz = os.sysconf("SC_CLK_TCK")
    while proc.poll() is None:
        time.sleep(0.02)
        if a.rank not in pids:
            pids = job_pids(proc.pid)
            continue
        try:
            n = sum(1 for _ in open(a.metrics)) if os.path.exists(a.metrics) else 0
            if n != lines:
                lines = n
                job = 0.0
                for pid in pids.values():
                    try:
                        job += cpu_seconds(pid)
                    except OSError:
                        pass
                rows.append((time.monotonic() - start, cpu_seconds(pids[a.rank]), job,
                             cpu_counters()[0] / hz, n))
        except OSError:
            pass
    with open(a.out, "w") as f:
        f.write("t,cpu,job_cpu,machine_cpu,lines\n")
        for r in rows:
            f.write("%.4f,%.3f,%.3f,%.3f,%d\n" % r)
    sys.exit(proc.returncode)


def bench_numbers(path):
    text = open(path).read()
    wall = re.search(r"MFU \(wall clock, best iteration\): ([0-9.]+) GFLOP/s = ([0-9.]+)% of the "
                     r"(\d+)-thread sgemm peak ([0-9.]+)", text)
    cpu = re.search(r"MFU \(cpu-time based\): +([0-9.]+) GFLOP/s = ([0-9.]+)%", text)
    best = re.search(r"best: forward ([0-9.]+) s \+ backward ([0-9.]+) s = ([0-9.]+) s", text)
    model = re.search(r"model: (.*?); ([0-9]+) tokens in ([0-9]+) documents; ([0-9.]+) TFLOP", text)
    return {"wall_gflops": float(wall.group(1)), "wall_mfu": float(wall.group(2)) / 100,
            "threads": int(wall.group(3)), "peak": float(wall.group(4)),
            "cpu_gflops": float(cpu.group(1)), "cpu_mfu": float(cpu.group(2)) / 100,
            "seconds": float(best.group(3)), "model": model.group(1), "tokens": int(model.group(2)),
            "docs": int(model.group(3)), "tflop": float(model.group(4))}


def cmd_mfu(a):
    b = bench_numbers(a.bench)
    rows = steps_of(a.train)
    # Rank 0 writes step s's line when its acknowledgement arrives, except the
    # last `prefetch` steps, whose lines come together at the end; so the CPU
    # time is taken over steps 1..N-1 together: from the moment step 0's line
    # appeared to the moment the last step's did.
    watch = [{k: float(v) for k, v in w.items()} for w in csv.DictReader(open(a.watch))]
    first = next((w for w in watch if w["lines"] >= 1), None)
    last = next((w for w in watch if w["lines"] >= len(rows)), None)
    util = other = None
    if first and last and last["t"] > first["t"]:
        dt = last["t"] - first["t"]
        util = min(1.0, (last["cpu"] - first["cpu"]) / (a.threads * dt))
        other = max(0.0, (last["machine_cpu"] - first["machine_cpu"] - last["job_cpu"] + first["job_cpu"]) / dt)
    # The trainer's own measured peak (what metrics' mfu is relative to; null
    # where that peak proved too low).
    own_peak = max((r["trainers"][0]["flops"] / r["trainers"][0]["compute"] / r["mfu"] / 1e9
                    for r in rows if r["mfu"]), default=0)
    peak = max(b["peak"], own_peak)  # the higher measured peak: the conservative one
    out = []
    for r in rows[1:]:  # step 0 warms up
        t = r["trainers"][0]
        out.append({"step": str(r["step"]), "tokens": t["tokens"], "flops": t["flops"],
                    "seconds": t["compute"]})
    out.append({"step": f"{rows[1]['step']}-{rows[-1]['step']}", "tokens": sum(r["tokens"] for r in out),
                "flops": sum(r["flops"] for r in out), "seconds": sum(r["seconds"] for r in out)})
    for r in out:
        r["gflops"] = r["flops"] / r["seconds"] / 1e9
        r["mfu"] = r["gflops"] / peak
    best = max(out[:-1], key=lambda r: r["mfu"])
    total = out[-1]
    total["util"] = util
    total["mfu_cpu"] = total["mfu"] / util if util else None
    opt = lambda x: "" if x is None else f"{x:.4f}"
    with open(a.out, "w") as f:
        f.write("source,step,tokens,tflop,seconds,gflops_wall,mfu_wall,cpu_share,mfu_cpu,peak_gflops\n")
        f.write(f"model_bench,best,{b['tokens']},{b['tflop']:.4f},{b['seconds']:.3f},"
                f"{b['wall_gflops']:.1f},{b['wall_mfu']:.4f},,{b['cpu_mfu']:.4f},{b['peak']:.1f}\n")
        for r in out:
            f.write(f"train,{r['step']},{r['tokens']},{r['flops'] / 1e12:.4f},{r['seconds']:.3f},"
                    f"{r['gflops']:.1f},{r['mfu']:.4f},{opt(r.get('util'))},{opt(r.get('mfu_cpu'))},"
                    f"{peak:.1f}\n")
    pct = lambda x: "n/a" if x is None else f"{100 * x:.1f}%"
    print(f"Measured sgemm peak, {b['threads']} threads (best of several 2048³ products): "
          f"{b['peak']:.1f} GFLOP/s in model_bench, {own_peak:.1f} GFLOP/s by the training run "
          f"at its start. model_bench's MFU is against its own peak, the training run's against "
          f"the higher of the two ({peak:.1f} GFLOP/s). During the training run's steps 1-{rows[-1]['step']}, "
          f"other work kept {'n/a' if other is None else f'{other:.2f}'} cores busy.\n")
    print("| measurement | tokens | TFLOP | seconds (fwd+bwd) | GFLOP/s (wall) | MFU (wall clock) "
          "| trainer's share of its 2 cores | MFU (CPU time) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    print(f"| model_bench, best of 3 iterations ({b['docs']} documents) | {b['tokens']} | {b['tflop']:.3f} | "
          f"{b['seconds']:.3f} | {b['wall_gflops']:.1f} | **{pct(b['wall_mfu'])}** | — | "
          f"{pct(b['cpu_mfu'])} |")
    for r in out:
        last_row = r is total
        name = (f"`meshloom train`, 1 trainer, steps {r['step']} together" if last_row else
                f"`meshloom train`, 1 trainer, step {r['step']}{' (best)' if r is best else ''}")
        bold = "**" if r is best else ""
        print(f"| {name} | {r['tokens']} | {r['flops'] / 1e12:.3f} | {r['seconds']:.3f} | "
              f"{r['gflops']:.1f} | {bold}{pct(r['mfu'])}{bold} | "
              f"{pct(r.get('util')) if last_row else '—'} | {pct(r.get('mfu_cpu')) if last_row else '—'} |")


def cmd_hdp(a):
    h, s = steps_of(a.hdp), steps_of(a.static)
    hh, sh = [r["data_hash"] for r in h], [r["data_hash"] for r in s]
    if hh != sh:
        sys.exit("bench_step.py: the two runs trained on different batches (data_hash differs)")
    with open(a.out, "w") as f:
        f.write("step,data_hash,hdp_s,static_s,hdp_imbalance,static_imbalance,"
                "hdp_max_k,static_max_k,hdp_micro,static_micro\n")
        for x, y in zip(h, s):
            mk = lambda r: max(int(m[2]) for t in r["trainers"] for m in t["micro"])
            nm = lambda r: sum(len(t["micro"]) for t in r["trainers"])
            f.write(f"{x['step']},{x['data_hash']},{x['seconds']:.4f},{y['seconds']:.4f},"
                    f"{x['imbalance']:.4f},{y['imbalance']:.4f},{mk(x)},{mk(y)},{nm(x)},{nm(y)}\n")


def cmd_calib(a):
    with open(a.out, "w") as f:
        run = os.path.basename(os.path.dirname(os.path.abspath(a.metrics)))
        f.write(f"# k = 1 micro-batches of run {run} (scripts/bench/bench_step.sh), steps >= {a.skip}\n"
                "tokens,sum_l2,seconds\n")
        n = 0
        for r in steps_of(a.metrics)[a.skip:]:
            for t in r["trainers"]:
                for tokens, l2, k, sec in t["micro"]:
                    if k == 1:
                        f.write(f"{tokens:.0f},{l2:.0f},{sec:.6f}\n")
                        n += 1
    if n < 3:
        sys.exit(f"bench_step.py: only {n} k = 1 micro-batches in {a.metrics}")


def micro_cost(m, coef):
    """The cost model's time of one micro-batch [tokens, sum L^2/k, k, seconds]
    (lib/plan/cost/cost_model.hpp; ring messages on one machine cost ~nothing next
    to a ring step's attention, so a ring member's time is b*tokens + g + k*s)."""
    tokens, l2, _, _ = m  # k ring steps of s = a * l2 / k each
    return coef["b"] * tokens + coef["g"] + coef["a"] * l2


def processor_sharing(work, cores):
    """Finish times of jobs that start together and share `cores` fairly:
    while n are unfinished, each runs at min(1, cores / n)."""
    order = sorted(range(len(work)), key=lambda i: work[i])
    done, t, prev = [0.0] * len(work), 0.0, 0.0
    for j, i in enumerate(order):
        t += (work[i] - prev) / min(1.0, cores / (len(work) - j))
        prev = work[i]
        done[i] = t
    return done


def cmd_errors(a):
    fit = open(a.fit).read()
    coef = {k: float(re.search(k + r"=([0-9.e+-]+)", fit).group(1)) for k in ("a", "b", "g")}
    r2 = re.search(r"R\^2 ([0-9.e+-]+)", fit)
    rows = steps_of(a.metrics)[a.skip:]
    if a.cores:  # post hoc: the fit's per-trainer work, then the cores shared fairly
        for r in rows:
            work = [sum(micro_cost(m, coef) for m in t["micro"]) for t in r["trainers"]]
            for t, p in zip(r["trainers"], processor_sharing(work, a.cores)):
                t["predicted"] = p
    new = not os.path.exists(a.points)
    errs, signed, ring_errs, flat_errs = [], [], [], []
    with open(a.points, "a") as f:
        if new:
            f.write("layout,ranks,trainers,step,trainer,predicted_s,measured_s,rings\n")
        for r in rows:
            for t in r["trainers"]:
                if t["tokens"] == 0:  # an idle trainer: nothing to predict
                    continue
                rings = sum(1 for m in t["micro"] if m[2] > 1)
                e = (t["predicted"] - t["compute"]) / t["compute"]
                errs.append(abs(e))
                signed.append(e)
                (ring_errs if rings else flat_errs).append(abs(e))
                f.write(f"{a.layout},{a.ranks},{a.trainers},{r['step']},{t['trainer']},"
                        f"{t['predicted']:.5f},{t['compute']:.5f},{rings}\n")
    p90 = lambda v: sorted(v)[int(round(0.9 * (len(v) - 1)))] if v else float("nan")
    med = lambda v: st.median(v) if v else float("nan")
    new = not os.path.exists(a.rows)
    with open(a.rows, "a") as f:
        if new:
            f.write("layout,ranks,trainers,samples,median_abs_error,p90_abs_error,median_signed_error,"
                    "within_20pct,median_error_ring_trainers,median_error_k1_trainers,"
                    "mean_step_s,a,b,g,r2,load\n")
        f.write(f"{a.layout},{a.ranks},{a.trainers},{len(errs)},{med(errs):.4f},{p90(errs):.4f},"
                f"{med(signed):.4f},{sum(e <= 0.2 for e in errs) / len(errs):.4f},"
                f"{med(ring_errs):.4f},{med(flat_errs):.4f},"
                f"{st.mean(r['seconds'] for r in rows):.4f},{coef['a']:.4e},{coef['b']:.4e},"
                f"{coef['g']:.4e},{r2.group(1) if r2 else ''},{a.load}\n")


LAYOUTS = {
    "rings": "1 constructor + 1 loader + (ranks - 2) trainers, 1 thread each, sharing the 2 cores; "
             "seq_len 4096, C 2048 (samples longer than 2048 run in CP rings); the planner's prediction, "
             "calibrated at the same ranks",
    "whole": "the same ranks and trainers; C = seq_len = 4096 (no rings: every micro-batch k = 1); "
             "the planner's prediction, calibrated at the same ranks",
    "2trainers": "2 trainers (one core each) + 1 constructor + (ranks - 3) loaders; seq_len 4096, C 2048; "
                 "the planner's prediction, calibrated once, at 4 ranks",
    "rings+sharing": "the runs of `rings`, predicted after the fact (not by the planner): each trainer's "
                     "work from the 4-rank calibration, the 2 cores shared fairly among unfinished trainers",
    "whole+sharing": "the runs of `whole`, predicted the same way",
}


def cmd_report(a):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    d = a.dir
    parts = a.parts.split()
    hs = list(csv.DictReader(open(f"{d}/step_hdp_static.csv"))) if "2" in parts else []
    cm = list(csv.DictReader(open(f"{d}/step_costmodel.csv"))) if "3" in parts else []
    lays = [l for l in LAYOUTS if any(r["layout"] == l for r in cm)]
    if hs:
        report_hdp(hs, a.skip)
    if cm:
        report_costmodel(cm, lays, a.skip)
    panels = bool(hs) + len(lays)
    if not panels:
        return
    cols = min(3, panels)
    nrows = (panels + cols - 1) // cols
    fig, ax = plt.subplots(nrows, cols, figsize=(4.6 * cols, 4.2 * nrows), squeeze=False)
    ax = [x for row in ax for x in row]
    for x in ax[panels:]:
        x.axis("off")
    if hs:
        ax[0].plot([int(r["step"]) for r in hs], [float(r["static_s"]) for r in hs], marker="o", label="static")
        ax[0].plot([int(r["step"]) for r in hs], [float(r["hdp_s"]) for r in hs], marker="o", label="hdp")
        ax[0].set(title="HDP vs static, same batches", xlabel="step", ylabel="measured step time (s)")
        ax[0].set_ylim(bottom=0)
        ax[0].legend()
        ax = ax[1:]
    pts = list(csv.DictReader(open(f"{d}/step_costmodel_points.csv"))) if cm else []
    for i, lay in enumerate(lays):
        p = [r for r in pts if r["layout"] == lay]
        top = max(max(float(r["measured_s"]), float(r["predicted_s"])) for r in p) * 1.05
        for n in sorted({int(r["ranks"]) for r in p}):
            q = [r for r in p if int(r["ranks"]) == n]
            ax[i].scatter([float(r["measured_s"]) for r in q], [float(r["predicted_s"]) for r in q],
                          s=10, label=f"{n} ranks")
        ax[i].plot([0, top], [0, top], "k-", lw=0.8)
        ax[i].plot([0, top], [0, 1.2 * top], "r--", lw=0.6)
        ax[i].plot([0, top], [0, 0.8 * top], "r--", lw=0.6)
        ax[i].set(xlim=(0, top), ylim=(0, top), xlabel="measured compute (s)",
                  ylabel="predicted (s)", title=f"cost model: {lay}")
        ax[i].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(f"{d}/step.png", dpi=110)


def report_hdp(hs, skip):
    m = [r for r in hs if int(r["step"]) >= skip]
    hm = st.mean(float(r["hdp_s"]) for r in m)
    sm = st.mean(float(r["static_s"]) for r in m)
    print(f"## 2. HDP vs static, measured on the same batches (steps {skip}-{hs[-1]['step']}, "
          f"data_hash equal at every step)\n")
    print("| planner | mean step | median step | imbalance (max/mean compute) | largest CP group | micro-batches per step |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for p, mean in (("static", sm), ("hdp", hm)):
        print(f"| {p} | {mean:.3f} s | {st.median(float(r[p + '_s']) for r in m):.3f} s | "
              f"{st.mean(float(r[p + '_imbalance']) for r in m):.3f} | "
              f"{max(int(r[p + '_max_k']) for r in m)} | {st.mean(int(r[p + '_micro']) for r in m):.1f} |")
    print(f"\nHDP speedup over static (mean step): **{sm / hm:.2f}x**; "
          f"HDP faster in {sum(float(r['hdp_s']) < float(r['static_s']) for r in m)} of {len(m)} steps.\n")


def report_costmodel(cm, lays, skip):
    print("## 3. The planner's cost model vs measured per-trainer compute time\n")
    print("Median / 90th percentile of |predicted - measured| / measured per trainer and step "
          "(target: within 20%); details and layouts below.\n")
    ranks = sorted({int(r["ranks"]) for r in cm})
    print("| ranks | trainers (2trainers: 2) | " + " | ".join(lays) + " |")
    print("| ---: | ---: | " + " | ".join("---:" for _ in lays) + " |")
    for n in ranks:
        cells = []
        for lay in lays:
            r = next((r for r in cm if r["layout"] == lay and int(r["ranks"]) == n), None)
            cells.append("—" if r is None else
                         f"{100 * float(r['median_abs_error']):.1f}% / {100 * float(r['p90_abs_error']):.1f}%")
        print(f"| {n} | {n - 2} | " + " | ".join(cells) + " |")
    print()
    print("Calibration: `meshloom plan --calibrate` on the k = 1 micro-batches of a run with C = seq_len "
          "(seed 1234); validation: a run with `plan.calibration` and another seed (99), so other batches. "
          "Relative error = (predicted - measured) / measured, one sample per busy trainer per step "
          f"(steps >= {skip}). Other load: cores kept busy by other work just before the runs.\n")
    for lay in lays:
        print(f"**{lay}**: {LAYOUTS[lay]}\n")
        print("| ranks | trainers | trainers per core | samples | median abs. error | 90th pct abs. error "
              "| median signed error | within ±20% | fitted a (s/token²) | b (s/token) | g (s) | R² | mean step | other load (cores) |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in (r for r in cm if r["layout"] == lay):
            pc = lambda k: f"{100 * float(r[k]):.1f}%"
            print(f"| {r['ranks']} | {r['trainers']} | {int(r['trainers']) / 2:g} | {r['samples']} | "
                  f"{pc('median_abs_error')} | {pc('p90_abs_error')} | "
                  f"{100 * float(r['median_signed_error']):+.1f}% | {pc('within_20pct')} | {float(r['a']):.3g} | "
                  f"{float(r['b']):.3g} | {float(r['g']):.3g} | {float(r['r2']):.3f} | "
                  f"{float(r['mean_step_s']):.2f} s | {r['load']} |")
        print()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("busy")
    s.add_argument("seconds", type=float, nargs="?", default=2.0)
    s = sub.add_parser("watch")
    s.add_argument("--rank", type=int, required=True)
    s.add_argument("--metrics", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("command", nargs=argparse.REMAINDER)
    s = sub.add_parser("mfu")
    for k in ("bench", "train", "watch", "out"):
        s.add_argument("--" + k, required=True)
    s.add_argument("--threads", type=int, required=True)
    s = sub.add_parser("hdp")
    for k in ("hdp", "static", "out"):
        s.add_argument("--" + k, required=True)
    s = sub.add_parser("calib")
    s.add_argument("metrics")
    s.add_argument("--out", required=True)
    s.add_argument("--skip", type=int, default=2)
    s = sub.add_parser("errors")
    for k in ("layout", "fit", "metrics", "points", "rows"):
        s.add_argument("--" + k, required=True)
    s.add_argument("--ranks", type=int, required=True)
    s.add_argument("--trainers", type=int, required=True)
    s.add_argument("--skip", type=int, default=2)
    s.add_argument("--load", default="")
    s.add_argument("--cores", type=float, default=0,
                   help="predict with processor sharing of this many cores (post hoc), not the planner")
    s = sub.add_parser("report")
    s.add_argument("--dir", required=True)
    s.add_argument("--parts", default="2 3")
    s.add_argument("--skip", type=int, default=2)
    a = p.parse_args()
    if a.cmd == "watch":
        a.command = a.command[1:] if a.command[:1] == ["--"] else a.command
    {"busy": cmd_busy, "watch": cmd_watch, "mfu": cmd_mfu, "hdp": cmd_hdp, "calib": cmd_calib,
     "errors": cmd_errors, "report": cmd_report}[a.cmd](a)


if __name__ == "__main__":
    main()
