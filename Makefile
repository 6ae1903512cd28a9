# r1infer - one Makefile. `make` builds build/r1infer and build/libr1infer.a.
#   make test        build and run the test suite (ends with "N passed, N failed")
#   make SAN=1 test  the same under AddressSanitizer + UBSan (in build-san/)
#   make demo        build, synthesize a tiny model, generate from it
#   make bench       the default benchmark (synthetic 1.5b)
#   make CUDA=1      also build the CUDA backend (needs nvcc)
#   make MPI=0|1     without / with tensor parallelism over MPI (default: built
#                    when mpicc is installed; run under mpirun -np N)
#   make CUDA=1 NCCL=1  also the NCCL collectives on GPU memory
#   make OPENCL=0|1  without / with the OpenCL backend (default: built when the
#                    OpenCL headers and ICD loader are installed; CLBlast is
#                    used for prefill when clblast_c.h is there, CLBLAST=0 not)
#   make format      clang-format every C source (.clang-format); make format-check: CI's check

# `make` with no target builds the CLI and the library (the rules below
# start with generated headers, which must not become the default goal)
.DEFAULT_GOAL := all

CC      ?= cc
SAN     ?= 0
CUDA    ?= 0
ifeq ($(SAN),1)
BUILD   ?= build-san
OPT     ?= -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
else
BUILD   ?= build
OPT     ?= -O2 -g
endif

CPPFLAGS := -Iinclude -Isrc -D_GNU_SOURCE
CFLAGS   := -std=c11 -Wall -Wextra -Werror -pthread -MMD -MP $(OPT) $(EXTRA_CFLAGS)
LDFLAGS  := -pthread $(OPT)
LDLIBS   := -lpcre2-8 -lutf8proc -ljansson -lmicrohttpd -lm

