#!/usr/bin/python3
"""Summarize the raw CSV files of scripts/bench/bench_data.sh into markdown tables
(stdout), summary CSV files and PNG plots, all in RESULTS_DIR:

  data_prepare_runs.csv  -> data_prepare.csv, data_prepare.png
  data_loaders_runs.csv  -> data_loaders.csv, data_loaders.png
  data_memory_runs.csv   -> data_memory.csv,  data_memory.png
  data_images_tput_runs.csv   -> data_images_tput.csv,   data_images_tput.png    (part 4)
  data_images_memory_runs.csv -> data_images_memory.csv, data_images_memory.png  (part 4)

Usage: plot_bench_data.py RESULTS_DIR [--headline-loaders L]

Data path memory (part 3), the same formula for every layout:
  sum of PSS over all ranks  -  T x P_base
where T is the number of trainers and P_base the mean PSS of a trainer that
holds no source: the trainers of the disaggregated run with the same T and
the headline loader count. It is the PSS the job holds beyond T bare trainers:
rank 0 (lead, planner, constructor), the loader ranks, and whatever trainers
hold beyond a bare trainer (their sources, in colocated mode).
"""
import csv
import os
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MIB = 1024.0  # KiB per MiB


def read(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def write(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def table(header, rows, align=None):
    align = align or ["---"] + ["---:"] * (len(header) - 1)
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


# --- 1. prepare throughput -------------------------------------------------------------
def prepare(res):
    runs = read(os.path.join(res, "data_prepare_runs.csv"))
    if not runs:
        return None
    corpora = list(dict.fromkeys(r["corpus"] for r in runs))
    keys = ["tiktoken_wasm_mb_s", "meshloom_tokenize_mb_s", "meshloom_prepare_mb_s",
            "meshloom_prepare_1core_mb_s", "meshloom_prepare_1core_wall_mb_s"]
    rows, summary = [], []
    for c in corpora:
        rs = [r for r in runs if r["corpus"] == c]
        js, tok, prep, core, wall = [max(float(r[k]) for r in rs) for k in keys]
        r0 = rs[0]
        summary.append([c, r0["files"], r0["bytes"], r0["tokens"], len(rs), js, tok, prep, core,
                        wall, round(core / js, 2), round(tok / js, 2)])
        rows.append([c, r0["files"], f"{int(r0['bytes']) / 1e6:.1f}", r0["tokens"], f"{js:.2f}",
                     f"{tok:.1f}", f"{prep:.1f}", f"{core:.1f}", f"{wall:.1f}",
                     f"**{core / js:.1f}x**", f"{tok / js:.1f}x"])
    write(os.path.join(res, "data_prepare.csv"),
          ["corpus", "files", "bytes", "tokens", "runs"] + keys +
          ["ratio_prepare_1core", "ratio_tokenize"], summary)
    n = len(runs_of(runs, corpora[0]))
    pinned = any(r.get("pinned") == "1" for r in runs)

    fig, ax = plt.subplots(figsize=(9, 4.6))
    labels = ["npm tiktoken\n(WASM)", "meshloom tokenize\n(encode only)",
              "meshloom prepare\n--threads 1", "prepare --threads 1\npinned to 1 core",
              "prepare, 1 core,\nwhole process"]
    width = 0.8 / len(summary)
    for i, s in enumerate(summary):
        vals = s[5:10]
        xs = [j + (i - (len(summary) - 1) / 2) * width for j in range(len(vals))]
        bars = ax.bar(xs, vals, width, label=s[0])
        ax.bar_label(bars, fmt="%.1f", fontsize=8)
    ax.set_xticks(range(len(labels)), labels)
    ax.set_ylabel("MB/s of text")
    ax.set_title("GPT-2 BPE throughput, one thread / one core (best of %d)" % n)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(res, "data_prepare.png"), dpi=110)
    plt.close(fig)
    return ("### 1. Prepare throughput, GPT-2 BPE, one core (best of %d; MB = 10^6 bytes)\n\n" % n +
            table(["corpus", "files", "MB", "tokens", "npm tiktoken (WASM) MB/s",
                   "meshloom tokenize MB/s", "meshloom prepare --threads 1 MB/s",
                   "prepare --threads 1, pinned to 1 core", "same, whole process",
                   "prepare (1 core) / tiktoken", "tokenize / tiktoken"], rows) +
            "\n\nSame files on every side; the token counts match (prepare adds one end-of-text "
            "id per document). tiktoken and `tokenize --bench` time encoding only, on one "
            "thread%s. `prepare` figures are its own timer (read, repair UTF-8, tokenize, "
            "write .bin/.idx); `--threads 1` still runs a reader and a writer thread, so the "
            "per-core figure is the run pinned to one core with taskset; 'whole process' "
            "adds start-up and loading the vocabulary. Target: prepare >= 2x tiktoken per core."
            % (", pinned to one core (PIN=1)" if pinned else ", not pinned") + load_note(runs))


def load_note(runs):
    loads = [float(r["load1"]) for r in runs if r.get("load1")]
    if not loads:
        return ""
    return (" 1-minute load average of the machine during these runs: %.1f – %.1f (on %d cores)."
            % (min(loads), max(loads), os.cpu_count()))


def runs_of(runs, corpus):
    return [r for r in runs if r["corpus"] == corpus]


# --- 2. tokens/s versus loaders ------------------------------------------------------------
VARIANTS = {"raw": "7 raw + 1 indexed (tokenized by loaders)",
            "indexed": "control: all 8 indexed (no tokenization)"}


def loaders(res):
    runs = read(os.path.join(res, "data_loaders_runs.csv"))
    if not runs:
        return None
    counts = sorted({int(r["loaders"]) for r in runs})
    variants = [v for v in VARIANTS if any(r["sources"] == v for r in runs)]
    hashes = {r["hash"] for r in runs}
    summary, stats = [], {}
    for v in variants:
        base = None
        for L in counts:
            rs = [r for r in runs if int(r["loaders"]) == L and r["sources"] == v]
            if not rs:
                continue
            x = [float(r["tokens_per_s"]) for r in rs]
            med = statistics.median(x)
            base = base or med
            T, K = int(rs[0]["trainers"]), int(rs[0]["constructors"])
            stats[(v, L)] = (med, min(x), max(x), med / base)
            summary.append([v, L, T, K, 1 + L + T, rs[0]["steps"], rs[0]["tokens"], len(x),
                            round(med), round(min(x)), round(max(x)), round(med / base, 3)])
    write(os.path.join(res, "data_loaders.csv"),
          ["sources", "loaders", "trainers", "constructors", "ranks", "steps", "tokens", "reps",
           "median_tokens_per_s", "min_tokens_per_s", "max_tokens_per_s", "vs_1_loader"], summary)
    T, steps, reps = summary[0][2], summary[0][5], summary[0][7]

    rows = []
    for L in counts:
        row = [L, 1 + L + T]
        for v in variants:
            if (v, L) in stats:
                med, lo, hi, rel = stats[(v, L)]
                row += [f"{med / 1e6:.2f} ({lo / 1e6:.2f} – {hi / 1e6:.2f})", f"{rel:.2f}"]
            else:
                row += ["–", "–"]
        rows.append(row)
    header = ["loaders", "ranks"]
    for v in variants:
        header += [f"{v}: M tokens/s, median (min – max)", f"{v}: vs 1 loader"]

    fig, ax = plt.subplots(figsize=(6.8, 4.4))
    for v in variants:
        ls = [L for L in counts if (v, L) in stats]
        med = [stats[(v, L)][0] / 1e6 for L in ls]
        lo = [(stats[(v, L)][0] - stats[(v, L)][1]) / 1e6 for L in ls]
        hi = [(stats[(v, L)][2] - stats[(v, L)][0]) / 1e6 for L in ls]
        ax.errorbar(ls, med, yerr=[lo, hi], marker="o", capsize=4, label=VARIANTS[v])
    ax.set_xscale("log", base=2)
    ax.set_xticks(counts, [str(c) for c in counts])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("loader ranks")
    ax.set_ylabel("delivered tokens/s (millions)")
    ax.set_title("Data path, %d trainers, 8 sources (median, min–max of %d runs)" % (T, reps))
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(res, "data_loaders.png"), dpi=110)
    plt.close(fig)
    return ("### 2. Delivered tokens/s versus loader ranks (%d trainers, 1 constructor, "
            "data.workers 1, %s steps of 16,384 tokens, median of %d)\n\n" % (T, steps, reps) +
            table(header, rows) +
            "\n\nraw: 7 raw sources (text/JSON Lines, GPT-2 tokenized on the fly by the loaders) "
            "+ 1 indexed; indexed: the same 8 sources prepared beforehand. "
            "Same batches in every run (one batch hash over all runs, raw and indexed): %s."
            % ("yes" if len(hashes) == 1 else "NO (%d different hashes)" % len(hashes)) +
            load_note(runs))


