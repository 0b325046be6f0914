"""The GGUF format as kazetts reads it: a fast header parser and the tensor/key names."""
