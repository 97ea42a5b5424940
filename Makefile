# qos-guard: `make run` starts the webhook with a local CA, `make test` installs and runs every check.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: install tools run test lint clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@rm -f $(VENV)/.installed-*
	@touch $@

install: $(STAMP)

# helm, etcd and kube-apiserver, built from the Go module proxy once and cached outside the repository
# (~/.cache/qos-guard/tools, or $$QOS_GUARD_TOOLS) by version. The first build takes several minutes.
tools:
	bash hack/build-tools.sh all

run: install
	$(BIN)/qos-guard serve

lint: install
	$(BIN)/ruff check webhook tests
	$(BIN)/mypy webhook

test: lint tools
	$(BIN)/pytest

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
