"""The engine: a request through the stages, frame by frame, for short and long text."""
