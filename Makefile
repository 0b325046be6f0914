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

# The llama.cpp sources of the same release: llama.cpp's own converter, which the tests compare
# kazetts' GGUF files with, and the sources of the aarch64 cross build and of llama-tts.
KAZETTS_CACHE ?= $(HOME)/.cache/kazetts
LLAMA_SRC   := $(KAZETTS_CACHE)/src/llama_cpp_python-$(LLAMA_CPP_VERSION)
# libsoxr, built into libkazetts (native/cmake/soxr.cmake): the copy python-soxr's sdist vendors,
# the library the Python engine resamples with, so that native enrollment resamples the same.
SOXR_VERSION := 1.1.0
SOXR_SHA256 := 9f228ae21c78fa9359ca98d8a5e8e91f30639e438e574133dace62c5b5309e44
SOXR_SRC    := $(KAZETTS_CACHE)/src/soxr-$(SOXR_VERSION)
NATIVE_SRC  := $(wildcard pyproject.toml native/CMakeLists.txt native/cmake/* native/src/*/* native/include/kazetts/* \
	native/jni/* native/java/src/org/kazetts/* native/java/test/org/kazetts/*)

.PHONY: setup ref native llama-src soxr-src demo test pip-check asan clean-venvs

setup: $(VENV)/.native
ref: $(VENV_REF)/.installed
native: $(VENV)/.native
llama-src: $(LLAMA_SRC)/.unpacked
soxr-src: $(SOXR_SRC)/.unpacked

$(LLAMA_SRC)/.unpacked:
	mkdir -p $(KAZETTS_CACHE)/sdist $(KAZETTS_CACHE)/src
	$(PYTHON) -m pip download $(PIP_FLAGS) --no-deps --no-binary :all: --no-build-isolation \
		-d $(KAZETTS_CACHE)/sdist llama-cpp-python==$(LLAMA_CPP_VERSION)
	tar xzf $(KAZETTS_CACHE)/sdist/llama_cpp_python-$(LLAMA_CPP_VERSION).tar.gz -C $(KAZETTS_CACHE)/src
	touch $@

$(SOXR_SRC)/.unpacked:
	mkdir -p $(KAZETTS_CACHE)/sdist $(KAZETTS_CACHE)/src
	$(PYTHON) -m pip download $(PIP_FLAGS) --no-deps --no-binary :all: -d $(KAZETTS_CACHE)/sdist soxr==$(SOXR_VERSION)
	echo "$(SOXR_SHA256)  $(KAZETTS_CACHE)/sdist/soxr-$(SOXR_VERSION).tar.gz" | sha256sum -c --quiet
	tar xzf $(KAZETTS_CACHE)/sdist/soxr-$(SOXR_VERSION).tar.gz -C $(KAZETTS_CACHE)/src
	touch $@

$(WHEEL_CACHE)/.llama-cpp-python-$(LLAMA_CPP_VERSION):
	mkdir -p $(WHEEL_CACHE)
	@echo "building llama-cpp-python $(LLAMA_CPP_VERSION) once (~5 min on 2 cores) into $(WHEEL_CACHE)"
	$(PYTHON) -m pip wheel $(PIP_FLAGS) --no-deps -w $(WHEEL_CACHE) llama-cpp-python==$(LLAMA_CPP_VERSION)
	touch $@

# kazetts is installed the way users install it: pip runs its build backend (scikit-build-core),
# which compiles native/ against the venv's llama-cpp-python into site-packages/kazetts/lib. Here
# editable, without build isolation (the build requirements are installed first, from the wheel
# cache) and with a kept build directory, so that `make native` after an edit recompiles only
# what changed.
$(VENV)/.installed: pyproject.toml $(WHEEL_CACHE)/.llama-cpp-python-$(LLAMA_CPP_VERSION)
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install $(PIP_FLAGS) scikit-build-core
	$(VENV)/bin/pip install $(PIP_FLAGS) --find-links $(WHEEL_CACHE) \
		$$($(VENV)/bin/python -m scikit_build_core.build requires | $(VENV)/bin/python -c "import json, sys; print(*json.load(sys.stdin))")
	touch $@

# (kazetts/lib/libkazetts.so: where `make native` used to copy the library; a stale copy there
# would shadow the built one in an editable install.)
$(VENV)/.native: $(VENV)/.installed $(NATIVE_SRC) $(SOXR_SRC)/.unpacked
	rm -f kazetts/lib/libkazetts.so
	$(VENV)/bin/pip install $(PIP_FLAGS) --no-build-isolation --find-links $(WHEEL_CACHE) \
		--config-settings=build-dir=build/editable --config-settings=cmake.define.KAZETTS_SOXR_SRC=$(SOXR_SRC) \
		-e '.[test,synthetic]'
	touch $@

$(VENV_REF)/.installed: requirements-ref.txt pyproject.toml
	test -x $(VENV_REF)/bin/python || $(PYTHON) -m venv $(VENV_REF)
	$(VENV_REF)/bin/pip install $(PIP_FLAGS) -r requirements-ref.txt
	$(VENV_REF)/bin/pip install $(PIP_FLAGS) --no-deps qwen-tts==0.1.1
	$(VENV_REF)/bin/pip install $(PIP_FLAGS) scikit-build-core
	$(VENV_REF)/bin/pip install $(PIP_FLAGS) --no-deps --no-build-isolation --config-settings=wheel.cmake=false -e .
	touch $@

DEMO_TEXT := Bonjour ! Le 14 juillet 1789, à Paris, près de 3 000 personnes ont pris la Bastille.

# Main job: build the tiny synthetic model, convert it, synthesize a French sentence, check parity.
demo: setup
	$(VENV)/bin/python scripts/make_checkpoint.py tiny models/tiny-custom_voice -q
	$(VENV)/bin/python -m kazetts convert models/tiny-custom_voice -o models/tiny --type f32 -q
	$(VENV)/bin/python -m kazetts say "$(DEMO_TEXT)" --model models/tiny --language french --speaker vivian \
		--greedy -o out/demo.wav --verbose
	$(VENV)/bin/python -m kazetts validate models/tiny dumps

test: jdk setup ref llama-src
	KAZETTS_WHEEL_CACHE=$(WHEEL_CACHE) $(VENV)/bin/python -m pytest tests

# `pip install <directory>` and `pip install git+file://<this repo>` (its committed HEAD) into
# fresh venvs, then `kazetts say` (make test runs the sdist -> wheel form; tests/test_pip_install.py).
pip-check: setup
	KAZETTS_WHEEL_CACHE=$(WHEEL_CACHE) KAZETTS_PIP_FORMS=directory,git $(VENV)/bin/python -m pytest -q -rs tests/test_pip_install.py

# The native stages' tests under AddressSanitizer + UBSan (a separate build of libkazetts against
# the venv's llama-cpp-python, as pip's build does: empty GGML_*_DIR; the runtime is preloaded
# into the non-instrumented Python, with libstdc++ so that exceptions work).
# `make fuzz` (mk/fuzz.mk) runs the file readers on the same build.
ASAN_LIB   := build/asan/libkazetts.so
ASAN_RUN   := ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
ASAN_ENV   = LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libstdc++.so.6)" \
	$(ASAN_RUN) KAZETTS_NATIVE_LIB=$(ASAN_LIB)
ASAN_TESTS := tests/test_native.py tests/test_code_predictor.py tests/test_codec.py tests/test_speaker_encoder.py tests/test_voice_clone.py \
	tests/test_voice.py tests/test_text_split.py tests/test_time_stretch.py tests/test_text_stream.py \
	tests/test_native_text_stream.py tests/test_native_enroll.py tests/test_tts_batch.py
# the TTS engine (kazetts/tts.h) driven through ctypes: requests, cancel, the rules on their own
ASAN_ENGINE_TESTS := cancel or bad_requests or instruct_rules or load_errors or beyond_the_context or \
	stream_first or talker_sampler or end_of_speech or min_frames or rng or model_info or \
	base_xvector or seed and 3 or nan_logits or same_voices or longer_than or together or more_than_max_batch or waits_in_the_queue
$(ASAN_LIB): $(VENV)/.native $(NATIVE_SRC) $(wildcard native/tests/*)
	cmake -S native -B build/asan -DKAZETTS_SANITIZE=ON -DKAZETTS_GOLDEN_CHECK=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DPython3_EXECUTABLE=$(abspath $(VENV)/bin/python) -DGGML_INCLUDE_DIR= -DGGML_LIB_DIR= -DKAZETTS_SOXR_SRC=$(SOXR_SRC)
	cmake --build build/asan -j2

# (then the conv GEMM's odd shapes, strided inputs and edge modes: golden_check's conv gemm stage;
# and rules.h's WSOLA stream and joiner: its rules stage)
asan: setup $(ASAN_LIB)
	$(ASAN_ENV) $(VENV)/bin/python -m pytest -q -s -p no:cacheprovider $(ASAN_TESTS) -k "not quantized_weights_long and not beyond_300 and not front_end and not llama_cpp_made"
	$(ASAN_ENV) $(VENV)/bin/python -m pytest -q -s -p no:cacheprovider tests/test_native_engine.py -k "$(ASAN_ENGINE_TESTS)"
	$(ASAN_ENV) $(VENV)/bin/python -m pytest -q -s -p no:cacheprovider tests/test_bad_input.py -k "native_engine_errors or two_checkpoints"
	$(ASAN_RUN) build/asan/tests/golden_check --stage "conv gemm" --stage rules

clean-venvs:
	rm -rf $(VENV) $(VENV_REF)

-include mk/*.mk
