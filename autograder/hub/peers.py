"""The class server's Unix sockets: where a service listens, and who is at the other end.

The checking service (:mod:`autograder.hub.checking`) and the grading service
(:mod:`autograder.hub.grading`) listen on a socket in the state folder. The kernel tells each
of them which process and which account connected (``SO_PEERCRED``): no one can claim to be
someone else, so the account is who asks.
"""

from __future__ import annotations

import socket
import struct
from pathlib import Path


def prepare_socket(path: Path) -> None:
    """Make ``path``'s folder (passable by everyone) and remove a socket left there."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.parent.chmod(0o755)
    path.unlink(missing_ok=True)


def peer_credentials(connection: socket.socket) -> tuple[int, int, int]:
    """The (pid, uid, gid) of the process at the other end of the Unix socket ``connection``."""
    credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                        struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", credentials)
    return pid, uid, gid
