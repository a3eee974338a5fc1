"""A User-Mode Linux guest's management console (mconsole), asked from the host: one request, one
reply, over the Unix datagram socket `~/.uml/UMID/mconsole` that every guest listens on (the
kernel's arch/um/drivers/mconsole_kern.c; the protocol is arch/um/include/shared/mconsole.h:
magic, version 2, length, 512 bytes of text; the reply: error, more, length, text).

wearlab asks it one thing: `config sslN`, which host pseudo-terminal a guest's serial line N is
attached to while the guest has it open (`pts:/dev/pts/7`): `wearlab capture` streams a running
guest's packets to the host on that line.
"""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

from wearlab.errors import EnvironmentProblem

MAGIC, VERSION, MAX_DATA = 0xCAFEBABE, 2, 512
REQUEST = struct.Struct(f"=III{MAX_DATA}s")
REPLY_HEAD = struct.Struct("=III")
TIMEOUT_S = 5.0


def socket_path(umid: str) -> Path:
    """The guest's mconsole socket (UML's default uml_dir, ~/.uml, of the user who booted it)."""
    for home in (Path.home(), Path("/root")):
        p = home / ".uml" / umid / "mconsole"
        if p.exists():
            return p
    raise EnvironmentProblem(f"the UML guest {umid} has no management console (~/.uml/{umid}/mconsole): "
                             "is it still running?")


def ask(umid: str, command: str) -> str:
    """The guest's answer to `command`; EnvironmentProblem when it refuses or does not answer."""
    data = command.encode()
    if len(data) > MAX_DATA:
        raise ValueError(f"mconsole request longer than {MAX_DATA} bytes")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        s.bind("")                       # an abstract address of our own, for the reply
        s.settimeout(TIMEOUT_S)
        s.sendto(REQUEST.pack(MAGIC, VERSION, len(data), data), os.fspath(socket_path(umid)))
        text = b""
        while True:
            reply = s.recv(REPLY_HEAD.size + MAX_DATA + 16)
            err, more, length = REPLY_HEAD.unpack_from(reply)
            text += reply[REPLY_HEAD.size:REPLY_HEAD.size + length]
            if not more:
                break
    except OSError as e:
        raise EnvironmentProblem(f"the UML guest {umid}'s management console did not answer `{command}`: {e}") from e
    finally:
        s.close()
    answer = text.rstrip(b"\0").decode(errors="replace")
    if err:
        raise EnvironmentProblem(f"the UML guest {umid} refused `{command}`: {answer}")
    return answer


def serial_line_pty(umid: str, line: int) -> str:
    """The host pseudo-terminal (/dev/pts/N) of the guest's open serial line `line`."""
    answer = ask(umid, f"config ssl{line}")
    kind, _, dev = answer.partition(":")
    if kind != "pts" or not dev.startswith("/dev/"):
        raise EnvironmentProblem(f"the UML guest {umid}'s serial line {line} is `{answer}`, not a host "
                                 "pseudo-terminal")
    return dev
