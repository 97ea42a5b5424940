# qos-guard: `make run` starts the webhook with a local CA, `make test` installs and runs every check.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
VERSION := $(shell sed -n 's/^__version__ = "\(.*\)"/\1/p' webhook/__init__.py)
EDITABLE_QUIET := ignore:Editable installation:UserWarning
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: install tools node-tools run image image-push test test-fast test-versions test-minors lint bench clean docs \
	docs-browser

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	@# setuptools says "Editable installation ... Please be careful with folders ..." as a warning pip shows even
	@# with --quiet: it is information for setuptools' own users, not for someone running make run.
	PYTHONWARNINGS="$${PYTHONWARNINGS:+$$PYTHONWARNINGS,}$(EDITABLE_QUIET)" $(BIN)/python -m pip install --quiet -e '.[test,bench,docs]'
	@# An editable install compiles nothing, and with PYTHONDONTWRITEBYTECODE set every run would compile every
	@# module again (~40 ms of each `qos-guard check`); pip compiles a regular install the same way.
	$(BIN)/python -m compileall -q webhook
	@rm -f $(VENV)/.installed-*
	@touch $@

install: $(STAMP)

# helm, etcd, kube-apiserver, kubectl, promtool, an OCI registry and the oracles, built from the Go module proxy
# once and cached outside the repository
# (~/.cache/qos-guard/tools, or $$QOS_GUARD_TOOLS) by version. The first build takes several minutes.
# The releases the oracle differentials (tests/fidelity) run against in `make test`: the oldest supported minor,
# the tools' default and the newest released (each oracle build is one more k8s.io/kubernetes compile, about 5
# CPU-minutes from a warm module cache); `make test-versions` runs every minor. 1.38 (v1.38.0-beta.0, a
# pre-release) stays out: its oracle is 6.6 CPU-minutes more from an empty build cache (Go 1.27 compiles the
# standard library too; measured 2026-12-07, 25 minutes wall at load 20), which from empty caches would take the
# slowest measured run (66 minutes) to an estimated 75 of CI's 90; when v1.38.0 is served and becomes the default
# minor, it replaces v1.37.2 here at no added cost (hack/release-day.sh v1.38.0 does).
ORACLE_VERSIONS ?= v1.33.13,v1.36.3,v1.37.2

tools:
	bash hack/build-tools.sh all
	@for v in $$(echo $(ORACLE_VERSIONS) | tr , ' '); do KUBE_VERSION=$$v bash hack/build-tools.sh oracle >/dev/null; done

# On this machine only (127.0.0.1), with a local CA in certs/localhost/; ARGS go last and win, e.g.
# make run ARGS="--bind 0.0.0.0:8443 --config config.yaml".
ARGS ?=
run: install
	$(BIN)/qos-guard serve --bind 127.0.0.1:8443 --metrics-bind 127.0.0.1:8080 $(ARGS)

# The webhook image from the Dockerfile (docker when its daemon answers, else buildah: hack/image.sh), named as
# the chart runs it: make image REGISTRY=registry.example.com:5000, then make image-push REGISTRY=... and
# helm install ... --set image.registry=registry.example.com:5000 (charts/qos-guard/README.md).
REGISTRY ?=
IMAGE ?= $(if $(REGISTRY),$(REGISTRY)/)qos-guard/qos-guard:$(VERSION)
image:
	bash hack/image.sh build "$(IMAGE)"

image-push:
	bash hack/image.sh push "$(IMAGE)"

lint: install
	$(BIN)/ruff check webhook tests bench hack
	$(BIN)/mypy webhook tests bench hack/chart_readme.py hack/docs_browser.py hack/generate.py hack/reference.py hack/reference_observed.py \
		hack/podresources_stubs.py hack/versions_summary.py
	$(BIN)/lint-imports

# The node tests' tools and images (tests/node): kubelet, containerd, CNI plugins, the webhook image. Only as
# root, where those tests can run; elsewhere they are skipped with the reason.
node-tools:
	@if [ "$$(id -u)" = 0 ]; then bash hack/node-deps.sh && \
		{ bash hack/node-images.sh $(VERSION) >/dev/null & images=$$!; bash hack/build-tools.sh node >/dev/null && \
		  wait $$images; }; else echo "not root: tests/node will be skipped"; fi

test: lint tools node-tools
	QOS_GUARD_ORACLE_VERSIONS=$(ORACLE_VERSIONS) $(BIN)/pytest
	@$(MAKE) --no-print-directory test-minors