# --- 3. memory ---------------------------------------------------------------------------
def memory(res, headline, name="data_memory", part="3", what="8 sources: 7 raw, 1 indexed",
           lean="no token cache"):
    runs = read(os.path.join(res, name + "_runs.csv"))
    if not runs:
        return None
    modes = {r["mode"] for r in runs}
    has_col, has_colp = "colocated" in modes, "colocated_processes" in modes
    summary, rows, notes = [], [], []
    by_t = {}
    for r in runs:
        by_t.setdefault((int(r["steps"]), int(r["trainers"])), []).append(r)
    for (steps, T), rs in sorted(by_t.items()):
        dis = [r for r in rs if r["mode"] == "disaggregated"]
        ref = [r for r in dis if int(r["loaders"]) == headline] or dis
        if not ref:
            notes.append(f"{T} trainers, {steps} steps: no disaggregated run, no baseline")
            continue
        base = statistics.mean(float(r["trainer_pss_kib"]) / T for r in ref)
        col_dp, colp_dp = None, None  # the two colocated baselines
        entries = []
        order = {"colocated": 0, "colocated_processes": 1, "disaggregated": 2, "lean": 3}
        for r in sorted(rs, key=lambda r: (order.get(r["mode"], 4), int(r["loaders"]))):
            lead = float(r["constructor_pss_kib"])
            load = float(r["loader_pss_kib"])
            excess = float(r["trainer_pss_kib"]) - T * base
            dp = lead + load + excess
            if r["mode"] == "colocated":
                col_dp = dp
            if r["mode"] == "colocated_processes":
                colp_dp = dp
            entries.append((r, lead, load, excess, dp))
        if len({r["hash"] for r in rs}) != 1:
            notes.append(f"{T} trainers, {steps} steps: the layouts delivered different batches")
        for r, lead, load, excess, dp in entries:
            L = int(r["loaders"])
            ranks = 1 + L + T
            ratio = col_dp / dp if col_dp else float("nan")
            ratio_p = colp_dp / dp if colp_dp else float("nan")
            label = {"colocated": "colocated, in the trainer",
                    "colocated_processes": "colocated, worker processes (DataLoader-style)",
                    "lean": f"lean: {L} loader(s), no shadows, " + lean}.get(
                        r["mode"], f"disaggregated, {L} loader(s)")
            total = float(r["constructor_pss_kib"]) + load + float(r["trainer_pss_kib"])
            summary.append([T, r["mode"], L, ranks, r["steps"], round(base), round(lead),
                            round(load), round(float(r["trainer_pss_kib"])), round(excess),
                            round(dp), round(total), round(ratio, 2), round(ratio_p, 2)])
            colocated = r["mode"].startswith("colocated")
            head = colocated or (r["mode"] == "disaggregated" and L == headline)
            fmt = (lambda s: f"**{s}**") if head else (lambda s: s)  # noqa: E731
            rows.append([T, steps, label, ranks, f"{base / MIB:.1f}", f"{lead / MIB:.1f}",
                         f"{load / MIB:.1f}", f"{excess / MIB:.1f}", fmt(f"{dp / MIB:.1f}"),
                         f"{total / MIB:.1f}"] +
                        (["-" if colocated else fmt(f"{ratio:.2f}x")] if has_col else []) +
                        (["-" if colocated else fmt(f"{ratio_p:.2f}x")] if has_colp else []))
    write(os.path.join(res, name + ".csv"),
          ["trainers", "mode", "loaders", "ranks", "steps", "trainer_base_pss_kib",
           "rank0_pss_kib", "loaders_pss_kib", "trainers_pss_kib", "trainer_excess_pss_kib",
           "data_path_pss_kib", "job_pss_kib", "colocated_over_this",
           "colocated_processes_over_this"], summary)

    fig, ax = plt.subplots(figsize=(13.5, 5))
    labels, x = [], 0
    first_steps = int(summary[0][4]) if summary else 0
    for s in summary:
        lead, load, exc = s[6] / MIB, s[7] / MIB, max(s[9], 0) / MIB
        ax.bar(x, lead, color="tab:gray", label="rank 0 (lead, constructor)" if x == 0 else None)
        ax.bar(x, load, bottom=lead, color="tab:blue", label="loader ranks" if x == 0 else None)
        ax.bar(x, exc, bottom=lead + load, color="tab:red",
               label="trainers (with their worker processes) beyond a bare trainer" if x == 0 else None)
        ax.text(x, lead + load + exc, f"{s[10] / MIB:.0f}", ha="center", va="bottom", fontsize=8)
        labels.append(f"T={s[0]}\n" + {"colocated": "coloc.", "colocated_processes": "coloc.\nprocs"}
                      .get(s[1], f"L={s[2]}") +
                      ("\nlean" if s[1] == "lean" else "") +
                      ("" if int(s[4]) == first_steps else f"\n{s[4]} st."))
        x += 1
    ax.set_xticks(range(len(labels)), labels)
    ax.set_ylabel("data path memory, PSS (MiB)")
    ax.set_title("Data path memory: colocated (every trainer, or each of its worker processes, "
                 "opens every source)\n"
                 "vs disaggregated loaders; %s; %d steps unless noted" % (what, first_steps))
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(res, name + ".png"), dpi=110)
    plt.close(fig)
    ratios = ((["colocated in the trainer / this"] if has_col else []) +
              (["colocated worker processes / this"] if has_colp else []))
    text = ("### %s. Data path memory, PSS in MiB (%s)\n\n" % (part, what) +
            table(["trainers", "steps", "layout", "ranks", "bare trainer P_base", "rank 0",
                   "loaders", "trainers beyond T x P_base", "data path memory",
                   "whole job"] + ratios, rows,
                  ["---:", "---:", "---", "---:", "---:", "---:", "---:", "---:", "---:", "---:"] +
                  ["---:"] * len(ratios)) +
            "\n\nData path memory = (sum of PSS over all ranks) - T x P_base, where P_base is "
            "the mean PSS of a trainer that holds no source (trainers of the disaggregated "
            "run with %d loaders, the same T and the same steps). PSS is read from /proc/self/smaps_rollup "
            "at the end of the run, so pages shared by ranks (libraries, the memory-mapped "
            "indexed source) count once; a colocated trainer's PSS includes its worker processes "
            "(data.colocated_processes, 2 per trainer here, as data.workers). Target (Omniload, "
            "against per-rank DataLoaders): colocated / disaggregated >= 13.5x at 16 trainers."
            % headline + load_note(runs))
    if notes:
        text += "\n\n" + "\n".join("WARNING: " + n for n in notes)
    return text


