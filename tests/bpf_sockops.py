"""A minimal sock_ops BPF program that writes a TCP header option into every SYN a cgroup's
sockets send, loaded with the bpf() syscall directly (no compiler or loader needed in the guest).

It is the mechanism tcpcrypt's TCP-ENO uses (RFC 8547 option kind 69): this test writes the
experimental kind 253 (RFC 6994 style, `fd 04 be ef`) so it can never be mistaken for ENO.
"""

from __future__ import annotations

import ctypes
import os
import struct

SYS_BPF = 321  # x86_64 (UML guests run x86_64 user space)
BPF_PROG_LOAD, BPF_PROG_ATTACH, BPF_PROG_DETACH = 5, 8, 9
BPF_PROG_TYPE_SOCK_OPS = 13
BPF_CGROUP_SOCK_OPS = 3
# sock_ops callbacks and flags (include/uapi/linux/bpf.h)
TCP_CONNECT_CB, HDR_OPT_LEN_CB, WRITE_HDR_OPT_CB = 3, 14, 15
WRITE_HDR_OPT_CB_FLAG = 1 << 6
# helpers
SOCK_OPS_CB_FLAGS_SET, STORE_HDR_OPT, RESERVE_HDR_OPT = 59, 143, 144

OPTION = bytes([253, 4, 0xBE, 0xEF])


def _insn(op: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    return struct.pack("<BBhi", op, (src << 4) | dst, off, imm)


def _program() -> bytes:
    mov_x, mov_k, add_k, ldx_w, st_w = 0xBF, 0xB7, 0x07, 0x61, 0x62
    jne_k, ja, call, exit_ = 0x55, 0x05, 0x85, 0x95
    opt = struct.unpack("<i", OPTION)[0]
    body = [
        _insn(mov_x, 6, 1),                      # r6 = ctx
        _insn(ldx_w, 2, 6, 0),                   # r2 = ctx->op
        _insn(jne_k, 2, 0, 4, TCP_CONNECT_CB),   # if op != TCP_CONNECT goto len_cb
        _insn(mov_x, 1, 6),                      #   r1 = ctx
        _insn(mov_k, 2, 0, 0, WRITE_HDR_OPT_CB_FLAG),
        _insn(call, imm=SOCK_OPS_CB_FLAGS_SET),  #   ask for the option callbacks
        _insn(ja, off=14),                       #   goto out
        _insn(jne_k, 2, 0, 5, HDR_OPT_LEN_CB),   # len_cb: if op != HDR_OPT_LEN goto write_cb
        _insn(mov_x, 1, 6),
        _insn(mov_k, 2, 0, 0, len(OPTION)),
        _insn(mov_k, 3, 0, 0, 0),
        _insn(call, imm=RESERVE_HDR_OPT),        #   reserve 4 bytes of option space
        _insn(ja, off=8),
        _insn(jne_k, 2, 0, 7, WRITE_HDR_OPT_CB), # write_cb: if op != WRITE_HDR_OPT goto out
        _insn(st_w, 10, 0, -4, opt),             #   *(u32 *)(fp - 4) = option bytes
        _insn(mov_x, 1, 6),
        _insn(mov_x, 2, 10),
        _insn(add_k, 2, 0, 0, -4),
        _insn(mov_k, 3, 0, 0, len(OPTION)),
        _insn(mov_k, 4, 0, 0, 0),
        _insn(call, imm=STORE_HDR_OPT),          #   write it
        _insn(mov_k, 0, 0, 0, 1),                # out: return 1
        _insn(exit_),
    ]
    return b"".join(body)


def _bpf(cmd: int, attr: ctypes.Array) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    r = libc.syscall(SYS_BPF, cmd, attr, len(attr))
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"bpf({cmd}): {os.strerror(e)}")
    return r


class SynOptionWriter:
    """Attach the program to a cgroup v2 directory for the duration of a `with` block."""

    def __init__(self, cgroup: str):
        self.cgroup = cgroup

    def __enter__(self) -> "SynOptionWriter":
        prog = _program()
        insns = ctypes.create_string_buffer(prog, len(prog))
        license_ = ctypes.create_string_buffer(b"GPL")
        log = ctypes.create_string_buffer(65536)
        attr = ctypes.create_string_buffer(128)
        struct.pack_into("<IIQQIIQ", attr, 0, BPF_PROG_TYPE_SOCK_OPS, len(prog) // 8,
                         ctypes.addressof(insns), ctypes.addressof(license_), 1, len(log),
                         ctypes.addressof(log))
        try:
            self.prog_fd = _bpf(BPF_PROG_LOAD, attr)
        except OSError as e:
            raise OSError(e.errno, f"{e.strerror}; verifier: {log.value.decode(errors='replace')}") from None
        self.cg_fd = os.open(self.cgroup, os.O_RDONLY | os.O_DIRECTORY)
        attach = ctypes.create_string_buffer(32)
        struct.pack_into("<III", attach, 0, self.cg_fd, self.prog_fd, BPF_CGROUP_SOCK_OPS)
        _bpf(BPF_PROG_ATTACH, attach)
        return self

    def __exit__(self, *exc) -> None:
        detach = ctypes.create_string_buffer(32)
        struct.pack_into("<III", detach, 0, self.cg_fd, self.prog_fd, BPF_CGROUP_SOCK_OPS)
        try:
            _bpf(BPF_PROG_DETACH, detach)
        finally:
            os.close(self.cg_fd)
            os.close(self.prog_fd)


def tcp_options(syn_headers: bytes) -> list[tuple[int, bytes]]:
    """(kind, data) of each option in a saved SYN (IPv4 + TCP headers, TCP_SAVED_SYN)."""
    ihl = (syn_headers[0] & 0x0F) * 4
    tcp = syn_headers[ihl:]
    doff = (tcp[12] >> 4) * 4
    opts, i, out = tcp[20:doff], 0, []
    while i < len(opts):
        kind = opts[i]
        if kind == 0:
            break
        if kind == 1:
            i += 1
            continue
        length = opts[i + 1]
        out.append((kind, bytes(opts[i + 2:i + length])))
        i += length
    return out
