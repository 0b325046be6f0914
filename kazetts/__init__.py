"""kazetts: Qwen3-TTS (12 Hz) from GGUF files on Android-class CPUs."""
