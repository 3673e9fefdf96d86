# The whole set-up on a fresh machine: `make demo` (install + main job), `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
EXTRAS ?= local,smollm2,gemma,plots,datasets,cli,taskapp,optim,server,distributed,finetune,serve,observability,mcp,ui,knowledge,lancedb,test

# llama-cpp-python compiles llama.cpp from source. The default GGML_NATIVE=ON
# build uses the CPU's AMX/AVX-512 paths, which segfault on the machines we
# target; these flags build a portable AVX2 engine instead.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
	-DGGML_AVX512=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_TILE=OFF

.PHONY: install demo test lint bench clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip install --quiet -e ".[$(EXTRAS)]"
	# llama.cpp's GGUF converters (for fine-tuned models) from the llama-cpp-python source package
	$(PY) -m promptgym.finetune.converters
	touch $@

demo: install
	$(PY) examples/demo.py

test: install
	$(PY) -m pytest -q

lint: install
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) build *.egg-info
