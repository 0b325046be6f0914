# A time-boxed fuzzing campaign over every file reader (kazetts/validation/fuzz.py): mutants of
# the tiny model's talker and mmproj GGUFs through GGUFHeader, the native code predictor and
# codec loaders (the ASan + UBSan build of `make asan`) and the talker through llama.cpp.
# Failures (crashes, sanitizer reports, hangs, unexplained exceptions) are saved under
# build/fuzz/failures/ and make the target fail. CI runs a short one with a fixed seed.
.PHONY: fuzz

FUZZ_SECONDS ?= 600
FUZZ_SEED    ?=

fuzz: setup $(ASAN_LIB)
	$(ASAN_ENV) $(VENV)/bin/python -m kazetts.validation.fuzz --seconds $(FUZZ_SECONDS) --out build/fuzz \
		$(if $(FUZZ_SEED),--seed $(FUZZ_SEED))
