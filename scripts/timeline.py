#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Reads a GPU timeline written by bench/support/cupti_trace.cpp (gpu_check.sh trace) and prints,
# for each timed sample of a bench (the work after the bench timer's spin kernels), its span,
# what ran on which device and stream, and the idle gaps between consecutive kernels of a stream
# (what a stream's waits and launches cost the GPU). With --sample N, every record of sample N.
# With --kernels (or when the trace holds no spin kernel, e.g. host-timed benches such as
# bench_reduce's sum to host): each kernel name's count and durations over the whole trace.
# With --api (a trace taken with TRACE_API=1): for each host thread that launched kernels, the
# host time from one launch to the next, split into the launch call itself, the other CUDA calls
# in between, and the rest (the program's own code), then the CUDA calls by total time.
#
# With --around TEXT: for the last --count kernels whose names contain TEXT, every kernel and copy
# that started within --window A,B ms of it, and the host's CUDA calls there that took 3 us or more
# or wait for or write a flag (what one call of a batch overlaps, and what waits for what; e.g. one
# rank's trace of a re-shard across ranks, gpu_check.sh trace with TRACE_RANKS).
#
#   python3 scripts/timeline.py TRACE.csv[.gz] [--sample N] [--match TEXT] [--kernels] [--api]
#                               [--around TEXT [--count K] [--window A,B]]
#   --match TEXT   only samples (or kernels) whose kernel names contain TEXT
import argparse
import collections
import gzip
import statistics


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    rows = []
    with opener(path, "rt") as f:
        for line in f:
            p = line.rstrip("\n").split(",", 6)
            if len(p) < 7:
                continue
            kind, dev, stream, start, end, nbytes, what = p
            rows.append((int(start), int(end), kind, int(dev), int(stream), int(nbytes), what))
    rows.sort()
    return rows


def short(r):
    kind, what = r[2], r[6]
    if kind != "K":
        return f"{kind} {what} {r[5]} B"
    for key in ("spin_kernel", "tessera_stencil", "elementwise_kernel", "bulk_kernel", "full_reduce", "nccl"):
        if key in what:
            return key
    # The tracer keeps a name's first 80 characters: for a mangled one, the end tells such kernels apart.
    return what[-40:] if what.startswith("_Z") else what[:40]


def samples(rows):
    """The bench timer's spin kernels, one per device, start a sample; it runs until the next one."""
    spins = [r for r in rows if "spin_kernel" in r[6]]
    groups = []
    for r in spins:
        if groups and r[3] not in {s[3] for s in groups[-1]} and r[0] - groups[-1][0][0] < 1_000_000:
            groups[-1].append(r)
        else:
            groups.append([r])
    out = []
    for i, g in enumerate(groups):
        start = min(s[1] for s in g)
        end = groups[i + 1][0][0] if i + 1 < len(groups) else rows[-1][1] + 1
        ev = [r for r in rows if start <= r[0] < end and r[2] in "KMP" and "spin_kernel" not in r[6]]
        if ev:
            out.append((start, ev))
    return out


def kernels(rows, match):
    """Each kernel name's count and durations, and the idle gaps before its launches on its stream."""
    last_end = {}
    by_name = collections.defaultdict(lambda: ([], []))
    for r in rows:
        if r[2] != "K":
            continue
        key = (r[3], r[4])
        if match is None or match in r[6]:
            durations, gaps = by_name[r[6]]
            durations.append((r[1] - r[0]) / 1e3)
            if key in last_end:
                gaps.append((r[0] - last_end[key]) / 1e3)
        last_end[key] = r[1]
    for name, (durations, gaps) in sorted(by_name.items(), key=lambda kv: -sum(kv[1][0])):
        gap = f", gap before it median {statistics.median(gaps):.2f}" if gaps else ""
        print(f"{len(durations):6d} x {name[:70]}: us min {min(durations):.2f}, median "
              f"{statistics.median(durations):.2f}, max {max(durations):.2f}{gap}")


LAUNCHES = ("cuLaunchKernel", "cudaLaunchKernel", "cuLaunchKernelEx", "cudaLaunchKernelExC", "cuGraphLaunch",
            "cudaGraphLaunch")


