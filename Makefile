# The two set-up-free entry points are `make demo` and `make test`: both create the
# virtualenv and install what is missing (Debian packages, pinned pip packages) first.
PYTHON    ?= /usr/bin/python3
VENV      := .venv
VPY       := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed

.PHONY: demo test bench train train-tp figures lint check-p4 clean proto wire

$(INSTALLED): pyproject.toml scripts/setup-system.sh
	scripts/setup-system.sh
	$(PYTHON) -m venv --system-site-packages $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -e '.[test,train]'
	touch $@

test: $(INSTALLED)
	$(VPY) -m pytest -q --durations=30

# `make demo PROGRAM=tna`: the same on the Tofino program (p4src/tofino/ina_tna.p4, built-in target).
demo: $(INSTALLED)
	$(VPY) -m bmv2env.demo $(if $(PROGRAM),--program $(PROGRAM))

bench: $(INSTALLED)
	$(VPY) -m bench.bench_target
	$(VPY) -m bench.bench_ina
	$(VPY) -m bench.bench_ina --batch
	$(VPY) -m bench.bench_veth --runs 3
	$(VPY) -m bench.bench_veth_ina --runs 3
	$(VPY) -m bench.bench_worker --runs 3
	$(VPY) -m bench.bench_backend --runs 3
	$(VPY) -m bench.bench_allreduce
	$(VPY) -m bench.bench_trees
	$(VPY) -m bench.bench_hybrid
	$(VPY) -m bench.bench_loss
	$(VPY) -m bench.bench_fabric
	$(VPY) -m bench.bench_scale
	$(VPY) -m bench.bench_direct --runs 3
	$(VPY) -m bench.bench_direct_runs ntt
	$(VPY) -m bench.bench_relay
	$(VPY) -m bench.bench_rails
	$(VPY) -m bench.bench_window
	$(VPY) -m bench.bench_sharing
	$(VPY) -m bench.bench_servers --workers 64 --servers 1,2,3,4,6,8 --size 262144
	$(VPY) -m bench.bench_server --runs 3 --threads 1,2 --veth
	$(VPY) -m bench.bench_allreduce --topology bmv2-env/topologies/servers-4x2.json --sizes 64 --methods ina,ring --runs 3 --pool-size 16

# `make bench` and `make train` write their CSVs and plots to bench/results/ (not tracked): they
# leave the repository as it was.  `make figures` copies the plots there to docs/figures/ (tracked,
# shown by the READMEs), for a commit that updates them; `python -m bench.figures NAME.png` one.
figures:
	$(VPY) -m bench.figures

# `make train`: examples/train_ddp.py on 4 Mininet hosts, compute-bound (a small CNN) then communication-bound
# (an MLP of 11 MB of gradient per step on 50 Mbit/s links): the INA hook, the "ina" backend, gloo (root).
train: $(INSTALLED)
	$(VPY) examples/mininet_train.py

# `make train-tp`: examples/train_tp.py on 4 Mininet hosts, tensor parallel over them (TP = 4), Megatron's blocking
# schedule and Domino's, through the P4 switch and through gloo, on shaped then unshaped links (root; docs/tp.md).
train-tp: $(INSTALLED)
	$(VPY) examples/mininet_train_tp.py

# `make proto`: ina_api's generated code again from ina_api/jobs.proto (the service's API; code is committed).
proto:
	scripts/gen-proto.sh

# `make wire`: worker/wire_facts.py again from p4src/protocol.p4 (the worker's wire format without the P4 frontend;
# committed, and a test checks it is current).
wire: $(INSTALLED)
	$(VPY) -m worker.gen_wire

lint: $(INSTALLED)
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache bench/out

# `make net TOPO=bmv2-env/topologies/tree-4.json`: a Mininet network of P4 switches, then its CLI (root).
TOPO ?= bmv2-env/topologies/single-4.json
.PHONY: net
net: $(INSTALLED)
	$(VENV)/bin/ina-net start $(TOPO) --cli