# --- 4. an image-text source ----------------------------------------------------------------
def images_tput(res):
    runs = read(os.path.join(res, "data_images_tput_runs.csv"))
    if not runs:
        return None
    counts = sorted({int(r["loaders"]) for r in runs})
    hashes = {r["hash"] for r in runs}
    summary, rows, stats = [], [], {}
    base = None
    for L in counts:
        rs = [r for r in runs if int(r["loaders"]) == L]
        sps = statistics.median(float(r["samples_per_s"]) for r in rs)
        tps = statistics.median(float(r["tokens_per_s"]) for r in rs)
        secs = statistics.median(float(r["seconds"]) for r in rs)
        isps = statistics.median(float(r["image_samples"]) / float(r["seconds"]) for r in rs)
        base = base or sps
        r0 = rs[len(rs) // 2]
        T = int(r0["trainers"])
        stats[L] = (sps, tps, isps)
        split = (f"{r0['clipart_loaders']} : {r0['bible_loaders']}" if r0["clipart_loaders"]
                 else ("1 : 1 (fixed)" if L == 2 else "shared" if L == 1 else "-"))
        sent = float(r0.get("loader_reply_bytes") or 0)  # absent before 2026-11-27
        replies = (f"{sent / MIB / MIB:.1f} ({sent / float(r0['tokens']):.0f})" if sent else "-")
        summary.append([L, T, 1 + L + T, r0["steps"], r0["tokens"], len(rs), round(secs, 2),
                        round(sps, 1), round(isps, 1), round(tps), round(sps / base, 3),
                        r0["repartitions"], r0["clipart_loaders"], r0["bible_loaders"],
                        r0["clipart_s_per_token"], r0["bible_s_per_token"], r0["decodes"],
                        r0["decoded_samples"], r0["decodes_at_read"], r0["decode_seconds"],
                        r0["loader_busy_s_max"], r0["load1"], int(sent)])
        cost = (f"{float(r0['clipart_s_per_token']) * 1e6:.2f} / "
                f"{float(r0['bible_s_per_token']) * 1e6:.3f}" if r0["clipart_s_per_token"] else "-")
        rows.append([L, 1 + L + T, f"{secs:.1f}", f"**{sps:.0f}**", f"{isps:.0f}",
                     f"{tps / 1e3:.1f}", replies, f"{sps / base:.2f}", split, cost,
                     f"{r0['decodes']} ({r0['decoded_samples']}, {r0['decodes_at_read']})",
                     f"{float(r0['decode_seconds']):.1f}", f"{float(r0['loader_busy_s_max']):.1f}",
                     r0["load1"]])
    write(os.path.join(res, "data_images_tput.csv"),
          ["loaders", "trainers", "ranks", "steps", "tokens", "reps", "seconds",
           "samples_per_s", "image_samples_per_s", "tokens_per_s", "samples_vs_1_loader",
           "repartitions", "clipart_loaders", "bible_loaders", "clipart_s_per_token",
           "bible_s_per_token", "decodes", "decoded_samples", "decodes_at_read", "decode_seconds",
           "loader_busy_s_max", "load1", "loader_reply_bytes"], summary)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4.2))
    a1.plot(counts, [stats[L][0] for L in counts], marker="o", label="all samples")
    a1.plot(counts, [stats[L][2] for L in counts], marker="s", label="image samples")
    a1.set_ylabel("delivered samples/s")
    a2.plot(counts, [stats[L][1] / 1e3 for L in counts], marker="o", color="tab:green")
    a2.set_ylabel("delivered tokens/s (thousands)")
    for a in (a1, a2):
        a.set_xscale("log", base=2)
        a.set_xticks(counts, [str(c) for c in counts])
        a.set_ylim(bottom=0)
        a.set_xlabel("loader ranks")
    a1.legend(fontsize=8)
    fig.suptitle("Image + text data path, %d trainers (openclipart PNGs : Bible, 1:1 by tokens)"
                 % T)
    fig.tight_layout()
    fig.savefig(os.path.join(res, "data_images_tput.png"), dpi=110)
    plt.close(fig)
    r0 = runs[0]
    return ("### 4a. Image + text: delivered samples/s versus loader ranks (%s trainers, "
            "data.workers %s, %s steps of 16,384 tokens, %d run(s) each)\n\n"
            % (r0["trainers"], r0["workers"], r0["steps"], len(runs) // len(counts)) +
            table(["loaders", "ranks", "seconds", "samples/s", "image samples/s",
                   "k tokens/s", "loader replies MiB (bytes a token)", "samples/s vs 1 loader",
                   "loaders clipart : bible (after re-partitioning)",
                   "measured us/token clipart / bible",
                   "decodes (distinct samples, at read)", "decode s (all loaders)",
                   "busiest loader busy s", "load1"], rows) +
            "\n\nSources of equal mixture weight: 'clipart' (openclipart PNGs in WebDataset "
            "shards, decoded and resized by the loaders, 16x16 patches) and 'bible' (raw JSON "
            "Lines, GPT-2 tokenized by the loaders). The lead re-partitions the loaders by "
            "weight x measured seconds per token every 10 steps; the split is the last one logged. "
            "Decodes count every loader that decoded (shadows decode only once they serve; a "
            "loader given a source by re-partitioning decodes its samples anew). Same batches "
            "in every run: %s." %
            ("yes" if len(hashes) == 1 else "NO (%d different hashes)" % len(hashes)) +
            load_note(runs))


def images_memory(res, headline):
    return memory(res, headline, name="data_images_memory", part="4b",
                  what="openclipart PNGs + Bible text, 1:1", lean="small decoded-image cache")


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    res = args[0]
    headline = 2
    if "--headline-loaders" in args:
        headline = int(args[args.index("--headline-loaders") + 1])
    parts = [p for p in (prepare(res), loaders(res), memory(res, headline), images_tput(res),
                         images_memory(res, headline)) if p]
    if not parts:
        sys.exit(f"{res}: no data_*_runs.csv")
    print("\n\n".join(parts))


if __name__ == "__main__":
    main()
