"""The ranges a request's numbers must fall in, shared by the engine, the CLI and the server.

Kept apart from kazetts.engine.tts so that `kazetts -h` and argument parsing stay free of
llama_cpp and the native library."""

MAX_THREADS = 512  # GGML_MAX_N_THREADS
MAX_SEED = 2**63 - 1  # the native engine's request takes an int64 seed: both engines then draw alike
