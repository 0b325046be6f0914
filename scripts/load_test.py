#!/usr/bin/env python3
"""Load test of `kazetts serve` on this machine's loopback: N concurrent clients for a bounded
time and a bounded number of requests, every response checked, the server's RSS sampled.

    .venv/bin/python scripts/load_test.py --model models/tiny --clients 8 --seconds 180 [--max-batch 4]

It starts `kazetts serve` on 127.0.0.1 (a free port), waits for /health, then each client loops:
POST /v1/audio/speech with a random text, format (pcm, wav, flac, opus) and stream_format (audio,
sse); every 8th request of a client reads its first audio and hangs up (its slot must come
free). A 429 is counted as a queue rejection and retried after its Retry-After. Figures (served,
errors by status, p50/p95 first-audio and total latency, per-request real-time factor, audio
seconds per wall second, rejections, hang-ups, RSS over time) are printed as Markdown and
written to --json. Fails (exit 1) on a response that is not complete audio, a 5xx, a broken
response, or RSS growing more than --rss-growth-mb after the first quarter of the run.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import random
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import soundfile

TEXTS = [
    "Hello there.",
    "Bonjour ! Le 14 juillet 1789, à Paris.",
    "How are you today?",
    "今天天气很好。",
    "One, two, three, four.",
    "The quick brown fox jumps over the lazy dog.",
]
FORMATS = ["pcm", "wav", "flac", "opus"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def audio_seconds(fmt: str, sse: bool, body: bytes) -> float:
    """The seconds of audio of a complete response that decodes; 0 for anything else."""
    if sse:
        events = [json.loads(line[6:]) for line in body.decode().split("\n") if line.startswith("data: ")]
        if not events or events[-1]["type"] != "speech.audio.done":
            return 0.0
        body = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    if fmt == "pcm":
        return len(body) / 2 / 24000 if len(body) % 2 == 0 else 0.0
    try:
        audio, rate = soundfile.read(io.BytesIO(body), dtype="float32")
    except RuntimeError:  # (soundfile.LibsndfileError is one)
        return 0.0
    return len(audio) / rate if bool(np.isfinite(audio).all()) else 0.0


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.served, self.bad_audio, self.rejected, self.hung_up = 0, 0, 0, 0
        self.status: dict[int, int] = {}
        self.first: list[float] = []
        self.total: list[float] = []
        self.rtf: list[float] = []  # per complete request: total / its audio seconds
        self.audio = 0.0


def client_loop(url: str, rng: random.Random, stats: Stats, stop_at: float, budget: list[int]) -> None:
    n = 0
    while time.time() < stop_at:
        with stats.lock:
            if budget[0] <= 0:
                return
            budget[0] -= 1
        n += 1
        fmt, sse = rng.choice(FORMATS), rng.random() < 0.25
        body = json.dumps(
            {
                "model": "tts-1",
                "input": rng.choice(TEXTS),
                "voice": "alloy",
                "response_format": fmt,
                "stream_format": "sse" if sse else "audio",
                "seed": rng.randrange(1000),
            }
        ).encode()
        request = urllib.request.Request(
            url + "/v1/audio/speech", data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        start = time.perf_counter()
        try:
            with urllib.request.urlopen(request, timeout=600) as response:
                first = response.read(1)
                first_at = time.perf_counter() - start
                if n % 8 == 0:  # hang up after the first audio
                    with stats.lock:
                        stats.hung_up += 1
                    continue
                data = first + response.read()
                total = time.perf_counter() - start
                seconds = audio_seconds(fmt, sse, data)
                with stats.lock:
                    stats.status[200] = stats.status.get(200, 0) + 1
                    stats.served += seconds > 0
                    stats.bad_audio += seconds == 0
                    stats.first.append(first_at)
                    stats.total.append(total)
                    if seconds > 0:
                        stats.audio += seconds
                        stats.rtf.append(total / seconds)
        except urllib.error.HTTPError as error:
            error.read()
            with stats.lock:
                stats.status[error.code] = stats.status.get(error.code, 0) + 1
                stats.rejected += error.code == 429
            if error.code == 429:
                time.sleep(min(float(error.headers.get("Retry-After", "1")), 10.0))
        except OSError as error:  # a broken response (should not happen)
            with stats.lock:
                stats.status[-1] = stats.status.get(-1, 0) + 1
            print(f"client error: {error}", file=sys.stderr)


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="model directory for `kazetts serve`")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--seconds", type=float, default=180.0, help="run time (bounded: at most 900)")
    p.add_argument("--max-requests", type=int, default=2000, help="requests in all, at most")
    p.add_argument("--max-frames", type=int, default=3, help="frame cap per request (the server's --max-frames)")
    p.add_argument("--queue", type=int, default=4, help="the server's --queue (small, so that 429 happens)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--max-batch", type=int, default=1, help="the server's --max-batch")
    p.add_argument("--rss-growth-mb", type=float, default=32.0, help="most RSS growth after the first quarter")
    p.add_argument("--json", default=None, help="write the figures here")
    args = p.parse_args()
    seconds = min(args.seconds, 900.0)
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kazetts",
            "serve",
            "--model",
            args.model,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--queue",
            str(args.queue),
            "--max-frames",
            str(args.max_frames),
            "--threads",
            str(args.threads),
            "--max-batch",
            str(args.max_batch),
        ],
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if urllib.request.urlopen(url + "/health", timeout=5).status == 200:
                    break
            except (urllib.error.URLError, OSError):
                time.sleep(0.2)
        else:
            raise SystemExit("the server did not become ready")
        stats, budget = Stats(), [args.max_requests]
        rss = [(0.0, rss_mb(server.pid))]
        start, stop_at = time.time(), time.time() + seconds
        clients = [
            threading.Thread(target=client_loop, args=(url, random.Random(i), stats, stop_at, budget), daemon=True)
            for i in range(args.clients)
        ]
        for c in clients:
            c.start()
        while any(c.is_alive() for c in clients):
            time.sleep(5)
            rss.append((time.time() - start, rss_mb(server.pid)))
        metrics = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
        health = json.loads(urllib.request.urlopen(url + "/health", timeout=10).read())
    finally:
        server.terminate()
        server.wait(30)
    wall = time.time() - start
    warm = next((m for t, m in rss if t >= wall / 4), rss[-1][1])
    figures = {
        "clients": args.clients,
        "max_batch": args.max_batch,
        "seconds": round(time.time() - start, 1),
        "max_frames": args.max_frames,
        "queue": args.queue,
        "served_complete": stats.served,
        "bad_audio": stats.bad_audio,
        "status": stats.status,
        "queue_rejections": stats.rejected,
        "hung_up": stats.hung_up,
        "first_audio_p50": pct(stats.first, 50),
        "first_audio_p95": pct(stats.first, 95),
        "total_p50": pct(stats.total, 50),
        "total_p95": pct(stats.total, 95),
        "rtf_p50": pct(stats.rtf, 50),
        "rtf_p95": pct(stats.rtf, 95),
        "audio_seconds_per_second": stats.audio / wall,
        "rss_growth_after_first_quarter_mb": round(rss[-1][1] - warm, 1),
        "rss_mb": [(round(t), round(m, 1)) for t, m in rss],
        "server_queue_after": health["queue"],
        "server_cancelled": next(
            (float(l.split()[1]) for l in metrics.splitlines() if l.startswith("kazetts_cancelled_total")), None
        ),
    }
    print(
        f"| clients | max batch | seconds | served (complete) | bad audio | statuses | 429 | hung up "
        f"| first audio p50/p95 s | total p50/p95 s | RTF p50/p95 | audio s / s | RSS MB first/max/last |\n"
        f"|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
        f"| {args.clients} | {args.max_batch} | {figures['seconds']} | {stats.served} | {stats.bad_audio} | "
        f"{stats.status} | {stats.rejected} | {stats.hung_up} | "
        f"{figures['first_audio_p50']:.2f} / {figures['first_audio_p95']:.2f} | "
        f"{figures['total_p50']:.2f} / {figures['total_p95']:.2f} | {figures['rtf_p50']:.2f} / {figures['rtf_p95']:.2f} "
        f"| {figures['audio_seconds_per_second']:.2f} | {rss[0][1]:.0f} / {max(m for _, m in rss):.0f} / {rss[-1][1]:.0f} |"
    )
    print("RSS over time (s, MB): " + ", ".join(f"{t:.0f}:{m:.0f}" for t, m in rss))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)
    failures = []
    if stats.bad_audio:
        failures.append(f"{stats.bad_audio} responses were not complete audio")
    if any(code >= 500 or code < 0 for code in stats.status):
        failures.append(f"5xx or broken responses: {stats.status}")
    if figures["rss_growth_after_first_quarter_mb"] > args.rss_growth_mb:
        failures.append(f"RSS grew {figures['rss_growth_after_first_quarter_mb']} MB after the first quarter")
    if not stats.served:
        failures.append("no request completed")
    for failure in failures:
        print(f"FAIL: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
