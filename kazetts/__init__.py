"""kazetts: Qwen3-TTS (12 Hz) from GGUF files on Android-class CPUs.

`kazetts.TTS` is the synthesis engine (see kazetts.engine.tts); it is imported on first use so that
`import kazetts` stays cheap for the converter and the tools.
"""


def __getattr__(name):
    if name in ("TTS", "Result", "AudioChunk"):
        from kazetts.engine import tts

        return getattr(tts, name)
    if name == "Voice":
        from kazetts.engine.voice import Voice

        return Voice
    raise AttributeError(f"module 'kazetts' has no attribute {name!r}")
