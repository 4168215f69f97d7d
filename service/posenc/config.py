"""The service configuration: typed, loaded from TOML, with an embedded default and env overrides.

Precedence, lowest first: the embedded default (`DEFAULT_TOML`, the same text as
`deploy/posenc.toml`) or the file given, then the environment (POSENC_HOST, POSENC_PORT,
POSENC_WORKERS, POSENC_SHM_DIR, POSENC_MAX_ABS_POSITION, POSENC_API_KEY), then command-line
flags (`with_overrides`).
A key the schema does not know is an error naming it, so a typo never silently does nothing.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import PosencError
from .limits import LIMITS, MAX_ABS_POSITION_SYNTAX, MAX_EXACT_POSITION, env_max_abs_position, parse_max_abs_position
from .tables import TableSpec

DEFAULT_TOML = """\
# posenc service configuration. `posenc serve` without --config uses exactly this file's
# content (embedded in posenc.config). Environment variables override the file, flags of
# posenc serve override both: POSENC_HOST, POSENC_PORT, POSENC_WORKERS, POSENC_SHM_DIR,
# POSENC_MAX_ABS_POSITION; POSENC_API_KEY enables table create/delete over HTTP
# (Authorization: Bearer <key>).

[server]
host = "127.0.0.1"
port = 8000            # HTTP
workers = 0            # 0 = number of cores
binary_port = 8001     # posenc serve also runs posenc-server, the native binary protocol (docs/protocol.md),
                       # on this TCP port of `host`, serving the same shm tables; 0 = no TCP listener
binary_socket = ""     # ... and on this unix socket path, "" = none; both off: serve runs no binary server
shm_dir = "/dev/shm"
drain_timeout_s = 10   # SIGTERM: stop accepting, finish in-flight requests for at most this long
header_timeout_s = 10  # a client must send the whole request head within this time (else 408)
body_timeout_s = 30    # ... and the whole body within this time after the head (else 408)
keep_alive_s = 5       # idle keep-alive connections are closed after this
access_log = false     # per-request log lines with the request id (the metrics count every request anyway)
require_api_key = false  # true: every route but /healthz and /readyz needs Authorization: Bearer <POSENC_API_KEY>
cors_origins = []      # browser origins allowed to call the API (CORS); [] = CORS off, ["*"] = any origin

[limits]
max_body_bytes = 8388608       # request body, checked while reading (413)
max_audit_body_bytes = 142606336  # POST /v1/audit's body: a 131072 x 128 float32 cos/sin pair (128 MiB) + 8 MiB
max_head_bytes = 65536         # request line + headers (431)
max_positions = 1048576        # positions (or relative positions) in one request (413)
max_output_bytes = 268435456   # any response array (413)
max_concurrency = 256          # in-flight requests per worker process (429 beyond; health routes exempt)
max_buffered_bytes = 1073741824  # request bodies received + response arrays being sent, per worker (503 beyond)
max_abs_position = 9007199254740992  # largest |position| (2^53, the most: integers are exact in float64
                       # up to there); an integer, or a string of digits or exponent form ("1e13") as
                       # --max-abs-position and POSENC_MAX_ABS_POSITION take it. HTTP, the library in
                       # every worker and the binary server refuse positions beyond it

# Tables built once into shared memory before the workers start; every worker attaches
# them read-only. Fields: name, encoding (a spec, as GET /v1/tables shows), start, stop,
# dtype ("float32" | "float64"), seq_len (rope only: fixes dynamic/longrope frequencies),
# computed (true: no rows stored, each computed on request for any position in [start, stop),
# by default every position max_abs_position admits: ids and millisecond timestamps).

[[tables]]
name = "sin128"
encoding = { kind = "sinusoidal", dim = 128 }
start = 0
stop = 131072
dtype = "float32"

[[tables]]
name = "llama3.1-8b"   # Llama 3.1 RoPE (head_dim 128): rows [cos | sin], 128 wide
start = 0
stop = 131072
dtype = "float32"

[tables.encoding]
kind = "rope"
head_dim = 128
base = 500000.0
max_position_embeddings = 131072

[tables.encoding.scaling]
rope_type = "llama3"
factor = 8.0
low_freq_factor = 1.0
high_freq_factor = 4.0
original_max_position_embeddings = 8192

[[tables]]
name = "sin128-any"    # sin128's rows for any position (transaction ids, timestamps), computed on request
computed = true
encoding = { kind = "sinusoidal", dim = 128 }

[[tables]]
name = "alibi-32h"     # ALiBi slopes for 32 heads (MPT-7B, BLOOM-7B1): row p = slopes * p, 32 wide
start = 0
stop = 131072
dtype = "float32"

