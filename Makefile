# wearlab: `make experiment` runs the default experiment, `make test` runs the tests.
# Both install what they need first (Debian packages, a venv, and - where the host kernel lacks
# netem - the UML guest: wearlab's own kernel and its root filesystem); every step is stamped
# or cached, so the second time costs a few dpkg queries.
SHELL := /bin/bash
PY_SYSTEM := /usr/bin/python3        # Debian's python: the one Debian's Mininet is built for
VENV := .venv
PY := $(VENV)/bin/python
WEARLAB := $(VENV)/bin/wearlab
ROOTFS ?= /var/cache/wearlab/uml-rootfs
KERNEL_CACHE ?= /var/cache/wearlab/kernel
EXPERIMENT ?= experiments/quickstart.yaml
WEARLAB_ARGS ?=
# Debian packages: images/packages.txt is the one list (host, guest, testbed, ...); `packages`
# gives the names tagged for one place.
PACKAGE_LIST := images/packages.txt
packages = $(shell awk '!/^\#/ && NF > 1 { for (i = 2; i <= NF; i++) if ($$i == "$(1)") print $$1 }' $(PACKAGE_LIST))
APT_PACKAGES := $(call packages,host) $(call packages,host-tests)
# The guest: its root filesystem (debootstrap) and its kernel (built from Debian's source).
GUEST_PACKAGES := $(call packages,kernel)
STAMPS := build/stamps
# Does the host kernel have netem? If not, the network lives in the UML guest (WEARLAB_UML=1
# builds the guest anyway). Decided once per make run.
NETEM_PROBE := unshare -n sh -c 'ip link set lo up && tc qdisc add dev lo root netem delay 1ms' >/dev/null 2>&1
NEED_GUEST := $(shell if [ "$(WEARLAB_UML)" = 1 ] || ! $(NETEM_PROBE); then echo yes; fi)

.PHONY: bundle bundle-tar setup guest kernel rootfs tcpcrypt devicecpu tlstickets experiment test bench compare-proxy clean distclean \
	images up down experiment-compose test-compose test-experiments reproduce

# A fresh box's time goes to the guest kernel's build (5-6 min on 2 cores): every Debian package
# comes in one apt transaction first, then the kernel, the guest's root filesystem and the venv
# are made side by side, the kernel using every core (the other two mostly wait for the network).
setup: $(STAMPS)/apt
	@$(MAKE) --no-print-directory -j3 $(STAMPS)/venv $(DEVICECPU) $(TLSTICKETS) $(if $(NEED_GUEST),guest)

# apt waits for another apt's lock (a second checkout's make) and its failure stops make.
define apt_install
	@mkdir -p $(STAMPS)
	@missing=$$(dpkg-query -W -f='$${Package} $${Status}\n' $(1) 2>/dev/null | \
		awk '$$NF=="installed"{print $$1}' | sort | comm -13 - <(tr ' ' '\n' <<<"$(1)" | sort)); \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages: $$missing"; start=$$(date +%s); \
		{ apt-get update -qq -o DPkg::Lock::Timeout=300 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			-o DPkg::Lock::Timeout=300 --no-install-recommends $$missing; } || \
			{ echo "apt could not install: $$missing" >&2; exit 1; }; \
		took=$$(( $$(date +%s) - start )); echo "installed $$(wc -w <<<"$$missing") Debian packages in $$took s"; \
		mkdir -p /var/cache/wearlab && echo "$$took $$(wc -w <<<"$$missing")" >> /var/cache/wearlab/apt-installs; \
	fi
	@touch $@
endef

$(STAMPS)/apt: Makefile $(PACKAGE_LIST)
	$(call apt_install,$(APT_PACKAGES) $(if $(NEED_GUEST),$(GUEST_PACKAGES)))

$(STAMPS)/apt-guest: Makefile $(PACKAGE_LIST)
	$(call apt_install,$(GUEST_PACKAGES))

# Kernel and root filesystem build side by side (-j2 above). Both scripts return at once when
# their cached result matches their inputs, so they run every time: a deleted cache is rebuilt.
guest: kernel rootfs

kernel: $(STAMPS)/apt-guest
	@images/uml/build-kernel.sh $(KERNEL_CACHE) >/dev/null

rootfs: $(STAMPS)/apt-guest
	@images/uml/build-rootfs.sh $(ROOTFS)

