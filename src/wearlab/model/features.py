"""Kernel features an experiment may need, listed once: the plan says which ones a run needs,
`wearlab validate` and `wearlab run` check them on the kernel the network will live on (before
anything is built), and `wearlab doctor` probes them all (runtime.probe has one probe each)."""

from __future__ import annotations

from enum import Enum


class KernelFeature(str, Enum):
    NETEM = "qdisc netem"
    HTB = "qdisc htb"
    TBF = "qdisc tbf"
    PFIFO = "qdisc pfifo"
    BFIFO = "qdisc bfifo"
    FQ_CODEL = "qdisc fq_codel"
    FQ = "qdisc fq"
    CAKE = "qdisc cake"
    PLUG = "qdisc plug"
    NETEM_SEED = "netem seed"
    CLSACT = "clsact/ingress"
    IFB = "ifb"
    MPTCP = "mptcp"
    IPT_REDIRECT = "iptables REDIRECT"
    IPT_TPROXY = "iptables TPROXY"
    IPT_NFQUEUE = "iptables NFQUEUE"
    NFT = "nftables ip family"
    BPF_SOCK_OPS = "bpf sock_ops"
    CGROUP_CPU = "cgroup cpu"


WHY: dict[KernelFeature, str] = {
    KernelFeature.NETEM: "delay, jitter, loss and rate of every emulated link",
    KernelFeature.HTB: "--shaper htb, and the proxy throttle",
    KernelFeature.TBF: "byte-exact bottleneck queues",
    KernelFeature.PFIFO: "packet-limited queues",
    KernelFeature.BFIFO: "byte-limited queues",
    KernelFeature.FQ_CODEL: "AQM on the phone (comparison)",
    KernelFeature.FQ: "pacing (comparison)",
    KernelFeature.CAKE: "AQM on the phone (comparison)",
    KernelFeature.PLUG: "BT sniff blackouts that hold packets",
    KernelFeature.NETEM_SEED: "reproducible loss and jitter (netem's own PRNG, Linux >= 6.6 and tc >= 6.6)",
    KernelFeature.CLSACT: "shaping traffic that enters a node",
    KernelFeature.IFB: "ingress shaping through an ifb device",
    KernelFeature.MPTCP: "proactive BT->WiFi handover over MPTCP subflows",
    KernelFeature.IPT_REDIRECT: "transparent phone proxy",
    KernelFeature.IPT_TPROXY: "transparent interception (tcpcrypt, proxy)",
    KernelFeature.IPT_NFQUEUE: "packet rewriting in user space",
    KernelFeature.NFT: "nft rules in the ip/inet families",
    KernelFeature.BPF_SOCK_OPS: "TCP header options written from BPF (tcpcrypt's TCP-ENO)",
    KernelFeature.CGROUP_CPU: "CPU bandwidth limits (cpu.max) for wearable CPU profiles",
}

# Without these a run would silently lose what it measures; others degrade with a note.
OPTIONAL = frozenset({KernelFeature.NETEM_SEED})
