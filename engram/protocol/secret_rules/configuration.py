"""Configuration: ``.netrc``, ``.pgpass``, docker ``auth``, kubeconfig, command-line
passwords, cookies, Azure SAS ``sig=``, HTML inputs, connection strings.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from engram.protocol.secret_rules.core import (
    _CODE_VALUE,
    Rule,
    Span,
    _credential_like,
    is_placeholder,
    valued,
)

# -- configuration ---------------------------------------------------------------------------


def _cred(v: str) -> bool:
    return _credential_like(v.strip("'\""))


def _any_value(v: str) -> bool:
    return len(v.strip("'\"")) >= 3 and not is_placeholder(v)


_HOST = r"(?:localhost|\*|[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)+|\[[0-9A-Fa-f:]+\])"
_QUOTED_OR_WORD = r"(?:'(?P<sq>[^'\n]{1,200})'|\"(?P<dq>[^\"\n]{1,200})\"|(?P<bare>[^\s'\"][^\s'\"]*))"


def _flag_value(pattern: str, *triggers: str, name: str, accept: Callable[[str], bool] = _any_value) -> Rule:
    """A value after a command-line flag: quoted (the quotes stay) or bare."""
    rx = re.compile(pattern + _QUOTED_OR_WORD)

    def find(view: str) -> Iterator[Span]:
        for m in rx.finditer(view):
            g = "sq" if m.group("sq") is not None else "dq" if m.group("dq") is not None else "bare"
            if accept(m.group(g)):
                yield m.span(g)

    return Rule(name, find, triggers)


_COOKIE_PAIR = re.compile(r"(?P<n>[A-Za-z0-9_.$!#%&'*+^`|~-]{1,64})=(?P<v>[^;,\s\"']{8,})")
_COOKIE_LINE = re.compile(r"(?i)(?:\b(?:set-)?cookie\s*:|(?:^|\s)(?:-b|--cookie)\s+['\"]?)(?P<v>[^\r\n'\"]*)")
_SESSION_COOKIE = re.compile(
    r"(?i)(?<![A-Za-z0-9_])(?:sessionid|sessid|phpsessid|jsessionid|aspsessionid[a-z]*|connect\.sid|laravel_session"
    r"|_[a-z0-9]+_session|remember_(?:token|user_token)|__(?:secure|host)-[a-z0-9_-]+|auth_token|access_token)"
    r"=(?P<v>[^;,\s\"'&]{8,})"
)


def _cookie_value(value: str) -> bool:
    """A session identifier: generated, so it has a digit (``doublestuff`` is a value of a
    documentation example), and no escape (the text is a string literal of code)."""
    return "\\" not in value and any(c.isdigit() for c in value) and not is_placeholder(value)


def _cookies(view: str) -> Iterator[Span]:
    """Every value of a ``Cookie:``/``Set-Cookie:`` header or ``curl -b``, and a session
    cookie (``sessionid=``, ``PHPSESSID=``, ``connect.sid=`` ...) anywhere."""
    for line in _COOKIE_LINE.finditer(view):
        base = line.start("v")
        for pair in _COOKIE_PAIR.finditer(line.group("v")):
            name = pair.group("n").lower()
            value = pair.group("v")
            if name in ("path", "domain", "expires", "max-age", "samesite") or not _cookie_value(value):
                continue
            yield base + pair.start("v"), base + pair.end("v")
    for m in _SESSION_COOKIE.finditer(view):
        if _cookie_value(m.group("v")):
            yield m.span("v")


CONFIG_RULES: tuple[Rule, ...] = (
    valued(
        "netrc_password",
        r"(?m)(?:(?<=\s)machine[ \t]+\S+|^machine[ \t]+\S+|^[ \t]*default)(?:\s+(?:login|account|port)[ \t]+\S+){0,4}"
        r"\s+password[ \t]+"
        r"(?P<v>\S{3,})",
        "password",
    ),
    valued("netrc_password", r"(?:(?<=\s)|^)login[ \t]+\S+[ \t]+password[ \t]+(?P<v>\S{3,})", "password"),
    valued(
        "pgpass_password",
        r"(?m)(?:^|(?<=[\s\"'`(]))"
        + _HOST
        + r":(?:\d{1,5}|\*):(?:[A-Za-z0-9_.$-]+|\*):(?:[A-Za-z0-9_.@$-]+|\*):(?P<v>[^\s]{3,})[ \t]*$",
        ":",
    ),
    valued(
        "docker_auth",
        r"(?i)[\"']?\b(?:auth|identitytoken|registrytoken)[\"']?\s*:\s*[\"'](?P<v>[A-Za-z0-9+/=_.-]{12,})[\"']",
        "auth",
        "identitytoken",
        "registrytoken",
        accept=_cred,
    ),
    valued(
        "kubeconfig_key",
        r"(?i)\b(?:client-key-data|tls\.key|ssh-privatekey)[\"']?\s*:\s*[\"']?(?P<v>[A-Za-z0-9+/]{20,}={0,2})",
        "client-key-data",
        "tls.key",
        "ssh-privatekey",
    ),
    _flag_value(
        r"\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|mysqlcheck|mysqlsh|mariadb|mariadb-dump)\b"
        r"[^\n|;&]{0,200}?(?<=\s)-p(?=[^\s-])",
        "mysql",
        "mariadb",
        name="mysql_password",
    ),
    _flag_value(r"\bsshpass\b[^\n|;&]{0,80}?(?<=\s)-p[ \t]*", "sshpass", name="sshpass_password"),
    _flag_value(
        r"\b(?:docker|podman|nerdctl|buildah|skopeo|helm(?:[ \t]+registry)?|oc|cf|az)[ \t]+login\b[^\n|;&]{0,200}?(?<=\s)-p[ \t]+",
        "login",
        name="cli_password",
    ),
    _flag_value(r"\bredis-cli\b[^\n|;&]{0,200}?(?<=\s)-a[ \t]+", "redis-cli", name="cli_password"),
    _flag_value(
        r"\bldap(?:search|add|modify|delete|passwd|whoami|compare|modrdn)\b[^\n|;&]{0,200}?(?<=\s)-w[ \t]+",
        "ldap",
        name="cli_password",
    ),
    _flag_value(r"(?<![\w-])-pass(?:in|out)?[ \t]+pass:", "pass:", name="cli_password"),
    _flag_value(
        r"(?<![\w-])--?(?:password|passwd|pass|db-password|token|auth-token|access-token|api-key|apikey|secret"
        r"|client-secret|secret-key|storepass|keypass|srcstorepass|deststorepass|private-key)(?:[ \t]+|=)",
        "pass",
        "token",
        "key",
        "secret",
        name="cli_password",
        accept=_cred,
    ),
    valued(
        "smb_password",
        r"\b(?:smbclient|rpcclient|smbmap|smbget|crackmapexec|nxc|net)\b[^\n]{0,200}?-U[ \t]+['\"]?[^\s%'\"]+%(?P<v>[^\s'\"]+)",
        "-u",
    ),
    valued("azure_sas", r"(?i)[?&;]sig=(?P<v>[A-Za-z0-9%+/=]{16,})", "sig="),
    Rule(
        "session_cookie",
        _cookies,
        (
            "cookie",
            "-b ",
            "sessid",
            "sessionid",
            "connect.sid",
            "_session=",
            "remember_",
            "__secure-",
            "__host-",
            "auth_token=",
            "access_token=",
        ),
    ),
    valued(
        "html_input",
        r"(?i)<input\b[^>]{0,200}?\b(?:type|name|id)\s*=\s*[\"']?(?:password|passwd|pwd|[\w-]{0,40}(?:secret|token"
        r"|api[_-]?key)[\w-]{0,40})[\"']?[^>]{0,200}?\bvalue\s*=\s*[\"'](?P<v>[^\"'\n]{3,200})[\"']",
        "<input",
    ),
    valued("smtp_auth", r"\bAUTH[ \t]+PLAIN[ \t]+(?P<v>[A-Za-z0-9+/]{8,}={0,2})", "auth plain"),
    valued(
        "connection_password",
        r"(?i)(?<=;)[ \t]*pwd[ \t]*=[ \t]*(?P<v>[^;\s'\"/~][^;\s'\"]{2,})(?=[ \t]*(?:;|$|['\"]))",
        "pwd",
        accept=lambda v: not is_placeholder(v) and _CODE_VALUE.match(v) is None,
    ),
    valued(  # a connection string that opens with it: "Pwd=...;Uid=sa;"
        "connection_password",
        r"(?i)(?:^|(?<=[\"']))[ \t]*pwd[ \t]*=[ \t]*(?P<v>[^;\s'\"/~][^;\s'\"]{2,})(?=[ \t]*;)",
        "pwd",
        accept=lambda v: not is_placeholder(v) and _CODE_VALUE.match(v) is None,
    ),
    valued(
        "wifi_password",
        r"(?i)\b(?:wpa_passphrase|psk)[ \t]*=[ \t]*\"?(?P<v>[^\"\s][^\"\n]{7,62})\"?",
        "psk",
        "wpa_passphrase",
    ),
)
