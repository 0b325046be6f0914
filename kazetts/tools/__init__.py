"""GGUF file tools: the converter, the quantizer and the inspector."""
