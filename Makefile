# codebox: nginx in front of a prefork pool of FastCGI workers running sandboxed Python.
#
#   make run    install what is missing, build, check the config, serve on 127.0.0.1:8080
#   make test   install what is missing, build, run the unit tests, the bats suites and
#               the same suites against an ASan+UBSan build
#   make asan   only the sanitizer pass

CC       ?= cc
PKGS      = jansson
WARN      = -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wformat=2 -Wvla -Wswitch-enum
HARDEN    = -D_FORTIFY_SOURCE=2 -fstack-protector-strong -fPIE
CFLAGS   ?= -O2 -g
# what GET /metrics reports as codebox_build_info{version}
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo unknown)
CFLAGS   += -std=gnu11 $(WARN) $(HARDEN) -D_GNU_SOURCE -DCODEBOX_VERSION='"$(VERSION)"'

LDFLAGS  += -pie -Wl,-z,relro,-z,now
LDLIBS    = -lfcgi -ljansson -lseccomp -lm

BUILD    ?= build
SANITIZE ?=
ifneq ($(SANITIZE),)
CFLAGS   += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS  += -fsanitize=$(SANITIZE)
HARDEN    = -fPIE
endif

SRCS     = $(wildcard fcgi/*.c)
OBJS     = $(SRCS:fcgi/%.c=$(BUILD)/%.o)
POOL     = $(BUILD)/codebox-pool

# unit tests: one TAP program per pure module, linking only what it tests
UNITS    = capture result request limits reply jsonw workdir isolation multipart slots landlock seccomp
UNIT_BIN = $(UNITS:%=$(BUILD)/test-%)
UNIT_DEPS_capture = capture
UNIT_DEPS_result  = result jsonw
UNIT_DEPS_request = request limits
UNIT_DEPS_limits  = limits
UNIT_DEPS_reply   = reply jsonw capture result outcome isolation
UNIT_DEPS_jsonw   = jsonw
UNIT_DEPS_workdir = workdir log jsonw util
UNIT_DEPS_isolation = isolation
UNIT_DEPS_multipart = multipart workspace util
UNIT_DEPS_slots   = slots
UNIT_DEPS_landlock = landlock log jsonw
UNIT_DEPS_seccomp = seccomp log jsonw

.PHONY: all deps build run test unit bats asan check lint format clean bench

all: build

deps:
	@scripts/install-deps.sh

build: deps $(POOL)

$(BUILD)/%.o: fcgi/%.c $(wildcard fcgi/*.h) | $(BUILD)/.dir
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/tests/%.o: fcgi/tests/%.c $(wildcard fcgi/*.h) fcgi/tests/tap.h | $(BUILD)/.dir
	$(CC) $(CFLAGS) -Ifcgi -c -o $@ $<

$(BUILD)/.dir:
	mkdir -p $(BUILD)/tests && touch $@

$(POOL): $(OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

.SECONDEXPANSION:
$(BUILD)/test-%: $(BUILD)/tests/test-%.o $$(addsuffix .o,$$(addprefix $(BUILD)/,$$(UNIT_DEPS_$$*)))
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

run: build
	scripts/codebox-run.sh --port 8080 --pool $(POOL)

unit: deps $(UNIT_BIN)
	@set -e; for t in $(UNIT_BIN); do echo "# $$t"; $$t; done

bats: build
	CODEBOX_POOL=$(CURDIR)/$(POOL) bats --print-output-on-failure tests/

# the same bats suites against the sanitizer build
asan:
	$(MAKE) BUILD=build-asan SANITIZE=address,undefined unit
	$(MAKE) BUILD=build-asan SANITIZE=address,undefined build-asan/codebox-pool
	CODEBOX_POOL=$(CURDIR)/build-asan/codebox-pool CODEBOX_ASAN=1 \
	    bats --print-output-on-failure tests/

check: build
	scripts/check-config.sh nginx/nginx.conf

lint:
	shellcheck scripts/*.sh scripts/cafe-agent .ci/run tests/helpers/*.bash image/codebox-nginx image/codebox-pool-start
	clang-format --dry-run -Werror fcgi/*.c fcgi/*.h fcgi/tests/*.c fcgi/tests/*.h

format:
	clang-format -i fcgi/*.c fcgi/*.h fcgi/tests/*.c fcgi/tests/*.h

test: deps lint unit check bats asan

bench: build
	scripts/bench.sh

clean:
	rm -rf build build-asan
.SECONDARY:

# ---- image and deployment (issue: one image, one hardened pod) ----
IMAGE      ?= localhost/codebox:dev
BASE_IMAGE ?= localhost/codebox-base:bookworm
export CONTAINERS_CONF := $(CURDIR)/image/containers.conf

.PHONY: image image-test deploy-check kind-up kind-down kind-test

deploy-check: deps
	scripts/check-deploy.sh

kind-up kind-down kind-test:
	scripts/kind.sh $(@:kind-%=%)

# the image, as the podman overlay's pod, with the contract suite against it
image-test: image
	scripts/image-test.sh

# docker where an engine answers; otherwise podman on a debootstrap base (no registry here)
image:
	@if docker info >/dev/null 2>&1; then \
	    docker build -f image/Dockerfile -t $(IMAGE) . ; \
	else \
	    scripts/install-deps.sh --image && scripts/build-base.sh --tag $(BASE_IMAGE) && \
	    podman build --isolation chroot --build-arg BASE=$(BASE_IMAGE) \
	        -f image/Dockerfile -t $(IMAGE) . ; \
	fi