# OpenCL (ocl-icd-opencl-dev, opencl-c-headers; CLBlast: libclblast-dev)
OPENCL  ?= $(if $(and $(wildcard /usr/include/CL/cl.h),$(wildcard /usr/lib/*/libOpenCL.so /usr/lib/libOpenCL.so /usr/local/lib/libOpenCL.so)),1,0)
CLBLAST ?= $(if $(wildcard /usr/include/clblast_c.h),$(OPENCL),0)

# MPI (openmpi-bin, libopenmpi-dev): tensor parallelism over ranks started
# by mpirun (runtime/comm_mpi.c); default: built when mpicc is installed
MPI     ?= $(if $(shell command -v mpicc 2>/dev/null),1,0)
ifeq ($(MPI),1)
CPPFLAGS += -DR1_MPI=1 $(shell mpicc --showme:compile)
LDLIBS   += $(shell mpicc --showme:link)
endif

LIB_SRC  := $(shell find src -name '*.c' ! -path 'src/cli/*' ! -path 'src/kernels/opencl/*' | sort)
ifeq ($(OPENCL),1)
LIB_SRC  += $(sort $(wildcard src/kernels/opencl/*.c))
CPPFLAGS += -DR1_OPENCL=1
LDLIBS   += -lOpenCL
CL_GEN_OBJ := $(BUILD)/gen/opencl_source.o
ifeq ($(CLBLAST),1)
CPPFLAGS += -DR1_CLBLAST=1
LDLIBS   := -lclblast $(LDLIBS)
endif
endif
CLI_SRC  := $(sort $(wildcard src/cli/*.c))
TEST_SRC := $(sort $(wildcard tests/test_*.c))

ifeq ($(CUDA),1)
NVCC      ?= nvcc
CU_SRC    := $(sort $(wildcard src/kernels/cuda/*.cu))
CU_OBJ    := $(CU_SRC:%.cu=$(BUILD)/%.o)
CPPFLAGS  += -DR1_CUDA=1
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(shell which $(NVCC)))
# A100 and H100/H200 code, and PTX for later GPUs (CI's build check: one arch)
CUDA_GENCODE ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
                -gencode arch=compute_90,code=compute_90
LDLIBS    += -L$(CUDA_HOME)/lib64 -lcudart -lcublas -lstdc++
NVFLAGS   := -O3 -std=c++17 -Iinclude -Isrc -DR1_CUDA=1 -MMD -MP \
             -Xcompiler -Wall,-Wextra,-Wno-unused-parameter -Werror all-warnings \
             $(CUDA_GENCODE) $(EXTRA_NVFLAGS)
endif

# NCCL: the collectives on GPU memory (runtime/comm_nccl.c); needs CUDA=1 MPI=1
NCCL    ?= 0
ifeq ($(NCCL),1)
ifneq ($(CUDA)$(MPI),11)
$(error NCCL=1 needs CUDA=1 and MPI=1 (ranks start and bootstrap with mpirun))
endif
CPPFLAGS  += -DR1_NCCL=1 -I$(CUDA_HOME)/include
LDLIBS    := $(filter-out -lstdc++,$(LDLIBS)) -lnccl -lstdc++
endif

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(CU_OBJ) $(CL_GEN_OBJ)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
LIB      := $(BUILD)/libr1infer.a
BIN      := $(BUILD)/r1infer

# `r1infer --version`: the commit, rewritten only when it changes (so a
# build in the same commit relinks nothing); "unknown" outside git.
VERSION    := 0.1.0
GIT_COMMIT := $(or $(shell git describe --always --dirty --exclude='*' 2>/dev/null),unknown)
$(BUILD)/gen/version.h: FORCE
	@mkdir -p $(dir $@)
	@printf '#define R1_VERSION "%s"\n#define R1_GIT_COMMIT "%s"\n' '$(VERSION)' '$(GIT_COMMIT)' > $@.tmp
	@if cmp -s $@.tmp $@; then rm $@.tmp; else mv $@.tmp $@; fi
$(BUILD)/src/cli/version.o: $(BUILD)/gen/version.h
$(BUILD)/src/cli/version.o: CPPFLAGS += -I$(BUILD)/gen

.PHONY: all test demo bench format format-check clean tests fuzz deps FORCE
all: $(BIN) $(LIB)
	@echo "built $(BIN) (CUDA=$(CUDA) MPI=$(MPI) NCCL=$(NCCL) OPENCL=$(OPENCL) CLBLAST=$(CLBLAST) SAN=$(SAN))"

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BIN): $(CLI_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(LIB) $(LDLIBS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

# kernels.cl embedded as a C array (od and sed: no extra tool)
$(BUILD)/gen/opencl_source.c: src/kernels/opencl/kernels.cl
	@mkdir -p $(dir $@)
	{ echo '/* generated from $< by the Makefile: do not edit */'; \
	  echo 'const char r1cl_source[] = {'; \
	  od -An -v -tx1 $< | sed -e 's/ \([0-9a-f][0-9a-f]\)/0x\1,/g'; \
	  echo '0x00};'; echo 'const unsigned r1cl_source_len = sizeof r1cl_source - 1;'; } > $@.tmp && mv $@.tmp $@

$(BUILD)/gen/opencl_source.o: $(BUILD)/gen/opencl_source.c
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c -o $@ $<

$(BUILD)/tests/%: tests/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Itests -o $@ $< $(LIB) $(LDLIBS)

tests: $(BIN) $(TEST_BIN) $(BUILD)/tools/gpu_bench $(BUILD)/tools/cpu_table $(BUILD)/tools/mm_bench \
       $(BUILD)/tools/tile_hot $(BUILD)/tools/grammar_bench $(BUILD)/tools/tp_bench $(BUILD)/tools/attn_bench

# Matmul kernels of one model's shapes, dtypes side by side (build/tools/mm_bench).
$(BUILD)/tools/mm_bench: tools/mm_bench.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# One decode tile alone, L2-hot, one thread (build/tools/tile_hot ISA DTYPE K ROWS ITERS).
$(BUILD)/tools/tile_hot: tools/tile_hot.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# Prefill and decode of one model at every weight format, next to a bandwidth
# probe, in one run (build/tools/cpu_table MODEL_DIR).
$(BUILD)/tools/cpu_table: tools/cpu_table.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# Decode under tensor parallelism (build/tools/tp_bench alone, then under mpirun -np N).
$(BUILD)/tools/tp_bench: tools/tp_bench.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# Decode attention alone at depth, split along the context or by heads only
# (build/tools/attn_bench [--shape 1.5b] [--depth 8192,16384,32768] [-t 1,2]).
$(BUILD)/tools/attn_bench: tools/attn_bench.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# What grammar-constrained sampling costs per token (build/tools/grammar_bench MODEL SCHEMA.json).
$(BUILD)/tools/grammar_bench: tools/grammar_bench.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# The GPU benchmark (scripts/gpu-check.sh); without CUDA it only says so.
$(BUILD)/tools/gpu_bench: tools/gpu_bench.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(LIB) $(LDLIBS)

deps:
	@bash scripts/install-deps.sh

# TESTS="loader server ...": only those (scripts/run-tests.sh R1_TESTS),
# built with the CLI alone (a shell test that runs a test program, as
# gguf_tokenizer runs test_gguf, needs that program's name in TESTS too)
TEST_SEL = $(filter $(addprefix $(BUILD)/tests/test_,$(TESTS)),$(TEST_BIN))
test: deps
	@$(MAKE) --no-print-directory $(if $(TESTS),$(BIN) $(TEST_SEL),tests)
	@BUILD=$(BUILD) R1_TESTS="$(TESTS)" bash scripts/run-tests.sh

demo: deps
	@$(MAKE) --no-print-directory all
	bash scripts/demo.sh $(BIN)

bench: $(BIN)
	$(BIN) bench --synthetic 1.5b --backend cpu --compare ref --csv $(BUILD)/bench.csv --json $(BUILD)/bench.json --svg $(BUILD)/bench.svg

fuzz:
	bash scripts/fuzz.sh 60

FORMAT_FILES = $$(find src include tests tools -name '*.[ch]' | sort)
format:
	clang-format -i --style=file $(FORMAT_FILES)
# every C source as .clang-format writes it (CI); the files that differ are named
format-check:
	@bad=0; for f in $(FORMAT_FILES); do clang-format --style=file "$$f" | cmp -s "$$f" - || { echo "not formatted: $$f (make format)"; bad=$$((bad + 1)); }; done; \
	n=$$(find src include tests tools -name '*.[ch]' | wc -l); echo "format: $$((n - bad)) passed, $$bad failed"; [ $$bad -eq 0 ]

clean:
	rm -rf build build-san build-fuzz

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d)

# Cross-build the kernel tests for aarch64 and run it under qemu (NEON, dotprod).
.PHONY: test-arm
test-arm:
	BUILD=$(BUILD) bash scripts/test-arm.sh
