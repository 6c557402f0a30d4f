# attnscope: one Makefile for the host C (gcc), the CUDA kernels (nvcc) and the tests.
#
#   make            build/attnscope and build/attnscope_tests (CUDA build)
#   make run        set up, build, open attnscope on the built-in tiny model
#   make test       set up, build, run every test; then the CPU tests again under ASan + UBSan
#   make bundle     dist/attnscope/: binary + the shared libraries it needs, relocatable
#   make fuzz       each libFuzzer target for FUZZ_SECONDS
#   make emu        the kernels on the CPU emulator against their CPU twins (tools/emu)
#   make test-cpu TESTS='glob*'   just some CPU tests (also test-san)
#
# BUILD=dir puts objects elsewhere; NO_CUDA=1 builds without the engine; SAN=1 adds ASan + UBSan.

BUILD ?= build
CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(CUDA_HOME)/bin/nvcc
CC ?= gcc
ifeq ($(CC),cc)
CC := gcc
endif

PKG_CFLAGS := $(shell pkg-config --cflags hdf5 ncursesw libcjson zlib 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs hdf5 ncursesw libcjson zlib 2>/dev/null)
ifeq ($(strip $(PKG_LIBS)),)
PKG_CFLAGS := -I/usr/include/hdf5/serial -I/usr/include/cjson
PKG_LIBS := -L/usr/lib/x86_64-linux-gnu/hdf5/serial -lhdf5 -lncursesw -ltinfo -lcjson -lz
endif

VERSION := $(shell git describe --always --dirty 2>/dev/null || echo unknown)

CFLAGS ?= -O2 -g
CFLAGS += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -ffp-contract=off -fopenmp \
          -I. -I$(BUILD)/gen $(filter-out -D_XOPEN_SOURCE=600,$(PKG_CFLAGS)) -MMD -MP
LDLIBS := $(PKG_LIBS) -lopenblas -fopenmp -lm -lpthread

# sm_90a for Hopper (wgmma, setmaxnreg) plus PTX for compute_80 so that Ampere, Ada, Blackwell
# and GB10 devices can JIT the portable kernels.
NVFLAGS ?= -O3 -g -lineinfo
NVFLAGS += -std=c++17 -I. -Xcompiler -Wall,-Wextra,-Werror -Werror all-warnings \
           -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_80,code=compute_80 -MMD -MP

ifeq ($(SAN),1)
CFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDLIBS += -fsanitize=address,undefined
NO_CUDA := 1
endif
# FUZZ=1 (make fuzz sets it): clang, libFuzzer coverage, ASan + UBSan, no CUDA (fuzz/README.md).
ifeq ($(FUZZ),1)
CC := clang
# clang reports an `omp simd` loop it leaves scalar (under the sanitizers) as an error with -Werror: not a defect
CFLAGS += -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined -Wno-pass-failed
LDLIBS += -fsanitize=fuzzer,address,undefined
NO_CUDA := 1
endif