# The bundle (images/bundle/build.sh; docs/many-machines.md#the-bundle): the UML runtime in one
# relocatable directory that an ordinary user runs with a POSIX shell (a cluster's compute node).
# Its kernel is the guest's with images/uml/bundle.config over it (ubd + ext4, linked statically)
# and images/uml/bundle-patches/ (its own cache: ~7.5 min once), its image the guest tree plus the
# venv's packages (~30 s once per tree or package change); wearlab's code is copied in (a second).
BUNDLE ?= build/wearlab-bundle
BUNDLE_CACHE ?= /var/cache/wearlab/bundle
bundle: setup guest
	@kernel=$$(images/uml/build-bundle-kernel.sh $(KERNEL_CACHE)-bundle | tail -n 1) && \
		images/bundle/build.sh $(BUNDLE) $(BUNDLE_CACHE) "$$kernel" $(ROOTFS) $(VENV)

# The bundle as one file to copy to a cluster (images/bundle/tar.sh): build/wearlab-bundle-VERSION.tar.gz
# and its .sha256, which an ordinary user extracts anywhere with GNU tar (the owners the guest
# needs are inside rootfs.img, not in the tar). The image's compressed part is cached beside the
# image (~50-60 s once per image on 2 busy cores); after that ~3 s.
bundle-tar: bundle
	@images/bundle/tar.sh $(BUNDLE) $(dir $(BUNDLE)) $(BUNDLE_CACHE) >/dev/null

$(STAMPS)/venv: pyproject.toml $(STAMPS)/apt
	@mkdir -p $(STAMPS)
	@test -x $(PY) || $(PY_SYSTEM) -m venv --system-site-packages $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[test]'
	@# setuptools' distutils shim makes Mininet's `import distutils` load all of setuptools:
	@# seconds per process in a UML guest. Mininet only needs the stdlib's distutils.
	rm -f $(VENV)/lib/python3*/site-packages/distutils-precedence.pth
	@touch $@

# wearlab's tcpcrypt (tcpcrypt/: the daemon tcpcryptd and its TCP-ENO BPF program, which clang
# compiles). Cargo only rebuilds what changed (~0.2 s when nothing did). The toolchain is Debian's
# cargo-web/rustc-web (bookworm-security: a current Rust; bookworm's plain cargo, 1.65, is too old
# for the workspace's crates), called by path with its own rustc, so a rustup on PATH changes nothing.
CARGO := RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc /usr/bin/cargo
$(STAMPS)/apt-rust: Makefile $(PACKAGE_LIST)
	$(call apt_install,$(call packages,rust))

tcpcrypt: $(STAMPS)/apt $(STAMPS)/apt-rust
	cd tcpcrypt && $(CARGO) build --release --locked -q

# wearlab's device CPU mechanism (src/devicecpu/, README there): an LD_PRELOAD library in C that needs
# nothing but libc - it finds each process's OpenSSL at run time - so gcc alone builds it (~1 s).
DEVICECPU := build/devicecpu/libwearlab-devicecpu.so
devicecpu: $(DEVICECPU)

$(DEVICECPU): src/devicecpu/wearlab_devicecpu.c $(STAMPS)/apt
	@mkdir -p $(dir $@)
	gcc -O2 -Wall -Wextra -Werror -fPIC -shared -o $@ $< -ldl -pthread

# The TLS 1.2 ticket hook (src/tlstickets/, why in its comment): an LD_PRELOAD library that lets
# libcurl offer TLS 1.2 session tickets, as a browser does, for page loads over TLS 1.2 with
# resumption on. libc alone, like devicecpu.
TLSTICKETS := build/tlstickets/libwearlab-tls12-tickets.so
tlstickets: $(TLSTICKETS)

$(TLSTICKETS): src/tlstickets/wearlab_tls12_tickets.c $(STAMPS)/apt
	@mkdir -p $(dir $@)
	gcc -O2 -Wall -Wextra -Werror -fPIC -shared -o $@ $< -ldl

# Only what the experiment needs: tcpcrypt's daemon (minutes of Rust the first time) is built
# when the experiment uses tcpcrypt (`wearlab plan --builds` says so), by `make test`, or by
# `make tcpcrypt`.
experiment: setup
	@if $(WEARLAB) plan --builds $(EXPERIMENT) $(WEARLAB_ARGS) 2>/dev/null | grep -qx tcpcrypt; then \
		echo "$(EXPERIMENT) uses tcpcrypt: building wearlab's tcpcrypt daemon first (make tcpcrypt)"; \
		$(MAKE) --no-print-directory tcpcrypt; fi
	$(WEARLAB) run $(EXPERIMENT) $(WEARLAB_ARGS)

