"""Reading and writing the files a user names, safely.

* :func:`loads_bounded`: ``json.loads`` after a linear pre-scan bounds its nesting, so a
  deeply nested file or reply is refused with a typed error instead of ``RecursionError``
  (the standard library's parser recurses once per level).
* :func:`write_file`: write a file without following a symlink planted at its path: the
  data goes to a new temporary file in the same folder (``O_EXCL | O_NOFOLLOW``), is
  fsynced, then renamed over the target; a target that is a symlink is refused.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from engram.protocol.errors import LimitExceededError, MalformedError
from verifier.jcs import check_shape

__all__ = ["MAX_JSON_DEPTH", "loads_bounded", "write_file"]

#: Deeper than any format Engram reads needs (Mem0 exports, chat replies, hook payloads).
MAX_JSON_DEPTH = 64


def loads_bounded(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse JSON whose nesting is first bounded by ``max_depth`` (``LimitExceededError``
    ``canonical.depth``); a syntax error is ``MalformedError`` ``json.syntax``."""
    s = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    check_shape(s, max_depth=max_depth)
    try:
        return json.loads(s)
    except RecursionError as e:  # pragma: no cover - check_shape bounds the depth first
        raise LimitExceededError("JSON nests too deeply", check="canonical.depth") from e
    except ValueError as e:
        raise MalformedError(f"not JSON: {e}", check="json.syntax") from e


def write_file(path: Path, data: bytes | str, *, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` without following a symlink at ``path``."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if path.is_symlink():
        raise MalformedError(f"{path} is a symbolic link; refusing to write through it", check="file.symlink")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)  # renames over a link planted meanwhile: never writes through it
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
