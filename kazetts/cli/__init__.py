"""Command-line faces of kazetts: argument parsing and one module per command group."""
