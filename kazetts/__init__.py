"""kazetts: Qwen3-TTS (12 Hz) from GGUF files on Android-class CPUs.

`kazetts.TTS` is the synthesis engine (see kazetts.engine.tts), `kazetts.Request` what one request
asks of it (kazetts.request); they are imported on first use so that
`import kazetts` stays cheap for the converter and the tools.
"""

__version__ = "0.1.0"


from kazetts.errors import BusyError, KazettsError, ModelFileError  # noqa: F401  (cheap: no imports)


def __getattr__(name):
    if name == "Request":
        from kazetts.request import Request

        return Request
    if name in ("TTS", "Result", "AudioChunk", "Stream"):
        from kazetts.engine import tts

        return getattr(tts, name)
    if name == "Voice":
        from kazetts.engine.voice import Voice

        return Voice
    raise AttributeError(f"module 'kazetts' has no attribute {name!r}")
