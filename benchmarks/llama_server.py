"""llama.cpp's OpenAI-compatible server on 127.0.0.1, from the `xllamacpp` wheel (llama.cpp's own
server code in a Python extension, prebuilt for CPU): run it in its own venv, not imreview's.

    /work/llama-venv/bin/python benchmarks/llama_server.py MODEL.gguf --port 8079 --ctx 8192

It prints `listening http://127.0.0.1:PORT` once the model is loaded and serves until killed.
"""

from __future__ import annotations

import argparse
import signal
import threading

import xllamacpp as xlc


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--port", type=int, default=8079)
    parser.add_argument("--ctx", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--alias", default="local-model")
    parser.add_argument("--api-key", default="")
    args = parser.parse_args()

    params = xlc.CommonParams()
    params.model.path = args.model
    params.model_alias = args.alias
    params.n_ctx = args.ctx
    params.n_parallel = 1
    params.use_jinja = True
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.warmup = False
    if args.api_key:
        params.api_keys = [args.api_key]
    server = xlc.Server(params)
    print(f"listening {server.listening_address}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.wait(0.5):
        pass


if __name__ == "__main__":
    main()
