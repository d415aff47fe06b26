"""Private key files: the log's checkpoint key and agent keys, written 0600, parsed strictly.

* Log key: the C2SP / Go ``sumdb/note`` signer-key string
  ``PRIVATE+KEY+<name>+<hex8 key id>+<base64(0x01 || 32-byte seed)>``, so the same file works
  with standard note tooling. The name is the log origin.
* Agent key: ``{"format": "engram.agent-key/v1", "agent": <id>, "seed": <base64>}``.

Files are created with ``O_EXCL`` and mode 0600 and never overwritten.
"""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram.protocol.errors import ConfigError, VerificationError
from verifier.event import check_agent_id
from verifier.note import ALG_ED25519, b64decode_strict, ed25519_key_id, format_verifier_key

__all__ = [
    "LogKey",
    "format_log_signer_key",
    "fsync_dir",
    "load_agent_key",
    "load_log_key",
    "missing_key_file",
    "parse_log_signer_key",
    "write_private_file",
]


class LogKey:
    """The log's Ed25519 checkpoint key; its name is the log origin."""

    __slots__ = ("name", "private_key", "public_key")

    def __init__(self, name: str, private_key: Ed25519PrivateKey) -> None:
        self.name = name
        self.private_key = private_key
        self.public_key = private_key.public_key().public_bytes_raw()

    @property
    def vkey(self) -> str:
        return format_verifier_key(self.name, self.public_key)


def _seed(key: Ed25519PrivateKey) -> bytes:
    return key.private_bytes_raw()


def format_log_signer_key(key: LogKey) -> str:
    kid = ed25519_key_id(key.name, key.public_key).hex()
    blob = base64.b64encode(bytes([ALG_ED25519]) + _seed(key.private_key)).decode("ascii")
    return f"PRIVATE+KEY+{key.name}+{kid}+{blob}"


def parse_log_signer_key(text: str) -> LogKey:
    parts = text.strip().split("+", 4)  # the base64 key may itself contain '+'
    if len(parts) != 5 or parts[0] != "PRIVATE" or parts[1] != "KEY":
        raise ConfigError("log key file is not a PRIVATE+KEY+name+id+key signer key")
    _, _, name, kid, blob = parts
    try:
        raw = b64decode_strict(blob, check="log_key")
    except VerificationError as e:
        raise ConfigError("log key file holds invalid base64") from e
    if len(raw) != 33 or raw[0] != ALG_ED25519:
        raise ConfigError("log key file does not hold an Ed25519 seed")
    key = LogKey(name, Ed25519PrivateKey.from_private_bytes(raw[1:]))
    if ed25519_key_id(name, key.public_key).hex() != kid:
        raise ConfigError("log key file's key id does not match its key")
    return key


def fsync_dir(path: Path) -> None:
    """Make a directory entry (a created or renamed file) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_private_file(path: Path, content: str) -> None:
    """Create ``path`` with mode 0600 (its directory 0700 if new); never overwrite a file."""
    data = (content + "\n").encode("ascii")  # encode first: a failure leaves no empty file
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError as e:
        raise ConfigError(f"{path} already exists; refusing to overwrite a key") from e
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    fsync_dir(path.parent)


#: A key file is a line or a small JSON object; anything longer is not one.
_MAX_KEY_FILE_BYTES = 4096


def missing_key_file(path: Path) -> str:
    """What a command says when an agent's key file is not there, and how to make one."""
    return (
        f"no agent key file at {path} (--key-file / ENGRAM_KEY_FILE): create the agent's key with "
        f"`engram agent create AGENT --key-file {path}` where the log is (it registers the key), "
        "or give the path of the agent's existing key"
    )


def _read_private_file(path: Path, *, missing: str | None = None) -> str:
    try:
        st = path.stat()
    except FileNotFoundError as e:
        raise ConfigError(missing or f"key file {path} does not exist; run `engram init`") from e
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(f"key file {path} is readable by others; chmod 600 it")
    if st.st_size > _MAX_KEY_FILE_BYTES:
        raise ConfigError(f"key file {path} is larger than any key file ({st.st_size} bytes)")
    try:
        return path.read_bytes()[:_MAX_KEY_FILE_BYTES].decode("ascii")
    except UnicodeDecodeError as e:  # found by the fuzz harness: was untyped
        raise ConfigError(f"key file {path} is not a key file (not ASCII at byte {e.start})") from e


def load_log_key(path: Path) -> LogKey:
    return parse_log_signer_key(_read_private_file(path))


def format_agent_key(agent: str, key: Ed25519PrivateKey) -> str:
    return json.dumps(
        {
            "format": "engram.agent-key/v1",
            "agent": agent,
            "seed": base64.b64encode(_seed(key)).decode("ascii"),
        }
    )


def load_agent_key(path: Path) -> tuple[str, Ed25519PrivateKey]:
    try:
        obj = json.loads(_read_private_file(path, missing=missing_key_file(path)))
        if obj.get("format") != "engram.agent-key/v1":
            raise ConfigError(f"{path} is not an engram agent key")
        agent = check_agent_id(obj["agent"])
        seed = b64decode_strict(obj["seed"], check="agent_key")
    except (ValueError, KeyError, TypeError, AttributeError, VerificationError) as e:
        raise ConfigError(f"{path} is not a valid engram agent key: {e}") from e
    if len(seed) != 32:
        raise ConfigError(f"{path} does not hold a 32-byte Ed25519 seed")
    return agent, Ed25519PrivateKey.from_private_bytes(seed)