# Every Kubernetes minor the project is proven on, one after the other (hack/test-versions.sh): at each, the
# e2e tier and the oracle differential (VERSION_TIERS; add node as root), then one line per minor and tier:
# counts passed, failed, skipped with the reasons. Each minor's kube-apiserver, kubectl and kube-scheduler are
# built once (cached by version; docs/contributing.md "What a run costs" has the measured cost of each). A
# pre-release here is PRERELEASES' (webhook/core/kubeversion.py; tests/unit/test_kubeversion.py holds them
# equal): move both with hack/release-day.sh.
KUBE_VERSIONS ?= v1.33.13 v1.34.12 v1.35.8 v1.36.5 v1.37.2 v1.38.0-beta.0
VERSION_TIERS ?= e2e fidelity
test-versions: install
	TIERS="$(VERSION_TIERS)" bash hack/test-versions.sh $(KUBE_VERSIONS)

# What `make test` runs at other minors besides the default one: nothing unless TEST_MINORS is set, e.g.
# make test TEST_MINORS="v1.33.13 v1.37.2" (the admission e2e files and the oracle differential at the oldest
# and the newest minor; what each costs from empty caches is in docs/contributing.md "What a run costs").
TEST_MINORS ?=
MINOR_TESTS ?= tests/e2e/test_versions.py tests/e2e/test_admission.py tests/e2e/test_policy.py
test-minors: install
	@if [ -n "$(TEST_MINORS)" ]; then TIERS="e2e fidelity" E2E_TESTS="$(MINOR_TESTS)" \
		bash hack/test-versions.sh $(TEST_MINORS); fi

# The inner loop while editing: unit, rule-fixture and CLI tests, no tool build (under a minute).
test-fast: install
	$(BIN)/pytest -n auto --dist worksteal -m "not slow and not e2e and not node"

# The documentation site from docs/ (mkdocs.yml) into site/: --strict fails on a broken link or anchor, a page
# missing from the nav, or a reference page hack/generate.py would write differently (tests/unit/test_docs.py
# builds it too and checks every link of the built pages). Open site/index.html, or `mkdocs serve` to edit.
docs: install
	$(BIN)/python hack/generate.py --check
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# Every built page opened in headless Chromium (Debian's, installed by hack/browser-deps.sh as root): fails on a
# page or asset answered with an error, a request off the site, a console error or a page that did not render.
# Not part of `make test`: on the 2-core CI machine the package costs about a minute to install (and ~100 MB) and
# the 56 pages about 80 s, while the pages are Markdown under a pinned theme that `make docs` and
# tests/unit/test_docs.py already hold to strict builds and live links; run it when the theme, mkdocs.yml or raw
# HTML in a page changes. (It caught the theme asking GitHub's API from every reader's browser: no repo_url now.)
docs-browser: docs
	bash hack/browser-deps.sh >/dev/null
	$(BIN)/python hack/docs_browser.py site

# The peers run beside qos-guard: checkov in its own virtualenv (its dependencies are many and pinned),
# kube-score and Kyverno built from the Go module proxy. Results go to docs/performance/. BENCH_BASELINE=REV also
# measures that revision's webhook and per-request costs beside this tree (before/after).
CHECKOV_VENV := $(HOME)/.cache/qos-guard/checkov-3.3.30
bench: install
	bash hack/build-tools.sh kube-score
	@test -x $(CHECKOV_VENV)/bin/checkov || ($(PYTHON) -m venv $(CHECKOV_VENV) && \
		$(CHECKOV_VENV)/bin/python -m pip install --quiet 'checkov==3.3.30')
	$(BIN)/python -m bench.run $(if $(BENCH_BASELINE),--baseline $(BENCH_BASELINE))
	$(BIN)/python -m bench.admission_latency
	@# fix --dry-run beside an in-place fix on one 20 MB file (docs/performance/fix.md)
	$(BIN)/python -m bench.fix_speed
	$(BIN)/python -m bench.numa
	$(BIN)/python -m bench.extender $(if $(BENCH_BASELINE),--baseline $(BENCH_BASELINE))
	$(BIN)/python -m bench.extender_memory
	$(BIN)/python -m bench.scheduler
	@# Kyverno's admission controller and CLI (hack/build-tools.sh kyverno, not part of `make tools`) beside the
	@# webhook and the generated policies on one API server; its rows keep the error if it cannot be built here.
	$(BIN)/python -m bench.peers

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis site
