"""The stages of the data flow: prompt, talker (llama.cpp), sampling, code predictor and codec (libkazetts)."""
