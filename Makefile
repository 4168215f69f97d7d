# The two commands a new user needs: `make run` and `make test`. Everything else is optional.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.posenc-installed
# Reinstall when packaging or native sources change (editable install: Python edits need nothing).
INSTALL_INPUTS := pyproject.toml $(wildcard setup.py native/src/*.c native/src/*.h native/include/*.h)

.PHONY: run test install bench clean

$(STAMP): $(INSTALL_INPUTS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

install: $(STAMP)

run: install
	$(BIN)/posenc demo

test: install
	$(BIN)/python -m pytest

bench: install
	$(BIN)/posenc bench tables

clean:
	rm -rf $(VENV) build *.egg-info service/*.egg-info
