#!/usr/bin/env python3
"""Old vs new hanpu binaries, interleaved in one run: `hanpu bench` with the same arguments, alternating
which binary goes first each round, so both see the same drift of a noisy machine.

    scripts/compare-binaries.py [--rounds N] [--json OUT] [--layer] OLD NEW -- BENCH_ARGS...

With --layer the binaries run `hanpu layer` instead: one record for the prefill and one per --decode batch,
each with its parts (projections, conv, gates, core, norm; per run, in us). A decode record has no fastest
run of its own: its best is the fastest of the runs' medians.

For every bench record (kind, preset, strategy, precision, dtype, tokens, batch) it prints the median over
rounds of each binary's median_ms, their range, and new/old as the median (and range) of the per-round
ratios; with --breakdown (or --parts) among BENCH_ARGS, the same per (chunk, head) step for each part. Beside
them, each binary's best: the fastest run (min_ms; with --parts, the fastest in-cache step and each part's
fastest, parts_min_us) over all rounds, and new/old of the bests. On a machine whose speed drifts in phases
the bests move less than the medians (a slow phase slows every run in it; a best needs one fast run). The
CPU and its matrix features head the table (name the machine beside every number). Only the standard library.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def cpu_line() -> str:
    model, flags = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and model == "unknown CPU":
                    model = value.strip()
                elif key.strip() == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    features = sorted(x for x in flags if x.startswith("amx") or x in ("avx512f", "avx512_bf16", "avx2"))
    return f"{model}; {os.cpu_count()} CPUs; features: {' '.join(features) or 'none of amx/avx512/avx2'}"


def layer_records(j: dict) -> list[dict]:
    """`hanpu layer --json` as bench-like records: the prefill, then each decode batch."""
    pre = j["prefill"]
    out = [{"kind": f"layer prefill B={pre['batch']} T={pre['tokens']}", "median_ms": pre["median_ms"],
            "min_ms": pre["min_ms"], "layer_parts_ms": pre["parts_ms"]}]
    for d in j.get("decode", []):
        out.append({"kind": f"layer decode batch {d['batch']}", "median_ms": d["median_ms"], "min_ms": d["median_ms"],
                    "layer_parts_ms": d.get("parts_ms", {})})
    return out


def run_bench(binary: str, args: list[str], command: str = "bench") -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "bench.json")
        proc = subprocess.run([binary, command, *args, "--json", out], capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"{binary} {command} {' '.join(args)} failed (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}")
        with open(out, encoding="utf-8") as f:
            j = json.load(f)
        return layer_records(j) if command == "layer" else j["records"]


def record_key(r: dict) -> str:
    keys = ("kind", "preset", "strategy", "precision", "dtype", "tokens", "batch")
    return " ".join(str(r[k]) for k in keys if k in r)


def step_parts(r: dict) -> dict[str, float]:
    if "layer_parts_ms" in r:  # hanpu layer: each part of the run (of the median step, for decode), in us
        return {p: 1e3 * ms for p, ms in r["layer_parts_ms"].items()}
    if "parts_us" in r:  # bench --parts: each part's median over the in-cache steps
        return dict(r["parts_us"])
    steps = r.get("chunk_steps") or 0
    return {p: 1e3 * ms / steps for p, ms in r.get("breakdown_ms", {}).items()} if steps else {}


def best_parts(r: dict) -> dict[str, float]:
    return dict(r.get("parts_min_us", {}))  # bench --parts: each part's fastest in-cache step


def best(old: list[float], new: list[float]) -> dict:
    o, n = min(old), min(new)
    return {"old": o, "new": n, "ratio": n / o if o > 0 else float("nan")}


def summary(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "all": values}


def fmt(s: dict) -> str:
    return f"{s['median']:.2f} ({s['min']:.2f}-{s['max']:.2f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="rounds, each running both binaries once (default 5)")
    ap.add_argument("--json", help="also write the comparison as JSON")
    ap.add_argument("--layer", action="store_true", help="run `hanpu layer` instead of `hanpu bench`")
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("bench_args", nargs=argparse.REMAINDER, help="-- then the arguments of hanpu bench")
    a = ap.parse_args()
    bench_args = a.bench_args[1:] if a.bench_args[:1] == ["--"] else a.bench_args
    if a.rounds < 1:
        ap.error("--rounds must be at least 1")
    if "--json" in bench_args:
        ap.error("the binaries' --json is this script's: pass --json before OLD")
    for b in (a.old, a.new):
        if not (os.path.isfile(b) and os.access(b, os.X_OK)):
            ap.error(f"not an executable: {b}")

    times: dict[str, dict[str, list[float]]] = {}
    fastest: dict[str, dict[str, list[float]]] = {}
    parts: dict[str, dict[str, dict[str, list[float]]]] = {}
    fastest_parts: dict[str, dict[str, dict[str, list[float]]]] = {}
    for rnd in range(a.rounds):
        order = [("old", a.old), ("new", a.new)] if rnd % 2 == 0 else [("new", a.new), ("old", a.old)]
        for which, binary in order:
            for r in run_bench(binary, bench_args, "layer" if a.layer else "bench"):
                key = record_key(r)
                times.setdefault(key, {"old": [], "new": []})[which].append(r["median_ms"])
                fastest.setdefault(key, {"old": [], "new": []})[which].append(r["min_ms"])
                for p, us in step_parts(r).items():
                    parts.setdefault(key, {}).setdefault(p, {"old": [], "new": []})[which].append(us)
                for p, us in best_parts(r).items():
                    fastest_parts.setdefault(key, {}).setdefault(p, {"old": [], "new": []})[which].append(us)
        print(f"round {rnd + 1}/{a.rounds} done", file=sys.stderr, flush=True)

    result = {"machine": cpu_line(), "old": a.old, "new": a.new, "rounds": a.rounds, "bench_args": bench_args,
              "command": "layer" if a.layer else "bench", "records": []}
    print(f"machine: {result['machine']}")
    print(f"{a.rounds} rounds of hanpu {'layer' if a.layer else 'bench'} {' '.join(bench_args)}, alternating which binary"
          " goes first")
    print(f"{'record':58} {'old ms (min-max)':>24} {'new ms (min-max)':>24} {'new/old (min-max)':>22}")
    for key, t in times.items():
        if len(t["old"]) != len(t["new"]):
            continue  # a record only one binary writes
        ratios = [n / o for o, n in zip(t["old"], t["new"])]
        rec = {"record": key, "old_ms": summary(t["old"]), "new_ms": summary(t["new"]), "ratio": summary(ratios),
               "best_ms": best(fastest[key]["old"], fastest[key]["new"]), "parts_us": {}}
        print(f"{key:58} {fmt(rec['old_ms']):>24} {fmt(rec['new_ms']):>24} "
              f"{rec['ratio']['median']:.3f} ({rec['ratio']['min']:.3f}-{rec['ratio']['max']:.3f})")
        b = rec["best_ms"]
        print(f"  best     {'step' if 'parts' in key.split() else 'run'} (ms): old {b['old']:.4g}, new {b['new']:.4g},"
              f" new/old {b['ratio']:.3f}")
        for p, v in parts.get(key, {}).items():
            if len(v["old"]) != len(v["new"]) or not v["old"]:
                continue
            pr = [n / o if o > 0 else float("nan") for o, n in zip(v["old"], v["new"])]
            rec["parts_us"][p] = {"old": summary(v["old"]), "new": summary(v["new"]), "ratio": summary(pr)}
            unit = "per run" if key.startswith("layer ") else "per step"
            line = (f"  {p:8} {unit} (us): old {fmt(rec['parts_us'][p]['old'])}, new {fmt(rec['parts_us'][p]['new'])},"
                    f" new/old {statistics.median(pr):.3f}")
            fp = fastest_parts.get(key, {}).get(p)
            if fp and len(fp["old"]) == len(fp["new"]) and fp["old"]:
                rec["parts_us"][p]["best"] = best(fp["old"], fp["new"])
                pb = rec["parts_us"][p]["best"]
                line += f"; best old {pb['old']:.2f}, new {pb['new']:.2f}, new/old {pb['ratio']:.3f}"
            print(line)
        result["records"].append(rec)
    if not result["records"]:
        sys.exit("no bench record was written by both binaries")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