[tables.encoding]
kind = "alibi"
n_heads = 32
variant = "paper"
"""


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 0
    binary_port: int = 8001
    binary_socket: str = ""
    shm_dir: str = "/dev/shm"
    drain_timeout_s: float = 10.0
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    keep_alive_s: float = 5.0
    access_log: bool = False
    require_api_key: bool = False
    cors_origins: tuple[str, ...] = ()

    @property
    def worker_count(self) -> int:
        """`workers`, with 0 meaning one per core."""
        return self.workers or os.cpu_count() or 1


@dataclass(frozen=True)
class LimitsConfig:
    max_body_bytes: int = 8 << 20
    #: POST /v1/audit alone: a 131072-row x 128 float32 cos/sin pair (128 MiB) and 8 MiB for the rest of the body.
    max_audit_body_bytes: int = 136 << 20
    max_head_bytes: int = 64 << 10
    max_positions: int = 1 << 20
    max_output_bytes: int = 256 << 20
    max_concurrency: int = 256
    max_buffered_bytes: int = 1 << 30
    #: Largest |position| every door serves (library, HTTP, binary server): see parse_max_abs_position.
    max_abs_position: int = MAX_EXACT_POSITION


@dataclass(frozen=True)
class TableConfig:
    name: str
    spec: TableSpec

    def to_dict(self) -> dict:
        return {"name": self.name, **self.spec.to_dict()}


@dataclass(frozen=True)
class ServiceConfig:
    server: ServerConfig = field(default_factory=ServerConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    tables: tuple[TableConfig, ...] = ()
    #: From POSENC_API_KEY only (never from a file): enables table create/delete over HTTP.
    api_key: str | None = field(default=None, repr=False)
    #: The [[tables]] entries as given, parsed again when the position limit changes (`with_overrides`).
    table_entries: tuple = field(default=(), repr=False, compare=False)

    def to_dict(self) -> dict:
        """The resolved config as plain data (how `posenc serve` hands it to its workers)."""
        return {"server": dataclasses.asdict(self.server), "limits": dataclasses.asdict(self.limits),
                "tables": [t.to_dict() for t in self.tables], "api_key": self.api_key}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ServiceConfig:
        _check_keys(data, {"server", "limits", "tables", "api_key"}, "")
        tables = data.get("tables", [])
        if not isinstance(tables, list):
            raise PosencError("tables", "must be an array of tables")
        limits = _section(LimitsConfig, data.get("limits", {}), "limits")
        api_key = data.get("api_key")
        if api_key is not None and (not isinstance(api_key, str) or not api_key):
            raise PosencError("api_key", "must be a non-empty string")
        return cls(server=_section(ServerConfig, data.get("server", {}), "server"), limits=limits,
                   tables=_tables(tables, limits.max_abs_position), api_key=api_key, table_entries=tuple(tables))

    def check_serveable(self) -> None:
        """What only a serving config must satisfy (a file may set require_api_key, the env the key)."""
        if self.server.require_api_key and self.api_key is None:
            raise PosencError("server.require_api_key", "is true but POSENC_API_KEY is not set")

    @classmethod
    def from_toml(cls, text: str, source: str = "config") -> ServiceConfig:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise PosencError(source, f"is not valid TOML: {exc}") from None
        return cls.from_dict(data)

    def with_overrides(self, *, max_abs_position: int | str | None = None, **server_fields) -> ServiceConfig:
        """A copy with the given [server] fields and [limits] max_abs_position replaced (None = keep),
        validated like the file."""
        changes = {k: v for k, v in server_fields.items() if v is not None}
        config = self
        if changes:
            merged = {**dataclasses.asdict(self.server), **changes}
            config = dataclasses.replace(config, server=_section(ServerConfig, merged, "server"))
        if max_abs_position is not None:
            limits = _section(LimitsConfig, {**dataclasses.asdict(self.limits), "max_abs_position": max_abs_position},
                              "limits")
            tables = _tables(list(self.table_entries), limits.max_abs_position) if self.table_entries else self.tables
            config = dataclasses.replace(config, limits=limits, tables=tables)
        return config


#: Environment variable -> [server] field it overrides.
ENV_OVERRIDES = {"POSENC_HOST": "host", "POSENC_PORT": "port", "POSENC_WORKERS": "workers",
                 "POSENC_SHM_DIR": "shm_dir"}


def load(path: str | os.PathLike | None = None, env: Mapping[str, str] | None = None) -> ServiceConfig:
    """The file at `path` (or the embedded default), then environment overrides."""
    env = os.environ if env is None else env
    if path is None:
        config = ServiceConfig.from_toml(DEFAULT_TOML, "embedded default config")
    else:
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise PosencError("config", f"cannot read {path}: {exc.strerror}") from None
        config = ServiceConfig.from_toml(text, str(path))
    overrides = {}
    for var, name in ENV_OVERRIDES.items():
        if env.get(var):
            overrides[name] = _env_value(var, env[var], ServerConfig.__dataclass_fields__[name].type)
    config = config.with_overrides(**overrides, max_abs_position=env_max_abs_position(env, None))
    if env.get("POSENC_API_KEY"):
        config = dataclasses.replace(config, api_key=env["POSENC_API_KEY"])
    return config


def _env_value(var: str, raw: str, type_name: str):
    if type_name == "int":
        try:
            return int(raw)
        except ValueError:
            raise PosencError(var, f"must be an integer, got {raw!r}") from None
    return raw


def _check_keys(data, known: set[str], prefix: str) -> None:
    if not isinstance(data, Mapping):
        raise PosencError(prefix.rstrip(".") or "config", "must be a table of keys")
    unknown = sorted(set(data) - known)
    if unknown:
        raise PosencError(f"{prefix}{unknown[0]}", f"is not a config key; known: {sorted(known)}")


#: TOML's names for the types a wrong value may have (null: a config handed over as JSON).
_TOML_TYPES = {bool: "a boolean", list: "an array", dict: "a table", type(None): "null"}


def _max_abs_position(where: str, value) -> int:
    """[limits] max_abs_position: a TOML integer, or a string in the syntax of the flag and the
    environment variable (one parser for all three). A TOML float is refused: 9.007199254740993e15
    is rounded to float64 before posenc sees it, so its spelling could not be checked."""
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        try:
            return parse_max_abs_position(str(value))
        except ValueError as exc:
            raise PosencError(where, str(exc)) from None
    kind = "a float (TOML rounds it to float64, so its value could not be checked exactly)" \
        if isinstance(value, float) else _TOML_TYPES.get(type(value), type(value).__name__)
    raise PosencError(where, f"must be {MAX_ABS_POSITION_SYNTAX}: a TOML integer (10000000000000) or a "
                      f"string (\"1e13\"), got {kind}")


def _value(where: str, type_name: str, value, int_minimum: int):
    """One [server]/[limits] value checked against its field type (bools are not numbers)."""
    if where == "limits.max_abs_position":
        return _max_abs_position(where, value)
    if type_name == "tuple[str, ...]":
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
            raise PosencError(where, f"must be an array of non-empty strings, got {value!r}")
        return tuple(value)
    expected = {"str": (str,), "bool": (bool,), "int": (int,), "float": (int, float)}[type_name]
    if isinstance(value, bool) != (type_name == "bool") or not isinstance(value, expected):
        raise PosencError(where, f"must be a {type_name}, got {value!r}")
    if type_name == "int" and value < int_minimum:
        raise PosencError(where, f"must be >= {int_minimum}, got {value}")
    if type_name == "float" and not value > 0:
        raise PosencError(where, f"must be > 0, got {value}")
    return float(value) if type_name == "float" else value


def _section(cls, data, name: str):
    fields = cls.__dataclass_fields__
    _check_keys(data, set(fields), f"{name}.")
    int_minimum = 1 if cls is LimitsConfig else 0
    section = cls(**{key: _value(f"{name}.{key}", fields[key].type, value, int_minimum)
                     for key, value in data.items()})
    if cls is ServerConfig and section.port > 65535:
        raise PosencError("server.port", f"must be <= 65535, got {section.port}")
    if cls is LimitsConfig and section.max_buffered_bytes < section.max_output_bytes + section.max_body_bytes:
        raise PosencError("limits.max_buffered_bytes", "must hold at least one largest request and response "
                          f"(max_output_bytes + max_body_bytes = {section.max_output_bytes + section.max_body_bytes})")
    return section


def _tables(entries: list, max_abs_position: int) -> tuple[TableConfig, ...]:
    """[[tables]] under the service's own position limit: a stored table's range must lie within
    it, and a computed table's default range is every position it admits."""
    try:
        with LIMITS.positions_up_to(max_abs_position):
            parsed = tuple(_table(entry, f"tables[{i}]") for i, entry in enumerate(entries))
    except PosencError as exc:
        if exc.field.rpartition(".")[2] not in ("start", "stop"):
            raise
        raise PosencError(exc.field, f"{exc.message} (limits.max_abs_position is {max_abs_position})") from None
    names = [t.name for t in parsed]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate is not None:
        raise PosencError("tables", f"name {duplicate!r} is used twice")
    return parsed


def _table(entry, where: str) -> TableConfig:
    if not isinstance(entry, Mapping):
        raise PosencError(where, "must be a table")
    entry = dict(entry)
    name = entry.pop("name", None)
    if not isinstance(name, str):
        raise PosencError(f"{where}.name", "is required (a string)")
    from .shm import ShmError
    from .shm.paths import check_name

    try:
        check_name(name)
        return TableConfig(name, TableSpec.from_dict(entry))
    except ShmError as exc:
        raise PosencError(f"{where}.name", exc.message) from None
    except PosencError as exc:
        raise PosencError(f"{where}.{exc.field}", exc.message) from None