def api(rows):
    """Host time between consecutive launches of each thread, and what it was spent on."""
    calls = [r for r in rows if r[2] in "RD"]
    # A runtime call wraps the driver calls it makes: count the outermost calls only.
    by_thread = collections.defaultdict(list)
    for r in calls:
        by_thread[r[3]].append(r)
    totals = collections.Counter()
    counts = collections.Counter()
    for thread, cs in sorted(by_thread.items()):
        cs.sort()
        outer = []
        for r in cs:
            if outer and r[0] >= outer[-1][0] and r[1] <= outer[-1][1]:
                continue
            outer.append(r)
        for r in outer:
            totals[r[6]] += (r[1] - r[0]) / 1e3
            counts[r[6]] += 1
        launches = [i for i, r in enumerate(outer) if r[6] in LAUNCHES]
        if len(launches) < 2:
            continue
        per, inside, others = [], [], []
        for a, b in zip(launches, launches[1:]):
            per.append((outer[b][0] - outer[a][0]) / 1e3)
            inside.append((outer[a][1] - outer[a][0]) / 1e3)
            others.append(sum((r[1] - r[0]) / 1e3 for r in outer[a + 1:b]))
        own = [p - i - o for p, i, o in zip(per, inside, others)]
        med = statistics.median
        print(f"thread {thread}: {len(launches)} launches; from one launch to the next, median {med(per):.2f} us: "
              f"the launch call {med(inside):.2f}, other CUDA calls {med(others):.2f}, the rest {med(own):.2f}")
    print("CUDA calls by total host time (outermost calls):")
    for name, t in totals.most_common(15):
        print(f"  {name:40s} {counts[name]:8d} calls  {t / 1e3:10.2f} ms  {t / counts[name]:8.2f} us each")


def around(rows, match, count, window):
    """Every record near each of the last `count` kernels named like `match`, in ms from its start."""
    lo, hi = (float(x) * 1e6 for x in window.split(","))
    anchors = [r for r in rows if r[2] == "K" and match in r[6]][-count:]
    for a in anchors:
        print(f"{short(a)} on cuda:{a[3]} stream {a[4]}: {(a[1] - a[0]) / 1e6:.3f} ms; around it, ms from its start:")
        for r in rows:
            if r is a or not a[0] + lo <= r[0] < a[0] + hi:
                continue
            if r[2] in "RD" and r[1] - r[0] < 3000 and "Value32" not in r[6]:
                continue
            where = f"thread {r[3]}" if r[2] in "RD" else f"cuda:{r[3]} stream {r[4]}"
            print(f"  {(r[0] - a[0]) / 1e6:8.3f} {(r[1] - a[0]) / 1e6:8.3f}  {r[2]} {where:>18}  {short(r)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--sample", type=int)
    ap.add_argument("--match")
    ap.add_argument("--kernels", action="store_true")
    ap.add_argument("--api", action="store_true")
    ap.add_argument("--around")
    ap.add_argument("--count", type=int, default=2)
    ap.add_argument("--window", default="-1,1")
    a = ap.parse_args()
    rows = load(a.trace)
    if a.around:
        around(rows, a.around, a.count, a.window)
        return
    if a.api:
        api(rows)
        return
    ss = samples(rows)
    if a.kernels or not ss:
        kernels(rows, a.match)
        return
    for i, (start, ev) in enumerate(ss):
        if a.sample is not None and i != a.sample:
            continue
        if a.match and not any(a.match in r[6] for r in ev):
            continue
        span = (max(r[1] for r in ev) - start) / 1e3
        what = collections.Counter(short(r) for r in ev)
        print(f"sample {i}: {span:.1f} us, devices {sorted(set(r[3] for r in ev))}, {dict(what)}")
        # Gaps between consecutive kernels of each stream that ran more than one.
        by_stream = collections.defaultdict(list)
        for r in ev:
            if r[2] == "K":
                by_stream[(r[3], r[4])].append(r)
        for (d, s), ks in sorted(by_stream.items()):
            if len(ks) < 2:
                continue
            gaps = [(b[0] - x[1]) / 1e3 for x, b in zip(ks, ks[1:])]
            print(f"  cuda:{d} stream {s}: {len(ks)} kernels, gaps between them us: median "
                  f"{statistics.median(gaps):.2f}, max {max(gaps):.2f}")
        if a.sample is not None:
            for r in ev:
                print(f"  {(r[0] - start) / 1e3:10.2f} {(r[1] - start) / 1e3:10.2f} {(r[1] - r[0]) / 1e3:8.2f}  "
                      f"cuda:{r[3]} stream {r[4]:4d}  {short(r)}")


if __name__ == "__main__":
    main()
