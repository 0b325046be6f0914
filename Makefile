# kazetts set-up and checks. Two commands do everything on a fresh machine:
#   make demo   - install everything, build the tiny synthetic model, synthesize (main job)
#   make test   - install runtime + reference environments and run the whole test suite
#
# Environments (both live in the repo, both gitignored):
#   .venv      runtime: kazetts + llama-cpp-python + gguf/numpy/soundfile. No torch (Termux-like).
#   .venv-ref  reference: torch 2.13.0 CPU, transformers 4.57.3, qwen-tts 0.1.1 (no deps) and what
#              its 12 Hz modules import. Used to dump goldens and by the torch-gated tests.
# llama-cpp-python takes ~5 min to compile on 2 cores: it is built once into a wheel cache keyed by
# architecture and CPU flags (it is compiled for the native CPU), and every environment and fresh
# clone on this machine installs that wheel.

PYTHON      ?= python3
VENV        := .venv
VENV_REF    := .venv-ref
LLAMA_CPP_VERSION := 0.3.36
CPU_KEY     := $(shell (uname -m; grep -m1 -E '^(flags|Features)' /proc/cpuinfo 2>/dev/null) | sha256sum | cut -c1-12)
WHEEL_CACHE ?= $(HOME)/.cache/kazetts/wheels-$(CPU_KEY)
PIP_FLAGS   ?= -q

# The llama.cpp sources of the same release: ggml headers for native/, and llama.cpp's own
# converter, which the tests compare kazetts' GGUF files with.
KAZETTS_CACHE ?= $(HOME)/.cache/kazetts
LLAMA_SRC   := $(KAZETTS_CACHE)/src/llama_cpp_python-$(LLAMA_CPP_VERSION)
NATIVE_LIB  := kazetts/lib/libkazetts.so
NATIVE_SRC  := $(wildcard native/CMakeLists.txt native/src/* native/include/kazetts/*)

.PHONY: setup ref native llama-src demo test asan clean-venvs

setup: $(VENV)/.installed $(NATIVE_LIB)
ref: $(VENV_REF)/.installed
native: $(NATIVE_LIB)
llama-src: $(LLAMA_SRC)/.unpacked

$(LLAMA_SRC)/.unpacked:
	mkdir -p $(KAZETTS_CACHE)/sdist $(KAZETTS_CACHE)/src
	$(PYTHON) -m pip download $(PIP_FLAGS) --no-deps --no-binary :all: --no-build-isolation \
		-d $(KAZETTS_CACHE)/sdist llama-cpp-python==$(LLAMA_CPP_VERSION)
	tar xzf $(KAZETTS_CACHE)/sdist/llama_cpp_python-$(LLAMA_CPP_VERSION).tar.gz -C $(KAZETTS_CACHE)/src
	touch $@

$(NATIVE_LIB): $(VENV)/.installed $(LLAMA_SRC)/.unpacked $(NATIVE_SRC)
	cmake -S native -B build/native -DGGML_INCLUDE_DIR=$(LLAMA_SRC)/vendor/llama.cpp/ggml/include \
		-DGGML_LIB_DIR=$$($(VENV)/bin/python -c "import llama_cpp, pathlib; print(pathlib.Path(llama_cpp.__file__).parent / 'lib')")
	cmake --build build/native -j2
	mkdir -p $(dir $@) && cp build/native/libkazetts.so $@

$(WHEEL_CACHE)/.llama-cpp-python-$(LLAMA_CPP_VERSION):
	mkdir -p $(WHEEL_CACHE)
	@echo "building llama-cpp-python $(LLAMA_CPP_VERSION) once (~5 min on 2 cores) into $(WHEEL_CACHE)"
	$(PYTHON) -m pip wheel $(PIP_FLAGS) --no-deps -w $(WHEEL_CACHE) llama-cpp-python==$(LLAMA_CPP_VERSION)
	touch $@

$(VENV)/.installed: pyproject.toml $(WHEEL_CACHE)/.llama-cpp-python-$(LLAMA_CPP_VERSION)
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install $(PIP_FLAGS) --find-links $(WHEEL_CACHE) -e '.[test,synthetic]'
	touch $@

$(VENV_REF)/.installed: requirements-ref.txt pyproject.toml
	test -x $(VENV_REF)/bin/python || $(PYTHON) -m venv $(VENV_REF)
	$(VENV_REF)/bin/pip install $(PIP_FLAGS) -r requirements-ref.txt
	$(VENV_REF)/bin/pip install $(PIP_FLAGS) --no-deps qwen-tts==0.1.1
	$(VENV_REF)/bin/pip install $(PIP_FLAGS) --no-deps -e .
	touch $@

DEMO_TEXT := Bonjour ! Le 14 juillet 1789, à Paris, près de 3 000 personnes ont pris la Bastille.

# Main job: build the tiny synthetic model, convert it, synthesize a French sentence, check parity.
demo: setup
	$(VENV)/bin/python scripts/make_checkpoint.py tiny models/tiny-custom_voice -q
	$(VENV)/bin/python -m kazetts convert models/tiny-custom_voice -o models/tiny --type f32 -q
	$(VENV)/bin/python -m kazetts say "$(DEMO_TEXT)" --model models/tiny --language french --speaker vivian \
		--greedy -o out/demo.wav --verbose
	$(VENV)/bin/python -m kazetts validate models/tiny dumps

test: setup ref
	$(VENV)/bin/python -m pytest tests

# The native stages' tests under AddressSanitizer + UBSan (a separate build of libkazetts; the
# runtime is preloaded into the non-instrumented Python, with libstdc++ so that exceptions work).
ASAN_TESTS := tests/test_native.py tests/test_code_predictor.py tests/test_codec.py tests/test_voice_clone.py
asan: setup
	cmake -S native -B build/asan -DKAZETTS_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DGGML_INCLUDE_DIR=$(LLAMA_SRC)/vendor/llama.cpp/ggml/include \
		-DGGML_LIB_DIR=$$($(VENV)/bin/python -c "import llama_cpp, pathlib; print(pathlib.Path(llama_cpp.__file__).parent / 'lib')")
	cmake --build build/asan -j2
	LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libstdc++.so.6)" \
		ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1 \
		KAZETTS_NATIVE_LIB=build/asan/libkazetts.so \
		$(VENV)/bin/python -m pytest -q -s -p no:cacheprovider $(ASAN_TESTS) -k "not quantized_weights_long and not beyond_300"

clean-venvs:
	rm -rf $(VENV) $(VENV_REF)

-include mk/*.mk