# The seeds' suite (experiments/seeds/; docs/reproduce.md): its estimate first, a progress bar with
# the time left, then `wearlab check` and `wearlab report`. Resumable: after a Ctrl-C, `make
# reproduce` again continues. REPETITIONS=N and ONLY=pattern,... shorten it; FULL=1 runs the papers'
# own repetitions (each file's `full:`).
SUITE ?= experiments/seeds
REPETITIONS ?=
ONLY ?=
FULL ?=
# SLURM=1: each experiment as a Slurm job array (TASKS= per experiment), merged, then the suite's
# check and report as a job after them (docs/many-machines.md).
SLURM ?=
TASKS ?=
REPRODUCE_ARGS = $(SUITE) $(if $(REPETITIONS),--repetitions $(REPETITIONS)) $(if $(ONLY),--only '$(ONLY)') \
	$(if $(filter 1,$(FULL)),--full) $(if $(filter 1,$(SLURM)),--slurm $(if $(TASKS),--tasks $(TASKS)))
reproduce: setup
	@if $(WEARLAB) reproduce $(REPRODUCE_ARGS) --builds | grep -qx tcpcrypt; then \
		$(MAKE) --no-print-directory tcpcrypt; fi
	$(WEARLAB) reproduce $(REPRODUCE_ARGS)

# Regression-test a phone proxy: the same experiment with a baseline and a candidate proxy kind,
# then `wearlab compare` (exit 1 on a significant regression). E.g.
#   make compare-proxy BASE=relay CAND="command: ./my-proxy {listen} {upstream}"
BASE ?= relay
CAND ?= haproxy
PROXY_EXPERIMENT ?= experiments/proxy-check.yaml
COMPARE_OUT ?= results/compare-proxy
compare-proxy: setup
	rm -rf $(COMPARE_OUT)
	$(WEARLAB) run $(PROXY_EXPERIMENT) --set 'phone.kind=$(BASE)' --out $(COMPARE_OUT)/baseline
	$(WEARLAB) run $(PROXY_EXPERIMENT) --set 'phone.kind=$(CAND)' --out $(COMPARE_OUT)/candidate
	$(WEARLAB) compare $(COMPARE_OUT)/baseline/$$(basename $(PROXY_EXPERIMENT) .yaml) \
		$(COMPARE_OUT)/candidate/$$(basename $(PROXY_EXPERIMENT) .yaml) \
		--markdown $(COMPARE_OUT)/report.md --junit $(COMPARE_OUT)/junit.xml

# Tests run twice over: on the host kernel (schemas, parsers, CLI, the UML runtime itself), then
# the netem-dependent physics inside the runtime that has netem (`wearlab runtime-exec` picks it);
# then tcpcrypt's tests and its fuzz targets' regression (every corpus input through the targets'
# code, without AFL: tcpcrypt/fuzz/README.md). The runtime step runs in two guests side by side,
# each claiming the next module when it frees up (tests/work_sharing.py): a guest is one process
# that mostly waits on its links' timers, and the machine has 2 cores: each guest its own core
# (WEARLAB_GUEST_CPU; by default every guest takes the highest CPU). Each pytest step names its
# slowest tests: CI is held under 60 minutes, and a new test is paid for by making an old one faster.
# The bundle and its tarball are made first: tests/test_bundle.py runs them as an ordinary user (host step).
# Two guests side by side: the first CPU and the last, when there are two or more.
GUEST_CPU_1 := $(shell n=$$(nproc); [ $$n -ge 2 ] && echo 0 || echo auto)
GUEST_CPU_2 := $(shell n=$$(nproc); [ $$n -ge 2 ] && echo $$((n - 1)) || echo auto)
test: setup tcpcrypt bundle-tar
	$(PY) -m pytest -m "not netem and not guest and not compose and not shipped" -q --durations=15
	@rm -rf .test-logs/guest-claims && mkdir -p .test-logs/guest-claims
	@echo "test: the runtime step in two guests side by side, sharing its modules (tests/work_sharing.py)"
	@claims=$(abspath .test-logs/guest-claims); export WEARLAB_TEST_CLAIMS=$$claims; \
	  ( WEARLAB_TEST_WORKER=1/2 WEARLAB_GUEST_CPU=$(GUEST_CPU_1) $(WEARLAB) runtime-exec -- $(abspath $(PY)) -m pytest -m "netem or guest" -q \
	      --durations=10 -p no:cacheprovider; rc=$$?; touch $$claims/finished-1; exit $$rc ) \
	    > .test-logs/guest-1.log 2>&1 & one=$$!; \
	  WEARLAB_TEST_WORKER=2/2 WEARLAB_GUEST_CPU=$(GUEST_CPU_2) $(WEARLAB) runtime-exec -- $(abspath $(PY)) -m pytest -m "netem or guest" -q \
	      --durations=10 -p no:cacheprovider; two=$$?; touch $$claims/finished-2; \
	  wait $$one; first=$$?; echo "--- the other guest:"; cat .test-logs/guest-1.log; \
	  echo "test: guest 1 exit $$first, guest 2 exit $$two"; [ $$first -eq 0 ] && [ $$two -eq 0 ]
	cd tcpcrypt && $(CARGO) test --locked -q
	cd tcpcrypt/fuzz && $(CARGO) test --locked -q --lib --target-dir target/regress

