# Benchmarks (issue #8): kazetts beside the PyTorch reference and llama.cpp's own llama-tts.
#   make llama-tts     build llama-tts once per machine from the same llama-cpp-python sdist
#   make bench         full run (0.6b, F16 + Q8_0, threads 1 and 2; ~minutes), recorded as data in
#                      docs/bench/runs/<UTC date>-<commit>.json (commit it), chart in docs/benchmarks.png;
#                      python3 scripts/bench_report.py docs/bench/runs prints the latest run's tables;
#                      then the concurrency tables (bench_concurrency.py: 1/2/4/8 requests at once on
#                      0.6b Q8_0, 2 threads, both engines)
#   make bench-smoke   reduced run (Q8_0, 2 threads, 8 frames) that keeps the harness working; on
#                      0.6b because llama-tts hard-codes the real codec's shapes (tiny cannot load)
# llama-tts is compiled for the native CPU like the wheel, so its build is keyed the same way.
LLAMA_TTS_DIR   := $(KAZETTS_CACHE)/llama-tts-$(CPU_KEY)
LLAMA_TTS       := $(LLAMA_TTS_DIR)/bin/llama-tts
BENCH_ARGS      ?=
BENCH_SMOKE_OUT ?= build/bench-smoke

.PHONY: llama-tts bench bench-smoke

llama-tts: $(LLAMA_TTS)

$(LLAMA_TTS): $(LLAMA_SRC)/.unpacked
	cmake -S $(LLAMA_SRC)/vendor/llama.cpp -B $(LLAMA_TTS_DIR) -DCMAKE_BUILD_TYPE=Release \
		-DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
		-DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF
	cmake --build $(LLAMA_TTS_DIR) --target llama-tts -j2

bench: setup ref $(LLAMA_TTS)
	$(VENV)/bin/python scripts/bench.py --llama-tts $(LLAMA_TTS) --record docs/bench/runs \
		--chart docs/benchmarks.png $(BENCH_ARGS)
	$(VENV)/bin/python scripts/bench_concurrency.py --engine native
	$(VENV)/bin/python scripts/bench_concurrency.py --engine python

bench-smoke: setup ref $(LLAMA_TTS)
	$(VENV)/bin/python scripts/bench.py --llama-tts $(LLAMA_TTS) --weights q8_0 --variants --threads 2 --frames 8 \
		--out $(BENCH_SMOKE_OUT) --record $(BENCH_SMOKE_OUT)/runs --chart $(BENCH_SMOKE_OUT)/bench.png
