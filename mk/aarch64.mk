# aarch64 (Android-class CPU) golden tests from an x86-64 Debian host: one cross build of ggml +
# llama (ARMv8.0 baseline) + native/, golden_check under qemu-aarch64 at each CPU of QEMU_CPUS
# (default cortex-a53 cortex-a76 max: NEON, dotprod, i8mm; see scripts/aarch64_goldens.sh); then
# the instruction-counting plugin of aarch64-count on a program of known counts (--self-check).
.PHONY: aarch64-test aarch64-pip-check aarch64-count

aarch64-test: setup llama-src
	LLAMA_SRC=$(LLAMA_SRC) SOXR_SRC=$(SOXR_SRC) VENV_PYTHON=$(VENV)/bin/python KAZETTS_CACHE=$(KAZETTS_CACHE) scripts/aarch64_goldens.sh
	KAZETTS_CACHE=$(KAZETTS_CACHE) $(VENV)/bin/python scripts/aarch64_count.py --self-check

# `pip install <sdist>` + `kazetts say` in an arm64 Debian chroot under qemu-user, llama-cpp-python
# compiled there from PyPI (scripts/aarch64_pip_check.sh; as root). Hours cold; a cached run
# still compiles libkazetts under qemu. Not in .ci/run: too long for CI.
aarch64-pip-check: setup
	VENV_PYTHON=$(VENV)/bin/python KAZETTS_CACHE=$(KAZETTS_CACHE) scripts/aarch64_pip_check.sh

# Instructions per frame and per stage on aarch64, counted under qemu-aarch64 by a TCG plugin of
# ours (scripts/aarch64_count.py): kazetts' native engine beside llama.cpp's llama-tts on the
# same 0.6B Q8_0 files, at -cpu cortex-a53, cortex-a76 and max, llama.cpp cross-built per level
# (cached). COUNT_ARGS: e.g. --levels a76 --frames 8 --bytes. Not in .ci/run: see the script.
COUNT_ARGS ?=
aarch64-count: setup llama-src
	LLAMA_SRC=$(LLAMA_SRC) KAZETTS_CACHE=$(KAZETTS_CACHE) $(VENV)/bin/python scripts/aarch64_count.py $(COUNT_ARGS)