# --- The Compose stack (docker-compose.yml; issue 8) -----------------------------------------
# Images are built here, from Debian (images/*: debootstrap + docker import, then apt): no registry;
# each is named wearlab/* (never an official image's name). Every target that needs Docker installs
# it first (the apt-docker stamp: Debian's docker.io and docker-compose), as `make experiment`
# installs Mininet; tests/test_make_compose_deps.py checks it. Nothing is pulled unless asked:
# `make up PULL=1` pulls the official Prometheus and Grafana images and runs them.
# `images/stack.py` (a developer script: Make's helper for the stack, not part of wearlab) does the checks (Docker installed and running - it starts dockerd when
# need be -, images present, ports free) and exits 2 naming what to do. Only the standard library:
# it runs with Debian's python3 before any venv exists.
STACK = $(PY_SYSTEM) images/stack.py
$(STAMPS)/apt-docker: Makefile $(PACKAGE_LIST)
	$(call apt_install,$(call packages,docker))

# Idempotent: the base image is skipped when its label matches images/base/build.sh, the others
# come from Docker's build cache (a few seconds when nothing changed).
images: $(STAMPS)/apt-docker
	@$(STACK) images

# testbed + prometheus (+ grafana when its image is on this machine), then waits for Prometheus's
# first successful scrape of the testbed's exporter and prints the URLs. PULL=1: `docker pull` the
# official prom/prometheus and grafana/grafana-oss images first, and run them.
PULL ?=
up: $(STAMPS)/apt-docker setup images
	@$(STACK) up $(if $(filter 1,$(PULL)),--pull)

down:
	@$(STACK) down

# `wearlab run` inside the testbed; results land in the host's results/.
experiment-compose: up
	@$(STACK) exec -- $(abspath $(WEARLAB)) run $(EXPERIMENT) $(WEARLAB_ARGS)

# Builds the images, brings the stack up, runs live experiments in the testbed and checks every
# dashboard query against its Prometheus, tears it down; then times `make up` (bench/bench_compose.py).
test-compose: $(STAMPS)/apt-docker setup
	@$(STACK) images
	$(PY) -m pytest -m compose -q -rs tests/test_compose.py tests/test_container_nodes.py
	$(PY) bench/bench_compose.py

# Every file in experiments/ to the end, each cell once, durations shortened where the file allows
# (tests/test_shipped_experiments.py), in two shards side by side (each experiment boots its own
# guest and mostly waits on its links' timers). container-server.yaml needs the images.
test-experiments: $(STAMPS)/apt-docker setup tcpcrypt
	@$(STACK) images
	@mkdir -p .test-logs
	@echo "test-experiments: two shards side by side; shard 1's log follows shard 2's output"
	@WEARLAB_SHARD=1/2 WEARLAB_GUEST_CPU=$(GUEST_CPU_1) $(PY) -m pytest -m shipped -q -s --basetemp=.test-logs/shard-1 tests/test_shipped_experiments.py \
	    > .test-logs/shipped-1.log 2>&1 & one=$$!; \
	  WEARLAB_SHARD=2/2 WEARLAB_GUEST_CPU=$(GUEST_CPU_2) $(PY) -m pytest -m shipped -q -s --basetemp=.test-logs/shard-2 tests/test_shipped_experiments.py; two=$$?; \
	  wait $$one; first=$$?; cat .test-logs/shipped-1.log; \
	  echo "test-experiments: shard 1 exit $$first, shard 2 exit $$two"; [ $$first -eq 0 ] && [ $$two -eq 0 ]

# Runs on the host: each benchmark goes where it must (`wearlab runtime-exec` for the netem parts; the
# host-launched `wearlab run` of bench_overhead boots its own guest). Results: bench/results/.
bench: setup
	$(PY) bench/run_all.py

clean:
	-$(WEARLAB) clean

distclean: clean
	rm -rf $(VENV) build
