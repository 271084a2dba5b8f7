# Two commands do all set-up on a fresh machine:
#   make run    start the whole app (web, worker, embedded Redis, SQLite)
#   make test   run the test suite
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: run test install chromium bench clean conformance

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

install: $(VENV)/.installed

run: install
	$(PY) -m inspector.launch all

# Browser tests need Debian's Chromium; install it when we can (root with apt), else they skip.
chromium:
	@if [ -x /usr/bin/chromium ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	else echo "Chromium not installed and cannot install it here: browser tests will skip."; fi

test: install chromium
	$(PY) -m inspector.launch test -- $(ARGS)

# The official MCP client conformance suite against conformance/client.py (Node 22 comes from npm).
conformance: install
	cd conformance && npm ci --no-audit --no-fund --loglevel=error
	$(PY) conformance/run.py

clean:
	rm -rf $(VENV) data test-artifacts
