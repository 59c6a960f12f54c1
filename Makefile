# The two commands a user needs: `make run` and `make test`. Each sets up what is missing first
# (ci/setup.sh: Open MPI, .venv, Horovod built once and cached) and skips what is already done.
VENV ?= .venv
NP ?= 4
ARGS ?=

.PHONY: setup run test test-fast lint format bench clean

setup:
	@bash ci/setup.sh

run: setup
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH horovodrun -np $(NP) hvd-linreg $(ARGS)

# ci/test.sh sets up first, as a timed stage (in CI once the clean roots have started).
test:
	@bash ci/test.sh

# Only the single-process tests: seconds, not minutes.
test-fast:
	@bash ci/test.sh --marks "not multiprocess"

# hvd-linreg vs a NumPy + mpi4py floor and MultiWorkerMirroredStrategy, side by side: prints a
# table, writes bench/results/latest.json (about 12 minutes on 2 cores; as root also across 2 namespaced hosts).
bench: setup
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(VENV)/bin/python bench/run.py

lint: setup
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

format: setup
	$(VENV)/bin/ruff format . && $(VENV)/bin/ruff check --fix .

clean:
	rm -rf $(VENV) .venv-* .pytest_cache .ruff_cache *.egg-info
