#!/usr/bin/env python3
"""loadgen-self.py -- how much the load generator itself costs: `kvik bench
serve` pinned to one core drives the fake OpenAI-compatible server
(build/kvik-fake-openai, `make fake-openai`) pinned to another, at several
stream counts and token rates, and the table gives the streamed tokens per
second it handled and its own CPU use (getrusage: user + sys over the run).

    bench/loadgen-self.py [--build build] [--markdown] [--quick]

Each point: S concurrent streams (--max-concurrency S, all requests at
once), every token delayed D microseconds by the server (so each stream
runs at about 1e6/D tokens/s; D = 0 is as fast as the server writes),
N requests of L output tokens. "CPU us/token" is the generator's CPU time
divided by the output tokens: the cost of receiving, timestamping and
parsing one streamed event. "% core" is that CPU time over the run's wall
time. The generator is not the bottleneck as long as % core stays well
under 100.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

POINTS = [  # streams, delay_us, requests, output tokens
    (16, 20000, 64, 256),
    (64, 20000, 256, 256),
    (128, 20000, 512, 128),
    (64, 5000, 256, 256),
    (256, 20000, 1024, 64),
    (16, 0, 256, 512),
]
QUICK = [(16, 20000, 32, 64), (16, 0, 32, 128)]


def pin(core):
    return ["taskset", "-c", str(core)] if os.cpu_count() and os.cpu_count() > 1 else []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    kvik = os.path.join(args.build, "kvik")
    fake = os.path.join(args.build, "kvik-fake-openai")
    for f in (kvik, fake):
        if not os.access(f, os.X_OK):
            sys.exit(f"loadgen-self: {f} not built (make BUILD={args.build} all fake-openai)")
    rows = []
    for streams, delay, n, out_len in QUICK if args.quick else POINTS:
        srv = subprocess.Popen(pin(1) + [fake, "--port", "0", "--delay-us", str(delay)],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            line = srv.stdout.readline()
            url = line.strip().split()[-1]
            with tempfile.NamedTemporaryFile(suffix=".json") as tf:
                cmd = pin(0) + [kvik, "bench", "serve", "--url", url, "--num-prompts", str(n),
                                "--input-len", "32", "--output-len", str(out_len),
                                "--max-concurrency", str(streams), "--quiet", "--json", tf.name]
                t0 = time.time()
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
                wall = time.time() - t0
                s = json.load(open(tf.name))["summary"]
        finally:
            srv.send_signal(signal.SIGTERM)
            srv.wait()
        cpu = s["cpu_user_s"] + s["cpu_sys_s"]
        tokens = s["output_tokens"]
        rows.append((streams, delay, n, out_len, s["failed"], s["output_throughput"], s["itl_ms"]["median"],
                     s["cpu_pct"], 1e6 * cpu / tokens if tokens else float("nan"), wall))
        print(f"loadgen-self: {streams} streams, delay {delay} us: {s['output_throughput']:.0f} tok/s, "
              f"{s['cpu_pct']:.1f}% of a core", file=sys.stderr)
    head = ["streams", "delay us", "requests", "tokens each", "failed", "tok/s", "ITL p50 ms", "% core",
            "CPU us/token"]
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---:|" * len(head))
        for r in rows:
            print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5]:.0f} | {r[6]:.2f} | {r[7]:.1f} | {r[8]:.2f} |")
    else:
        print("  ".join(f"{h:>12}" for h in head))
        for r in rows:
            print("  ".join(f"{v:>12.2f}" if isinstance(v, float) else f"{v:>12}" for v in r[:9]))


if __name__ == "__main__":
    main()