# cli/ objects link into the binary directly: each command registers itself (constructor).
HOST_DIRS := model ref dumps driver tui
HOST_SRC := $(foreach d,$(HOST_DIRS),$(wildcard $(d)/*.c))
CLI_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard cli/*.c))
# tests/*.c register tests; tests/lib/*.c are their helpers (tests/lib/oracle/ is a stand-alone tool).
TEST_SRC := $(wildcard tests/*.c tests/lib/*.c)
ifeq ($(NO_CUDA),1)
ENGINE_SRC := engine/no_cuda.c engine/knobs.c engine/driver_version.c engine/bench_json.c \
              engine/trace_report.c engine/stats.c
CU_SRC :=
TEST_SRC := $(filter-out tests/gpu_% tests/lib/gpu_%,$(TEST_SRC))
CUDA_LIBS :=
else
ENGINE_SRC := $(filter-out engine/no_cuda.c,$(wildcard engine/*.c))
CU_SRC := $(wildcard kernels/*.cu engine/*.cu)
CFLAGS += -I$(CUDA_HOME)/include -DAS_HAVE_CUDA=1
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -lcublasLt -lcublas -lcudart_static -ldl -lrt -lstdc++ \
             -Wl,-rpath,'$$ORIGIN/../lib:$(CUDA_HOME)/lib64'
endif

LIB_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(HOST_SRC) $(ENGINE_SRC)) \
           $(patsubst %.cu,$(BUILD)/obj/%.cu.o,$(CU_SRC))
TEST_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(TEST_SRC))
LIB := $(BUILD)/libattnscope.a

.PHONY: all deps run test test-cpu test-san test-tui bundle bundle-tar fuzz clean
all: $(BUILD)/attnscope $(BUILD)/attnscope_tests

deps:
	@sh scripts/deps.sh

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c $< -o $@

# The version header is rewritten only when `git describe` changes (model/version.c includes it).
VERSION_H := $(BUILD)/gen/as_version_gen.h
$(VERSION_H): FORCE
	@mkdir -p $(dir $@)
	@echo '#define AS_VERSION "$(VERSION)"' >$@.tmp; cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@
$(BUILD)/obj/model/version.o: $(VERSION_H)
.PHONY: FORCE
FORCE:

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/attnscope: $(CLI_OBJ) $(LIB)
	$(CC) $(CFLAGS) -o $@ $(CLI_OBJ) $(LIB) $(CUDA_LIBS) $(LDLIBS)

# Tests link every object directly so that their constructors register.
$(BUILD)/attnscope_tests: $(TEST_OBJ) $(LIB)
	$(CC) $(CFLAGS) -o $@ $(TEST_OBJ) $(LIB) $(CUDA_LIBS) $(LDLIBS)

# Until the TUI exists: the tiny model (generated once, models/ is git-ignored) and its description.
run: deps
	@$(MAKE) --no-print-directory $(BUILD)/attnscope
	./$(BUILD)/attnscope tui --model tiny

# The whole suite: CUDA build (GPU tests skip without a device), then the CPU tests again under
# ASan + UBSan, then the terminal-driven tests.
test: deps
	@$(MAKE) --no-print-directory all
	ATTNSCOPE_BIN=./$(BUILD)/attnscope ./$(BUILD)/attnscope_tests
	@$(MAKE) --no-print-directory test-san
	@$(MAKE) --no-print-directory test-tui
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(FUZZ_SMOKE_SECONDS)

test-cpu: all
	set -f; ATTNSCOPE_BIN=./$(BUILD)/attnscope ./$(BUILD)/attnscope_tests --cpu-only $(TESTS)

SAN_BUILD ?= build-san
test-san:
	@$(MAKE) --no-print-directory BUILD=$(SAN_BUILD) SAN=1 $(SAN_BUILD)/attnscope_tests $(SAN_BUILD)/attnscope
	set -f; ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  OMP_NUM_THREADS=2 ATTNSCOPE_BIN=./$(SAN_BUILD)/attnscope ./$(SAN_BUILD)/attnscope_tests --cpu-only $(TESTS)

test-tui: $(BUILD)/attnscope
	@if ls tests/*.sh >/dev/null 2>&1; then \
	  for t in tests/*.sh; do echo "== $$t"; sh $$t $(BUILD)/attnscope || exit 1; done; fi

# libFuzzer targets (fuzz/fuzz_*.c): each replays its regressions, then runs FUZZ_SECONDS from
# its seed corpus (new inputs go to FUZZ_BUILD/corpus, findings to FUZZ_BUILD/findings).
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_SMOKE_SECONDS ?= 10
FUZZ_TARGETS := $(patsubst fuzz/fuzz_%.c,%,$(wildcard fuzz/fuzz_*.c))
fuzz:
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) FUZZ=1 $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz/%)
	sh fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)
$(BUILD)/fuzz/%: fuzz/fuzz_%.c fuzz/fuzz_util.h $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# The hostile corpus (fuzz/hostile.sh: mutations of what attnscope writes, links, FIFOs) written
# into HOSTILE_DIR, then run by tests/test_hostile.c (which writes and runs its own copy too).
HOSTILE_DIR ?= $(BUILD)/hostile
.PHONY: hostile
hostile: $(BUILD)/attnscope $(BUILD)/attnscope_tests
	sh fuzz/hostile.sh $(BUILD)/attnscope "$(HOSTILE_DIR)/corpus" "$(HOSTILE_DIR)/outside"
	ATTNSCOPE_BIN=./$(BUILD)/attnscope ./$(BUILD)/attnscope_tests 'hostile_*'

bundle: $(BUILD)/attnscope $(BUILD)/attnscope_tests $(BUILD)/attnscope_kbench $(BUILD)/attnscope_boundary
	sh scripts/bundle.sh $(BUILD) dist/attnscope

# The bundle compressed, for carrying to a GPU machine (scripts/gpu_session.sh unpacks it).
bundle-tar: bundle
	XZ_OPT=-T0 tar -C dist -cJf dist/attnscope.tar.xz attnscope
	@ls -la dist/attnscope.tar.xz

# Kernel micro-benchmark (bench/kernels_bench.cu, bench/README.md): the heavy kernels at the
# flash shapes against the measured copy bandwidth, bf16 GEMM rate and cuBLAS; needs only CUDA.
KBENCH_OBJ := $(patsubst %.cu,$(BUILD)/obj/%.cu.o,bench/kernels_bench.cu kernels/gemv.cu kernels/index_scores.cu \
              kernels/sparse_attn.cu kernels/sparse_attn_wgmma.cu kernels/attn_decode.cu kernels/topk_select.cu kernels/pdl.cu kernels/q8_1.cu \
              kernels/q2k_mmvq.cu kernels/q2k_mmq.cu kernels/row_pipe.cu kernels/rope.cu kernels/rmsnorm.cu)
.PHONY: kbench
kbench: $(BUILD)/attnscope_kbench
$(BUILD)/attnscope_kbench: $(KBENCH_OBJ)
	$(NVCC) -o $@ $(KBENCH_OBJ) -lcublasLt -lcublas

# What a dependency between two decode stages costs, by its synchronisation (bench/boundary_bench.cu):
# graph edges with and without PDL, a grid barrier and a flag in one persistent kernel; needs only CUDA.
.PHONY: boundary
boundary: $(BUILD)/attnscope_boundary
$(BUILD)/attnscope_boundary: $(BUILD)/obj/bench/boundary_bench.cu.o
	$(NVCC) -o $@ $<

# The CPU emulator (tools/emu/README.md): the kernels' own source run on the CPU against their
# CPU twins on small shapes, without a GPU (their logic, not timing or races); needs CUDA's headers.
# emu_q2k_test is tests/gpu_q2k.c's kernel tests on the emulator (its refusal test needs the device).
EMU_RUN := attn scores gemv decode decode_attn decode_scores topk attn1 q2k q2k_test
EMU_Q2K_TESTS := gpu_q2k_quantize_q8_1 gpu_q2k_mmvq_flash_shapes gpu_q2k_mmq_flash_shapes gpu_q2k_odd_sizes \
                 gpu_q2k_mmvq_every_config
EMU_CXX ?= g++
EMU_FLAGS := -std=c++20 -O1 -g -Wall -Wextra -Werror -Wno-unknown-pragmas -ffp-contract=off -fopenmp \
             -Itools/emu -I. -I$(CUDA_HOME)/include -DAS_EMU -MMD -MP
.PHONY: emu
emu: $(EMU_RUN:%=$(BUILD)/emu/emu_%)
	@rc=0; for k in $(EMU_RUN); do echo "== emu_$$k"; \
	  if [ $$k = q2k_test ]; then AS_KTEST_SMALL=1 $(BUILD)/emu/emu_$$k $(EMU_Q2K_TESTS) || rc=1; \
	  else $(BUILD)/emu/emu_$$k || rc=1; fi; done; exit $$rc
$(BUILD)/obj/tools/emu/%.o: tools/emu/%.cpp
	@mkdir -p $(dir $@)
	$(EMU_CXX) $(EMU_FLAGS) -c $< -o $@
$(BUILD)/obj/tools/emu/gpu_q2k.o: tests/gpu_q2k.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -I$(CUDA_HOME)/include -DAS_Q2K_KERNELS_ONLY -c $< -o $@
$(BUILD)/emu/emu_q2k_test: $(BUILD)/obj/tools/emu/gpu_q2k.o $(BUILD)/obj/tests/lib/harness.o
$(BUILD)/emu/dump_attn: $(BUILD)/obj/tools/emu/dump_attn.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LIB) $(LDLIBS)
$(BUILD)/emu/emu_%: $(BUILD)/obj/tools/emu/emu_%.o $(BUILD)/obj/tools/emu/emu.o $(LIB)
	@mkdir -p $(dir $@)
	$(EMU_CXX) -o $@ $(filter %.o,$^) $(LIB) $(LDLIBS)

clean:
	rm -rf build build-san build-fuzz dist

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
