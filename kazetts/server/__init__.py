"""`kazetts serve`: an OpenAI-compatible speech server (aiohttp) around one kazetts.TTS."""
