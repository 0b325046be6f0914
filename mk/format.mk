# The formatters: ruff for Python, clang-format for native/'s C++ (configs: pyproject.toml's
# [tool.ruff], .clang-format; both pinned in the test extra, so .venv has them).
#   make format         rewrite every file in place
#   make format-check   fail, naming the files, where one would change (CI runs it)
FORMAT_PY  := kazetts tests scripts native/cmake
FORMAT_CPP  = $(shell git ls-files 'native/*.cpp' 'native/*.h' 'scripts/*.c')

.PHONY: format format-check

format: setup
	$(VENV)/bin/ruff format -q $(FORMAT_PY)
	$(VENV)/bin/clang-format -i $(FORMAT_CPP)

format-check: setup
	$(VENV)/bin/ruff format --check $(FORMAT_PY)
	$(VENV)/bin/clang-format --dry-run --Werror $(FORMAT_CPP)
