"""How results are written to JSON and read back: the one registry of recorded types, on the
bottom floor (it imports no other helper). Live results go through ``round_trip`` too, so live
and replayed runs hand over the same types."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

_TYPES: dict[str, type] = {}


def register(cls: type) -> type:
    """Class decorator: let instances of this dataclass be saved in and loaded from recordings."""
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"only dataclasses can be registered for recordings, not {cls!r}")
    _TYPES[cls.__name__] = cls
    return cls


def registered_types() -> dict[str, type]:
    """``{name: class}`` of every type a recording may hold (a copy)."""
    return dict(_TYPES)


@register
@dataclasses.dataclass
class Attachment:
    """A file that belongs to a result (a Chrome trace): copied beside the recording when saved."""

    path: str


def encode(obj: Any, attach: Callable[[str], str] | None = None, where: str = "result") -> Any:
    """``obj`` as plain JSON values; registered dataclasses carry ``"__type__"``, and each
    ``Attachment``'s path becomes ``attach(path)`` where given. A ``TypeError`` names the
    position (``where``: "params['sizes'][2]") of anything that cannot be recorded."""
    if isinstance(obj, Attachment):
        return {"__type__": "Attachment", "path": attach(obj.path) if attach else obj.path}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        name = type(obj).__name__
        if _TYPES.get(name) is not type(obj):
            raise TypeError(
                f"{where} is a {name}, which is not registered for recordings: "
                f"decorate it with @codec.register"
            )
        fields = {
            f.name: encode(getattr(obj, f.name), attach, f"{where}.{f.name}")
            for f in dataclasses.fields(obj)
        }
        return {"__type__": name, **fields}
    if isinstance(obj, dict):
        return {_key(k, where): encode(v, attach, f"{where}[{k!r}]") for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [encode(v, attach, f"{where}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "tolist") and hasattr(obj, "dtype"):  # numpy arrays and scalars, torch tensors
        return encode(obj.tolist(), attach, where)
    raise TypeError(
        f"{where} is a {type(obj).__name__}, which cannot be recorded: use plain numbers, strings, "
        f"lists, dicts, Timing or trace results"
    )


def _key(key: Any, where: str) -> str:
    if isinstance(key, bool) or not isinstance(key, (str, int, float)):
        raise TypeError(f"{where} has the key {key!r}: recorded dicts need str or number keys")
    return key if isinstance(key, str) else str(key)


def decode(obj: Any, folder: Path | None = None) -> Any:
    """The inverse of ``encode``; attachment paths made relative to ``folder`` where given."""
    if isinstance(obj, list):
        return [decode(v, folder) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if "__type__" not in obj:
        return {k: decode(v, folder) for k, v in obj.items()}
    name = obj["__type__"]
    if name not in _TYPES:
        raise ValueError(
            f"unknown recorded type {name!r}: known are {sorted(registered_types())}; "
            f"is the helpers package up to date?"
        )
    fields = {k: decode(v, folder) for k, v in obj.items() if k != "__type__"}
    if name == "Attachment" and folder is not None:
        fields["path"] = str(folder / fields["path"])
    return _TYPES[name](**fields)


def dumps(obj: Any) -> str:
    """Encoded JSON text, as recordings store it (NaN and infinity allowed, as Python writes them)."""
    return json.dumps(obj, indent=1, allow_nan=True) + "\n"


def round_trip(obj: Any) -> Any:
    """``obj`` as it would come back from a recording: what a live run hands to the notebook."""
    return decode(json.loads(json.dumps(encode(obj), allow_nan=True)))


def check_recordable(obj: Any, where: str = "params") -> None:
    """Raise ``TypeError`` naming the position of the first value that cannot be recorded."""
    encode(obj, None, where)
