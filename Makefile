# wearlab: `make experiment` runs the default experiment, `make test` runs the tests.
# Both install what they need first (Debian packages, a venv, the UML guest root filesystem);
# every step is stamped, so the second time costs a few dpkg queries.
SHELL := /bin/bash
PY_SYSTEM := /usr/bin/python3        # Debian's python: the one Debian's Mininet is built for
VENV := .venv
PY := $(VENV)/bin/python
WEARLAB := $(VENV)/bin/wearlab
ROOTFS ?= /var/cache/wearlab/uml-rootfs
EXPERIMENT ?= experiments/quickstart.yaml
APT_PACKAGES := python3 python3-venv mininet iproute2 iputils-ping ethtool kmod procps psmisc curl \
	openssl ca-certificates nginx-light tcpdump iperf3 socat haproxy debootstrap user-mode-linux
STAMPS := build/stamps

.PHONY: setup experiment test test-host test-netem bench clean distclean

setup: $(STAMPS)/apt $(STAMPS)/venv $(STAMPS)/rootfs

$(STAMPS)/apt: Makefile
	@mkdir -p $(STAMPS)
	@missing=$$(dpkg-query -W -f='$${Package} $${Status}\n' $(APT_PACKAGES) 2>/dev/null | \
		awk '$$NF=="installed"{print $$1}' | sort | comm -13 - <(tr ' ' '\n' <<<"$(APT_PACKAGES)" | sort)); \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages: $$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@touch $@

$(STAMPS)/venv: pyproject.toml $(STAMPS)/apt
	@mkdir -p $(STAMPS)
	@test -x $(PY) || $(PY_SYSTEM) -m venv --system-site-packages $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[test]'
	@# setuptools' distutils shim makes Mininet's `import distutils` load all of setuptools:
	@# seconds per process in a UML guest. Mininet only needs the stdlib's distutils.
	rm -f $(VENV)/lib/python3*/site-packages/distutils-precedence.pth
	@touch $@

$(STAMPS)/rootfs: images/uml/build-rootfs.sh $(STAMPS)/apt
	@mkdir -p $(STAMPS)
	images/uml/build-rootfs.sh $(ROOTFS)
	@touch $@

experiment: setup
	$(WEARLAB) run $(EXPERIMENT)

# Tests run twice over: on the host kernel (schemas, parsers, CLI, the UML runtime itself), then
# the netem-dependent physics inside the runtime that has netem (`wearlab exec` picks it).
test: setup
	$(PY) -m pytest -m "not netem" -q
	$(WEARLAB) exec -- $(abspath $(PY)) -m pytest -m netem -q

# Runs on the host: each benchmark goes where it must (`wearlab exec` for the netem parts; the
# host-launched `wearlab run` of bench_overhead boots its own guest). Results: bench/results/.
bench: setup
	$(PY) bench/run_all.py

clean:
	-$(WEARLAB) clean

distclean: clean
	rm -rf $(VENV) build
