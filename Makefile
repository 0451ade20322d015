# Every target is self-sufficient on a fresh machine: it creates .venv and installs what it uses.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The SDK (this directory) with every extra (group, cli, metrics) and the tools (dev), and the
# other distributions of the repository
PACKAGES := -e '.[group,cli,metrics,dev]' -e operator -e spark_apps -e testbed

.PHONY: help venv test test-fast lint crds sandbox bench e2e chaos failover soak clean

help:
	@echo "make test     - create .venv, install everything, lint, run the whole suite"
	@echo "make sandbox  - run the main demo on the embedded testbed"
	@echo "make lint     - ruff + mypy + the import layers (lint-imports)"
	@echo "make bench    - run the benchmarks, write benchmarks/report.md"
	@echo "make crds     - regenerate crds/ from the pydantic models"
	@echo "make e2e      - the chart, the operator's image, member pods and the Spark apps on a real kubelet (root)"
	@echo "make chaos    - 50 s seeded chaos run alone (make test runs it too)"
	@echo "make failover - chaos on a replicated Kafka (3 brokers, kill -9 of leaders and coordinators), 5 rounds"
	@echo "make soak     - 30 min chaos soak, 20 failover rounds, every crash point and fault case (ORDO_CHAOS_SEED replays a run)"

$(STAMP): VERSION pyproject.toml operator/pyproject.toml spark_apps/pyproject.toml testbed/pyproject.toml \
  setup.py operator/setup.py spark_apps/setup.py testbed/setup.py sdk/ordo/_fastproduce.c sdk/ordo/_fastscan.c sdk/ordo/_murmur2.h scripts/system-deps testbed/kube-apiserver/go.mod
	scripts/system-deps
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(PACKAGES)
	$(BIN)/python -c 'from ordo_testbed.kafka.jars import main; main()'
	$(BIN)/python -c 'from ordo_testbed.kube.binaries import main; main()'
	touch $(STAMP)

venv: $(STAMP)

# The whole suite, after lint: ruff and mypy --strict are part of passing. tests/ holds ordo's tests
# (tests/integration: on the harness), testbed/tests the harness's own. One round of the failover
# chaos (tests/chaos/test_replicated_chaos.py: kill -9 of the broker holding a role) runs with it,
# on the 3-broker cluster the session starts once for its other tests anyway (make failover: 5).
test: lint
	$(BIN)/python -c 'from ordo_testbed.promtool import main; main()'
	ORDO_FAILOVER_ROUNDS=$${ORDO_FAILOVER_ROUNDS:-1} $(BIN)/python -m pytest tests testbed/tests

test-fast: $(STAMP)
	$(BIN)/python -m pytest tests/unit

lint: $(STAMP)
	$(BIN)/ruff check sdk operator spark_apps testbed tests benchmarks examples
	$(BIN)/ruff format --check sdk operator spark_apps testbed tests benchmarks examples
	$(BIN)/mypy
	$(BIN)/mypy tests/unit testbed/tests/kafka benchmarks
	$(BIN)/mypy tests/integration/*.py
	$(BIN)/mypy --explicit-package-bases tests/deploy tests/e2e tests/chaos testbed/tests/kube testbed/tests/test_testbed_up.py
	$(BIN)/mypy examples
	$(BIN)/lint-imports

crds: $(STAMP)
	$(BIN)/ordo crds --output crds
	$(BIN)/ordo crds --output charts/ordo/crds

sandbox: $(STAMP)
	$(BIN)/ordo sandbox

bench: $(STAMP)
	$(BIN)/python -m benchmarks

# The whole e2e suite on this machine (root): Docker and containerd from Debian's packages,
# every image built here, a real kubelet, the chart with helm, the Spark apps as driver and
# executor pods through Spark's own Kubernetes scheduler (tests/e2e/README.md). Prints each
# step's time; ORDO_E2E_KEEP=1 leaves the cluster running.
e2e: $(STAMP)
	scripts/e2e-deps
	ORDO_E2E=1 $(BIN)/python -m pytest tests/e2e -m e2e

# ORDO_CHAOS_SECONDS / ORDO_CHAOS_SEED override the length and replay a seed; the report lines
# (one JSON per run) go to chaos-report.jsonl.
chaos: $(STAMP)
	$(BIN)/python -m pytest -s tests/chaos

# The replicated run (tests/chaos/test_replicated_chaos.py) runs only when given its rounds: about
# 4 minutes for five on 2 cores, more than make test affords.
failover: $(STAMP)
	ORDO_FAILOVER_ROUNDS=$${ORDO_FAILOVER_ROUNDS:-5} $(BIN)/python -m pytest -s tests/chaos/test_replicated_chaos.py

soak: $(STAMP)
	ORDO_SOAK=1 ORDO_CHAOS_SECONDS=$${ORDO_CHAOS_SECONDS:-1800} ORDO_CHAOS_REPORT=chaos-report.jsonl \
	  ORDO_FAILOVER_ROUNDS=$${ORDO_FAILOVER_ROUNDS:-20} \
	  $(BIN)/python -m pytest -o timeout=0 -s tests/chaos tests/integration/test_faults_handoff.py \
	  tests/integration/test_expansion_crash.py tests/integration/test_expansion_delete.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
